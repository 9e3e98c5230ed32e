// defines: merge_datasets() and dataset_prefixes_in_directory()
#include "data/merge.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "data/file_util.h"
#include "util/error.h"

namespace lmforge::data {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Real path of an existing file, or "" if it does not exist.
std::string real_path(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (!r) return "";
  std::string s = r;
  std::free(r);
  return s;
}

}  // namespace

std::vector<std::string> dataset_prefixes_in_directory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw Error(os_error(dir, "cannot read directory"));
  std::map<std::string, int> seen;  // stem -> bit 1: .bin present, bit 2: .idx present
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    std::string full = dir + "/" + name;
    struct stat st;
    if (::stat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (ends_with(name, ".bin")) seen[name.substr(0, name.size() - 4)] |= 1;
    else if (ends_with(name, ".idx")) seen[name.substr(0, name.size() - 4)] |= 2;
  }
  ::closedir(d);
  std::vector<std::string> prefixes;
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  for (auto& [stem, bits] : seen) {  // std::map iterates in byte order, which is Python's sorted() for UTF-8 names
    if (bits != 3)
      throw Error(base + stem + (bits == 1 ? ".bin" : ".idx") + ": has no matching " + (bits == 1 ? ".idx" : ".bin") +
                  " in the input directory");
    prefixes.push_back(base + stem);
  }
  if (prefixes.empty()) throw Error(dir + ": no .bin/.idx dataset pairs in this directory");
  return prefixes;
}

MergeSummary merge_datasets(const std::vector<std::string>& input_prefixes, const std::string& output_prefix) {
  if (input_prefixes.empty()) throw Error("merge: no input datasets given");
  MergeSummary summary;
  summary.inputs = input_prefixes;
  // Validate everything before writing anything: a bad last input must not cost a long copy of the first ones.
  const std::string out_bin = real_path(output_prefix + ".bin"), out_idx = real_path(output_prefix + ".idx");
  for (size_t k = 0; k < input_prefixes.size(); ++k) {
    const std::string& prefix = input_prefixes[k];
    auto ds = IndexedDataset::open(prefix);
    for (const char* ext : {".bin", ".idx"}) {
      std::string in = real_path(prefix + ext);
      if (!in.empty() && (in == out_bin || in == out_idx))
        throw Error(prefix + ext + ": is also the output; choose another --output-prefix");
    }
    if (k == 0) {
      summary.dtype = ds->dtype();
    } else if (ds->dtype() != summary.dtype) {
      throw Error(prefix + ".idx: dtype " + dtype_name(ds->dtype()) + " differs from " + dtype_name(summary.dtype) +
                  " of " + input_prefixes[0] + ".idx (all merged datasets must share one dtype)");
    }
    for (uint64_t j = 0; j < ds->document_count(); ++j)
      summary.empty_documents += ds->document_index(j) == ds->document_index(j + 1);
  }
  IndexedDatasetWriter writer(output_prefix, summary.dtype);
  for (const std::string& prefix : input_prefixes) writer.append_dataset(prefix);
  summary.documents = writer.documents();
  summary.sequences = writer.sequences();
  summary.tokens = writer.tokens();
  writer.finish();
  summary.bin_bytes = summary.tokens * dtype_size(summary.dtype);
  summary.idx_bytes = 34 + 12 * summary.sequences + 8 * (summary.documents + 1);
  return summary;
}

}  // namespace lmforge::data
