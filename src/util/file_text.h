// defines: read_text_file() — a whole (config) file as text, with errors that say what the path is when it is not a
//          readable file (a directory read as a file gives no bytes, which JSON readers report as "Empty: no JSON
//          found")
#pragma once
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>

#include "util/error.h"
#include "util/strings.h"

namespace lmforge {

// The bytes of `path`; `what` names the file's role in errors ("the DeepSpeed config", "--bert-config-file").
inline std::string read_text_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status))
    throw Error(path + ": is a directory, not a file (" + what + " must be a JSON file)");
  if (!std::filesystem::exists(status)) throw Error(path + ": " + what + " does not exist");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw Error(path + ": cannot open " + what + ": " + errno_text());
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  const std::string why = bad ? errno_text() : "";
  std::fclose(f);
  if (bad) throw Error(path + ": cannot read " + what + ": " + why);
  return text;
}

}  // namespace lmforge
