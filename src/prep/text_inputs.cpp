// defines: expand_text_inputs()
#include "prep/text_inputs.h"

#include <algorithm>
#include <filesystem>

#include "data/line_reader.h"
#include "util/error.h"

namespace lmforge::prep {

std::vector<std::string> expand_text_inputs(const std::vector<std::string>& specs) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& spec : specs) {
    std::error_code ec;
    if (!fs::is_directory(spec, ec)) {
      for (std::string& f : data::expand_input_specs({spec})) files.push_back(std::move(f));
      continue;
    }
    std::vector<std::string> listed;
    for (const fs::directory_entry& e : fs::directory_iterator(spec, ec)) {
      const std::string name = e.path().filename().string();
      auto ends_with = [&](const char* suffix) {
        const std::string s(suffix);
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
      };
      std::error_code type_error;
      if (e.is_regular_file(type_error) &&
          (ends_with(".txt") || ends_with(".txt.gz") || ends_with(".txt.zst") || ends_with(".txt.xz")))
        listed.push_back(e.path().string());
    }
    if (ec) throw Error(spec + ": cannot list the directory (" + ec.message() + ")");
    if (listed.empty()) throw Error(spec + ": the directory holds no .txt files");
    std::sort(listed.begin(), listed.end());
    files.insert(files.end(), listed.begin(), listed.end());
  }
  return files;
}

}  // namespace lmforge::prep
