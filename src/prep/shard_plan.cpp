// defines: make_shard_plan(), plan.json and shard manifests (write, read, check), process temporary directories
#include "prep/shard_plan.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <array>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <set>

#include <simdjson.h>
#include <unicode/uvernum.h>

#include "data/file_util.h"
#include "data/indexed_dataset.h"
#include "data/line_reader.h"
#include "prep/range_reader.h"
#include "prep/text_inputs.h"
#include "text/tokenizer_factory.h"
#include "util/error.h"
#include "util/json_text.h"

namespace lmforge::prep {
namespace {

// Bumped whenever shard contents would change for the same inputs and flags (a new lmforge release included).
constexpr const char* kFormat = "lmforge 0.1.0 prep shards v1";

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// "<fnv1a64 of the content> (<size> bytes)": the tokenizer files matter by content, not by path.
std::string file_fingerprint(const std::string& path) {
  data::UniqueFd fd = data::open_read(path);
  std::vector<char> buf(1u << 20);
  uint64_t h = 14695981039346656037ull, size = 0;
  for (;;) {
    size_t n = data::read_some(fd.get(), buf.data(), buf.size(), path);
    if (n == 0) break;
    h = fnv1a64(buf.data(), n, h);
    size += n;
  }
  return hex64(h) + " (" + std::to_string(size) + " bytes)";
}

// fnv1a64 over 4 KB samples at the start, middle and end of every `region` bytes of the file: a file whose
// content was replaced in place with its size and modification time kept (cp -p, rsync -t, touch -r) gets
// another plan, unless only bytes between samples changed. Reads 12 KB per region (per 256 MB by default).
std::string content_samples(const std::string& path, uint64_t size, uint64_t region) {
  constexpr uint64_t kSample = 4096;
  data::UniqueFd fd = data::open_read(path);
  std::vector<char> buf(kSample);
  uint64_t h = 14695981039346656037ull;
  region = std::max<uint64_t>(region, 1);
  for (uint64_t begin = 0; begin < size; begin += region) {
    const uint64_t end = std::min(size, begin + region);
    for (uint64_t at : {begin, begin + (end - begin) / 2, end - std::min(end - begin, kSample)}) {
      const uint64_t want = std::min(kSample, end - at);
      const ssize_t n = ::pread(fd.get(), buf.data(), want, static_cast<off_t>(at));
      if (n < 0) throw Error(data::os_error(path, "cannot read input"));
      h = fnv1a64(buf.data(), static_cast<size_t>(n), h);
    }
  }
  return hex64(h);
}

struct stat stat_or_throw(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(data::os_error(path, "cannot stat input"));
  return st;
}

std::string write_temp_and_rename(const std::string& final_path, const std::string& tmp_path, const std::string& text) {
  {
    data::UniqueFd fd = data::open_write_truncate(tmp_path);
    data::write_all(fd.get(), text.data(), text.size(), tmp_path);
    if (::fsync(fd.get()) != 0) throw Error(data::os_error(tmp_path, "fsync failed"));
  }
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    std::string msg = data::os_error(final_path, "cannot rename " + tmp_path + " to it");
    ::unlink(tmp_path.c_str());
    throw Error(msg);
  }
  data::fsync_parent_dir(final_path);
  return final_path;
}

simdjson::dom::element parse_json(simdjson::dom::parser& parser, const std::string& text, const std::string& path) {
  simdjson::dom::element root;
  if (auto error = parser.parse(text).get(root))
    throw Error(path + ": not valid JSON (" + simdjson::error_message(error) + "); the file is damaged: remove it");
  return root;
}

template <typename T>
T field(simdjson::dom::element e, const char* name, const std::string& path) {
  T value;
  if (e[name].get(value))
    throw Error(path + ": missing or mistyped field \"" + name + "\"; the file is damaged: remove it");
  return value;
}

std::string str_field(simdjson::dom::element e, const char* name, const std::string& path) {
  return std::string(field<std::string_view>(e, name, path));
}

}  // namespace

std::string describe_input(uint32_t index, const std::string& path, uint64_t shard_bytes, uint64_t* size_out,
                           bool* compressed_out) {
  const struct stat st = stat_or_throw(path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  char mtime[48];
  std::snprintf(mtime, sizeof mtime, "%lld.%09ld", static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec);
  const bool compressed = is_compressed_file(path);
  if (size_out) *size_out = size;
  if (compressed_out) *compressed_out = compressed;
  return "input " + std::to_string(index) + ": " + path + " size " + std::to_string(size) + " mtime " + mtime +
         (compressed ? " compressed" : "") + " samples " + content_samples(path, size, shard_bytes);
}

InputGuard::InputGuard(const ShardPlan& plan, std::string shard_dir)
    : plan_(plan), shard_dir_(std::move(shard_dir)), verified_(plan.files.size()) {
  const std::string key = "shard-size: ";
  for (const auto& line : plan.description)
    if (line.rfind(key, 0) == 0) shard_bytes_ = std::strtoull(line.c_str() + key.size(), nullptr, 10);
  if (shard_bytes_ == 0) throw Error(shard_dir_ + "/plan.json: no shard-size line; the file is damaged: remove it");
}

void InputGuard::check(uint32_t file, const std::string& what) {
  const std::string& path = plan_.files.at(file);
  const std::string head = "input " + std::to_string(file) + ": ";
  const std::string* planned = nullptr;
  for (const auto& line : plan_.description)
    if (line.rfind(head, 0) == 0) planned = &line;
  if (planned == nullptr)
    throw Error(shard_dir_ + "/plan.json: no line for " + path + "; the file is damaged: remove it");
  // Unchanged since its content last matched the plan: the same file (device, inode), size, modification and
  // change times. Writing into a file changes its ctime, which no tool can set back, so this catches a rewrite in
  // place (cp -p, a re-upload) as well as a replacement (rsync's rename, a new inode).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(data::os_error(path, "cannot stat input") + "; " + what + " is not committed: every shard must be "
                "cut from the input the plan " + plan_.id + " was made from");
  }
  auto& seen = verified_[file];
  const std::array<int64_t, 7> key{static_cast<int64_t>(st.st_dev), static_cast<int64_t>(st.st_ino), st.st_size,
                                   st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
  if (seen && *seen == key) return;
  // Changed (or not yet looked at): its size, modification time and content samples must be the plan's.
  const std::string now = describe_input(file, path, shard_bytes_);
  if (now != *planned) {
    const auto facts = [&](const std::string& line) { return line.substr(head.size() + path.size() + 1); };
    throw Error(path + ": changed since plan " + plan_.id + " was made from it (the plan has \"" + facts(*planned) +
                "\", the file now \"" + facts(now) + "\"): " + what +
                " is not committed, since its bytes may come from either content and the shards already committed "
                "from the other. Put the original file back and rerun the same command to go on, or remove " +
                shard_dir_ + " to start over from the new content.");
  }
  seen = key;
}

uint64_t fnv1a64(const void* data, size_t size, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

ShardPlan make_shard_plan(const PrepOptions& options, uint64_t shard_bytes, bool split) {
  if (options.inputs.empty()) throw Error("no --input given");
  check_json_keys(options);
  if (shard_bytes == 0) throw Error("--shard-size must be at least 1 byte");
  ShardPlan plan;
  plan.json_keys = options.json_keys;
  plan.level = dataset_level(options);
  plan.files =
      options.input_format == "text" ? expand_text_inputs(options.inputs) : data::expand_input_specs(options.inputs);
  refuse_output_over_input(options, plan.files);
  // Byte-range shards need files with a size that can be sought: a device (/dev/zero, "size" 0) or a FIFO would plan
  // as empty or fail with "Illegal seek" midway. Single-process mode streams them.
  for (const std::string& f : plan.files) {
    std::error_code ec;
    const auto st = std::filesystem::status(f, ec);
    if (!ec && !std::filesystem::is_regular_file(st))
      throw Error(f + ": not a regular file (a device, FIFO or socket); sharded mode cuts inputs into byte ranges and "
                  "needs regular files — run without --shard-size, --claim or a launcher to stream it");
  }

  auto& d = plan.description;
  d.push_back(std::string("format: ") + kFormat);
  d.push_back("tokenizer-type: " + options.tokenizer.type);
  d.push_back("vocab-file: " + (options.tokenizer.vocab_file.empty() ? "-" : file_fingerprint(options.tokenizer.vocab_file)));
  d.push_back("merge-file: " + (options.tokenizer.merge_file.empty() ? "-" : file_fingerprint(options.tokenizer.merge_file)));
  // Every TokenizerOptions field that can change ids belongs here (a new field must be added too).
  std::string hf = options.tokenizer.name_or_path;
  if (!hf.empty() && std::filesystem::is_directory(hf)) hf += "/tokenizer.json";
  d.push_back("tokenizer-name-or-path: " + (hf.empty() ? "-" : std::filesystem::is_regular_file(hf) ? file_fingerprint(hf) : hf));
  d.push_back("eod-token: " + (options.tokenizer.eod_token.empty() ? "-" : options.tokenizer.eod_token));
  // Only for PretrainedFromHF (the others reject the option), so other plans keep their ids.
  if (options.tokenizer.type == "PretrainedFromHF")
    d.push_back(std::string("special-tokens: ") + (options.tokenizer.add_special_tokens ? "yes" : "no"));
  d.push_back("tokenizer-model: " + (options.tokenizer.model_file.empty() ? "-" : file_fingerprint(options.tokenizer.model_file)));
  d.push_back("vocab-extra-ids: " + std::to_string(options.tokenizer.vocab_extra_ids));
  // Only for NullTokenizer (the others reject the option), so other plans keep their descriptions.
  if (options.tokenizer.type == "NullTokenizer") d.push_back("vocab-size: " + std::to_string(options.tokenizer.vocab_size));
  std::string keys;
  for (const auto& k : options.json_keys) keys += (keys.empty() ? "" : " ") + k;
  d.push_back("json-keys: " + keys);
  d.push_back(std::string("append-eod: ") + (options.append_eod ? "yes" : "no"));
  d.push_back(std::string("skip-invalid: ") + (options.skip_invalid ? "yes" : "no"));
  // Only when changed, so plans made before the flag keep their ids: it decides which lines are invalid.
  if (options.max_line_bytes != data::kDefaultMaxLineBytes)
    d.push_back("max-line-bytes: " + std::to_string(options.max_line_bytes));
  d.push_back("shard-size: " + std::to_string(shard_bytes));
  // Only when not the default, so plans made before these flags keep their ids.
  if (options.input_format != "json") d.push_back("input-format: " + options.input_format);
  if (options.tokenizer.type == "WordLevel") d.push_back("unk-token: " + options.tokenizer.unk_token);
  // Only when on, so plans without it keep their ids. The ICU version is part of it: its sentence rules and
  // locale data decide the boundaries, so hosts with another ICU would cut sentences differently.
  if (options.split_sentences)
    d.push_back(std::string("split-sentences: ICU ") + U_ICU_VERSION + ", lang " + options.lang + ", keep-newlines " +
                (options.keep_newlines ? "yes" : "no"));

  for (uint32_t f = 0; f < plan.files.size(); ++f) {
    const std::string& path = plan.files[f];
    uint64_t size = 0;
    bool compressed = false;
    d.push_back(describe_input(f, path, shard_bytes, &size, &compressed));
    plan.total_bytes += size;
    if (!split) continue;
    auto add = [&](bool whole, uint64_t begin, uint64_t end) {
      Shard s;
      s.index = static_cast<uint32_t>(plan.shards.size());
      s.file = f;
      s.piece.path = path;
      s.piece.whole_file = whole;
      s.piece.begin = begin;
      s.piece.end = end;
      s.piece.size = end - begin;
      plan.shards.push_back(std::move(s));
    };
    if (compressed) {
      add(true, 0, size);  // a compressed stream can only be decoded from its start
      continue;
    }
    // Boundaries at multiples of shard_bytes, each moved forward to a line start; a line longer than a shard
    // makes the next boundary coincide with a later one, which is then dropped.
    uint64_t begin = 0;
    do {
      uint64_t end = size;
      for (uint64_t nominal = begin + shard_bytes; nominal < size; nominal += shard_bytes) {
        end = next_line_start(path, nominal, size);
        if (end > begin) break;
      }
      add(false, begin, end);
      begin = end;
    } while (begin < size);
  }
  std::string joined;
  for (const auto& line : d) joined += line + "\n";
  plan.id = hex64(fnv1a64(joined.data(), joined.size()));
  return plan;
}

std::string shard_dir(const std::string& output_prefix) { return output_prefix + ".shards"; }

std::string shard_name(uint32_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard-%06u", index);
  return buf;
}

std::string shard_dataset_prefix(const std::string& output_prefix, uint32_t index, const std::string& key) {
  return shard_dir(output_prefix) + "/" + shard_name(index) + "_" + key + "_document";
}

std::string shard_manifest_path(const std::string& output_prefix, uint32_t index) {
  return shard_dir(output_prefix) + "/" + shard_name(index) + ".json";
}

std::string plan_to_json(const ShardPlan& plan) {
  std::string j = "{\n  \"plan_id\": " + json_quote(plan.id) + ",\n  \"description\": [";
  for (size_t i = 0; i < plan.description.size(); ++i)
    j += (i ? ",\n    " : "\n    ") + json_quote(plan.description[i]);
  j += "\n  ],\n  \"json_keys\": [";
  for (size_t i = 0; i < plan.json_keys.size(); ++i) j += (i ? ", " : "") + json_quote(plan.json_keys[i]);
  j += "],\n  \"level\": " + json_quote(plan.level) + ",\n  \"files\": [";
  for (size_t i = 0; i < plan.files.size(); ++i) j += (i ? ",\n    " : "\n    ") + json_quote(plan.files[i]);
  j += "\n  ],\n  \"total_bytes\": " + std::to_string(plan.total_bytes) + ",\n";
  j += "  \"shard_fields\": [\"file\", \"whole_file\", \"begin\", \"end\"],\n  \"shards\": [\n";
  for (size_t i = 0; i < plan.shards.size(); ++i) {
    const Shard& s = plan.shards[i];
    j += "    [" + std::to_string(s.file) + ", " + (s.piece.whole_file ? "1" : "0") + ", " +
         std::to_string(s.piece.begin) + ", " + std::to_string(s.piece.end) + "]" +
         (i + 1 < plan.shards.size() ? ",\n" : "\n");
  }
  j += "  ]\n}\n";
  return j;
}

ShardPlan plan_from_json(const std::string& text, const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element root = parse_json(parser, text, path);
  ShardPlan plan;
  plan.id = str_field(root, "plan_id", path);
  for (auto e : field<simdjson::dom::array>(root, "description", path)) {
    std::string_view v;
    if (e.get(v)) throw Error(path + ": description holds a non-string; the file is damaged: remove it");
    plan.description.emplace_back(v);
  }
  for (auto e : field<simdjson::dom::array>(root, "json_keys", path)) {
    std::string_view v;
    if (e.get(v)) throw Error(path + ": json_keys holds a non-string; the file is damaged: remove it");
    plan.json_keys.emplace_back(v);
  }
  std::string_view level;
  if (!root["level"].get(level)) plan.level = std::string(level);  // absent in plans written before sentences
  if (plan.level != "document" && plan.level != "sentence")
    throw Error(path + ": level \"" + plan.level + "\" is neither document nor sentence; the file is damaged: remove it");
  for (auto e : field<simdjson::dom::array>(root, "files", path)) {
    std::string_view v;
    if (e.get(v)) throw Error(path + ": files holds a non-string; the file is damaged: remove it");
    plan.files.emplace_back(v);
  }
  plan.total_bytes = field<uint64_t>(root, "total_bytes", path);
  for (auto e : field<simdjson::dom::array>(root, "shards", path)) {
    uint64_t v[4];
    size_t n = 0;
    simdjson::dom::array a;
    if (e.get(a)) throw Error(path + ": a shard entry is not a list; the file is damaged: remove it");
    for (auto x : a) {
      if (n == 4 || x.get(v[n])) throw Error(path + ": a shard entry is malformed; the file is damaged: remove it");
      ++n;
    }
    if (n != 4 || v[0] >= plan.files.size() || v[2] > v[3])
      throw Error(path + ": a shard entry is malformed; the file is damaged: remove it");
    Shard s;
    s.index = static_cast<uint32_t>(plan.shards.size());
    s.file = static_cast<uint32_t>(v[0]);
    s.piece.path = plan.files[s.file];
    s.piece.whole_file = v[1] != 0;
    s.piece.begin = v[2];
    s.piece.end = v[3];
    s.piece.size = v[3] - v[2];
    plan.shards.push_back(std::move(s));
  }
  return plan;
}

ShardPlan read_plan(const std::string& output_prefix) {
  const std::string path = shard_dir(output_prefix) + "/plan.json";
  if (::access(path.c_str(), F_OK) != 0)
    throw Error(path + ": no shard plan here; run `lmforge prep` with --output-prefix " + output_prefix +
                " (and --shard-size, --rank/--world-size or under mpirun) first");
  std::string text;
  {
    data::MappedFile f(path);
    text.assign(reinterpret_cast<const char*>(f.data()), f.size());
  }
  return plan_from_json(text, path);
}

void write_or_check_plan(const std::string& output_prefix, const ShardPlan& plan) {
  const std::string dir = shard_dir(output_prefix);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/plan.json";
  if (::access(path.c_str(), F_OK) != 0) {
    write_temp_and_rename(path, path + ".tmp-" + host_name() + "-" + std::to_string(::getpid()), plan_to_json(plan));
    return;
  }
  check_same_plan(output_prefix, read_plan(output_prefix), plan);
}

void check_same_plan(const std::string& output_prefix, const ShardPlan& old, const ShardPlan& plan) {
  if (old.id == plan.id) return;
  const std::string dir = shard_dir(output_prefix);
  std::set<std::string> before(old.description.begin(), old.description.end());
  std::set<std::string> now(plan.description.begin(), plan.description.end());
  std::string changes;
  for (const auto& line : old.description)
    if (!now.count(line)) changes += "\n  was: " + line;
  for (const auto& line : plan.description)
    if (!before.count(line)) changes += "\n  now: " + line;
  throw Error(dir + " holds shards of another plan (" + old.id + ", this run's is " + plan.id +
              "): the inputs or flags that decide the output bytes differ:" + changes +
              "\nShards are never reused across plans. Rerun with the earlier inputs and flags to resume, or remove " +
              dir + " (or choose another --output-prefix) to start over.");
}

std::string manifest_to_json(const ShardManifest& m) {
  const PrepSummary& c = m.counts;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", c.seconds);
  return "{\"plan_id\": " + json_quote(m.plan_id) + ", \"shard\": " + std::to_string(m.index) +
         ", \"path\": " + json_quote(m.path) + ", \"whole_file\": " + (m.whole_file ? "true" : "false") +
         ", \"begin\": " + std::to_string(m.begin) + ", \"end\": " + std::to_string(m.end) +
         ",\n \"documents\": " + std::to_string(c.documents) + ", \"empty_documents\": " +
         std::to_string(c.empty_documents) + ", \"sequences\": " + std::to_string(c.sequences) +
         ", \"tokens\": " + std::to_string(c.tokens) + ", \"skipped_lines\": " + std::to_string(c.skipped_lines) +
         ", \"invalid_utf8_replaced\": " + std::to_string(c.invalid_utf8_replaced) +
         ", \"lone_surrogates_replaced\": " + std::to_string(c.lone_surrogates_replaced) +
         ", \"input_bytes\": " + std::to_string(c.input_bytes) + ", \"text_bytes\": " + std::to_string(c.text_bytes) +
         ", \"seconds\": " + seconds + ",\n \"host\": " + json_quote(m.host) + ", \"rank\": " + std::to_string(m.rank) +
         "}\n";
}

ShardManifest manifest_from_json(const std::string& text, const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element root = parse_json(parser, text, path);
  ShardManifest m;
  m.plan_id = str_field(root, "plan_id", path);
  m.index = static_cast<uint32_t>(field<uint64_t>(root, "shard", path));
  m.path = str_field(root, "path", path);
  m.whole_file = field<bool>(root, "whole_file", path);
  m.begin = field<uint64_t>(root, "begin", path);
  m.end = field<uint64_t>(root, "end", path);
  PrepSummary& c = m.counts;
  c.documents = field<uint64_t>(root, "documents", path);
  c.empty_documents = field<uint64_t>(root, "empty_documents", path);
  c.sequences = field<uint64_t>(root, "sequences", path);
  c.tokens = field<uint64_t>(root, "tokens", path);
  c.skipped_lines = field<uint64_t>(root, "skipped_lines", path);
  c.invalid_utf8_replaced = field<uint64_t>(root, "invalid_utf8_replaced", path);
  c.lone_surrogates_replaced = field<uint64_t>(root, "lone_surrogates_replaced", path);
  c.input_bytes = field<uint64_t>(root, "input_bytes", path);
  c.text_bytes = field<uint64_t>(root, "text_bytes", path);
  c.seconds = field<double>(root, "seconds", path);
  m.host = str_field(root, "host", path);
  m.rank = static_cast<int>(field<int64_t>(root, "rank", path));
  return m;
}

namespace {

// Why the datasets of a shard with manifest `m` are not what the manifest says ("" when they are).
std::string shard_datasets_problem(const std::string& output_prefix, const ShardPlan& plan, uint32_t index,
                                   const ShardManifest& m) {
  uint64_t sequences = 0, tokens = 0;
  try {
    for (const auto& key : plan.json_keys) {
      auto ds = data::IndexedDataset::open(shard_dataset_prefix(output_prefix, index, key));
      if (ds->document_count() != m.counts.documents)
        return ds->prefix() + " has " + std::to_string(ds->document_count()) + " documents, the manifest " +
               std::to_string(m.counts.documents);
      sequences += ds->sequence_count();
      tokens += ds->token_count();
    }
  } catch (const Error& e) {
    return e.what();
  }
  if (sequences != m.counts.sequences || tokens != m.counts.tokens)
    return "sequence or token counts differ from the manifest";
  return "";
}

std::string manifest_mismatch(const std::string& output_prefix, const ShardPlan& plan, uint32_t index,
                              const ShardManifest& m) {
  const Shard& s = plan.shards.at(index);
  if (m.plan_id == plan.id && m.index == index && m.path == s.piece.path && m.begin == s.piece.begin &&
      m.end == s.piece.end && m.whole_file == s.piece.whole_file)
    return "";
  return shard_manifest_path(output_prefix, index) + ": manifest of plan " + m.plan_id + " (" + m.path + " bytes " +
         std::to_string(m.begin) + "-" + std::to_string(m.end) + ") does not match this run's plan " + plan.id +
         " for " + shard_name(index) + " (" + s.piece.path + " bytes " + std::to_string(s.piece.begin) + "-" +
         std::to_string(s.piece.end) + "); remove " + shard_dir(output_prefix) + " to start over";
}

std::string read_text(const std::string& path) {
  data::MappedFile f(path);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

}  // namespace

std::optional<ShardManifest> complete_shard(const std::string& output_prefix, const ShardPlan& plan, uint32_t index) {
  const std::string path = shard_manifest_path(output_prefix, index);
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  const ShardManifest m = manifest_from_json(read_text(path), path);
  if (std::string wrong = manifest_mismatch(output_prefix, plan, index, m); !wrong.empty()) throw Error(wrong);
  // The datasets must be there and agree with the manifest; otherwise the shard is made again.
  const std::string problem = shard_datasets_problem(output_prefix, plan, index, m);
  if (problem.empty()) return m;
  std::fprintf(stderr, "prep: warning: %s is incomplete (%s); it will be made again\n", shard_name(index).c_str(),
               problem.c_str());
  ::unlink(path.c_str());
  return std::nullopt;
}

std::optional<ShardManifest> check_shard(const std::string& output_prefix, const ShardPlan& plan, uint32_t index,
                                         std::string& problem) {
  problem.clear();
  const std::string path = shard_manifest_path(output_prefix, index);
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  try {
    const ShardManifest m = manifest_from_json(read_text(path), path);
    problem = manifest_mismatch(output_prefix, plan, index, m);
    if (problem.empty()) problem = shard_datasets_problem(output_prefix, plan, index, m);
    if (problem.empty()) return m;
  } catch (const Error& e) {
    problem = e.what();
  }
  return std::nullopt;
}

void publish_manifest(const std::string& output_prefix, const std::string& tmp_dir, const ShardManifest& m) {
  write_temp_and_rename(shard_manifest_path(output_prefix, m.index), tmp_dir + "/" + shard_name(m.index) + ".json",
                        manifest_to_json(m));
}

std::string make_process_tmp_dir(const std::string& output_prefix) {
  const std::string dir = shard_dir(output_prefix) + "/tmp-" + host_name() + "-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

void remove_stale_tmp_dirs(const std::string& output_prefix, bool all_hosts) {
  const std::string dir = shard_dir(output_prefix);
  const std::string mine = "tmp-" + host_name() + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("tmp-", 0) != 0 || !entry.is_directory()) continue;
    bool remove = all_hosts;
    if (!remove && name.rfind(mine, 0) == 0) {
      const long pid = std::strtol(name.c_str() + mine.size(), nullptr, 10);
      remove = pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    }
    if (remove) std::filesystem::remove_all(entry.path(), ec);
  }
  // plan.json temporaries of killed processes
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("plan.json.tmp-", 0) == 0 && all_hosts) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace lmforge::prep
