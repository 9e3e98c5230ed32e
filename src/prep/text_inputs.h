// defines: expand_text_inputs(): --input specs of plain-text formats (--input-format text, sentences) to files
#pragma once
#include <string>
#include <vector>

namespace lmforge::prep {

// Files, globs and directories in order, as data::expand_input_specs() does for JSON, except that a directory gives
// its regular files named *.txt (and *.txt.gz, *.txt.zst, *.txt.xz), sorted by name. NVIDIA's script takes a
// directory's *.txt in os.listdir order (file-system order, unsorted); since the documents' order before the shuffle
// decides the output, give such files explicitly in that order to reproduce a run on a directory.
std::vector<std::string> expand_text_inputs(const std::vector<std::string>& specs);

}  // namespace lmforge::prep
