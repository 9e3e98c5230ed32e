// The writers of hf_files.h. tokenizer.json is assembled as text in serde_json's PrettyFormatter layout (not
// through a JSON library) because byte equality with HF's file is what the tests check.
#include "tokenizer_train/hf_files.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "data/file_util.h"
#include "util/error.h"
#include "util/json_text.h"

namespace lmforge::tokenizer_train {
namespace {

void append_added_tokens(const BpeModel& model, std::string& out) {
  if (model.specials == 0) {
    out += "  \"added_tokens\": [],\n";
    return;
  }
  out += "  \"added_tokens\": [\n";
  for (size_t id = 0; id < model.specials; ++id) {
    out += "    {\n      \"id\": " + std::to_string(id) + ",\n      \"content\": " + json_quote(model.vocab[id]) +
           ",\n      \"single_word\": false,\n      \"lstrip\": false,\n      \"rstrip\": false,\n"
           "      \"normalized\": false,\n      \"special\": true\n    }";
    out += id + 1 < model.specials ? ",\n" : "\n";
  }
  out += "  ],\n";
}

void append_vocab(const BpeModel& model, std::string& out) {
  if (model.vocab.empty()) {
    out += "    \"vocab\": {}";
    return;
  }
  out += "    \"vocab\": {\n";
  for (size_t id = 0; id < model.vocab.size(); ++id) {
    out += "      " + json_quote(model.vocab[id]) + ": " + std::to_string(id);
    out += id + 1 < model.vocab.size() ? ",\n" : "\n";
  }
  out += "    }";
}

}  // namespace

std::string bpe_vocab_json(const BpeModel& model) {
  std::string out = "{";
  for (size_t id = 0; id < model.vocab.size(); ++id) {
    if (id) out += ',';
    out += json_quote(model.vocab[id]) + ':' + std::to_string(id);
  }
  return out + "}";
}

std::string bpe_merges_txt(const BpeModel& model) {
  std::string out = "#version: 0.2\n";
  for (const auto& [left, right] : model.merges) out += model.vocab[left] + ' ' + model.vocab[right] + '\n';
  return out;
}

std::string wordpiece_vocab_txt(const BpeModel& model) {
  std::string out;
  for (const std::string& token : model.vocab) out += token + '\n';
  return out;
}

std::string bpe_tokenizer_json(const BpeModel& model, bool lowercase) {
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  append_added_tokens(model, out);
  out += lowercase ? "  \"normalizer\": {\n    \"type\": \"Lowercase\"\n  },\n" : "  \"normalizer\": null,\n";
  out += "  \"pre_tokenizer\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n"
         "    \"trim_offsets\": true,\n    \"use_regex\": true\n  },\n"
         "  \"post_processor\": null,\n"
         "  \"decoder\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n"
         "    \"trim_offsets\": true,\n    \"use_regex\": true\n  },\n"
         "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
         "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
         "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n";
  append_vocab(model, out);
  if (model.merges.empty()) {
    out += ",\n    \"merges\": []\n";
  } else {
    out += ",\n    \"merges\": [\n";
    for (size_t i = 0; i < model.merges.size(); ++i) {
      out += "      [\n        " + json_quote(model.vocab[model.merges[i].first]) + ",\n        " +
             json_quote(model.vocab[model.merges[i].second]) + "\n      ]";
      out += i + 1 < model.merges.size() ? ",\n" : "\n";
    }
    out += "    ]\n";
  }
  return out + "  }\n}";
}

std::string wordpiece_tokenizer_json(const BpeModel& model, const WordSplitOptions& split) {
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  append_added_tokens(model, out);
  out += "  \"normalizer\": {\n    \"type\": \"BertNormalizer\",\n    \"clean_text\": " + flag(split.clean_text) +
         ",\n    \"handle_chinese_chars\": " + flag(split.handle_chinese_chars) + ",\n    \"strip_accents\": " +
         flag(split.strip_accents.value_or(split.lowercase)) + ",\n    \"lowercase\": " + flag(split.lowercase) + "\n  },\n";
  out += "  \"pre_tokenizer\": {\n    \"type\": \"BertPreTokenizer\"\n  },\n"
         "  \"post_processor\": null,\n"
         "  \"decoder\": {\n    \"type\": \"WordPiece\",\n    \"prefix\": \"##\",\n    \"cleanup\": true\n  },\n"
         "  \"model\": {\n    \"type\": \"WordPiece\",\n    \"unk_token\": \"[UNK]\",\n"
         "    \"continuing_subword_prefix\": \"##\",\n    \"max_input_chars_per_word\": 100,\n";
  append_vocab(model, out);
  return out + "\n  }\n}";
}

OutputFiles::OutputFiles(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw Error("--output-dir " + dir_ + ": cannot create the directory" + (ec ? ": " + ec.message() : ""));
  // Temporaries of a run that was killed (".<name>.tmp-<pid>" whose process no longer exists) are removed.
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (name.empty() || name[0] != '.' || at == std::string::npos || at + 5 >= name.size()) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = pid_t(std::stol(digits));
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) ::unlink(entry.path().c_str());
  }
}

OutputFiles::~OutputFiles() {
  if (committed_) return;
  for (const auto& file : files_) ::unlink(file.second.c_str());
}

std::string OutputFiles::temporary_path(const std::string& stem) const {
  return dir_ + "/." + stem + ".tmp-" + std::to_string(::getpid());
}

void OutputFiles::adopt(const std::string& name, const std::string& temporary) {
  files_.emplace_back(name, temporary);
}

void OutputFiles::write(const std::string& name, const std::string& content) {
  const std::string path = temporary_path(name);
  files_.emplace_back(name, path);
  data::UniqueFd fd = data::open_write_truncate(path);
  data::write_all(fd.get(), content.data(), content.size(), path);
  if (::fsync(fd.get()) != 0) throw Error(data::os_error(path, "fsync"));
}

std::vector<std::string> OutputFiles::commit() {
  std::vector<std::string> done;
  for (const auto& [name, tmp] : files_) {
    const std::string final_path = dir_ + "/" + name;
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) throw Error(data::os_error(final_path, "rename"));
    done.push_back(final_path);
  }
  committed_ = true;
  if (!files_.empty()) data::fsync_parent_dir(done.front());
  return done;
}

}  // namespace lmforge::tokenizer_train
