// defines: assemble_shards(), merge_shards()
// The final .idx is 34-byte header, int32 lengths[S], int64 pointers[S], int64 doc_idx[D+1]
// (../shared/docs/megatron-data-format.md §2, §4): merging concatenates lengths, recomputes pointers as the running
// byte offset, and appends each shard's document index without its leading 0, shifted by the sequences before it.
// Each section is one pass over the shards' mapped .idx files, so only one shard's index is touched at a time.
#include "prep/shard_assembly.h"

#include <glob.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "data/file_util.h"
#include "data/indexed_dataset.h"
#include "data/writer_lock.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/progress.h"

namespace lmforge::prep {
namespace {

constexpr uint64_t kHeaderBytes = 34;

class BufferedOut {
 public:
  BufferedOut(int fd, std::string path) : fd_(fd), path_(std::move(path)), buf_(8u << 20) {}
  void write(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (size > 0) {
      if (fill_ == buf_.size()) flush();
      const size_t n = std::min(size, buf_.size() - fill_);
      std::memcpy(buf_.data() + fill_, p, n);
      fill_ += n;
      p += n;
      size -= n;
    }
  }
  void flush() {
    data::write_all(fd_, buf_.data(), fill_, path_);
    fill_ = 0;
  }

 private:
  int fd_;
  std::string path_;
  std::vector<uint8_t> buf_;
  size_t fill_ = 0;
};

void copy_whole_file(const std::string& from, uint64_t bytes, int out_fd, const std::string& out_path) {
  data::UniqueFd in = data::open_read(from);
  uint64_t remaining = bytes;
  bool use_cfr = true;
  std::vector<uint8_t> buf;
  while (remaining > 0) {
    if (use_cfr) {
      const ssize_t n = ::copy_file_range(in.get(), nullptr, out_fd, nullptr, remaining, 0);
      if (n > 0) {
        remaining -= static_cast<uint64_t>(n);
        continue;
      }
      if (n == 0) throw Error(from + ": file shrank while being assembled");
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP && errno != EBADF)
        throw Error(data::os_error(from, "copy into " + out_path + " failed"));
      use_cfr = false;
      buf.resize(8u << 20);
    }
    const size_t got = data::read_some(in.get(), buf.data(), std::min<uint64_t>(remaining, buf.size()), from);
    if (got == 0) throw Error(from + ": file shrank while being assembled");
    data::write_all(out_fd, buf.data(), got, out_path);
    remaining -= got;
  }
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void assemble_key(const std::string& output_prefix, const ShardPlan& plan, const std::string& key,
                  data::WriterLock& lock) {
  const std::string final_prefix = output_prefix + "_" + key + "_" + plan.level;
  // Pass 0: validate every shard (IndexedDataset::open checks sizes, pointers and the document index) and total.
  uint64_t S = 0, D = 1;
  data::DType dtype = data::DType::UInt16;
  for (const Shard& s : plan.shards) {
    auto ds = data::IndexedDataset::open(shard_dataset_prefix(output_prefix, s.index, key));
    if (s.index == 0) dtype = ds->dtype();
    if (ds->dtype() != dtype)
      throw Error(ds->prefix() + ".idx: dtype " + data::dtype_name(ds->dtype()) + " differs from the first shard's " +
                  data::dtype_name(dtype));
    S += ds->sequence_count();
    D += ds->document_count();
  }
  // An assembly killed earlier on this host left its temporaries (as large as the dataset): remove them.
  for (const char* ext : {".bin", ".idx"}) {
    const std::string pattern = final_prefix + ext + ".tmp-" + host_name() + "-*";
    glob_t matches{};
    if (::glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
      for (size_t i = 0; i < matches.gl_pathc; ++i) {
        const std::string path = matches.gl_pathv[i];
        const long pid = std::strtol(path.c_str() + path.rfind('-') + 1, nullptr, 10);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink(path.c_str());
      }
    }
    ::globfree(&matches);
  }
  const std::string suffix = ".tmp-" + host_name() + "-" + std::to_string(::getpid());
  const std::string bin_final = final_prefix + ".bin", idx_final = final_prefix + ".idx";
  const std::string bin_tmp = bin_final + suffix, idx_tmp = idx_final + suffix;
  struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      for (auto& p : paths) ::unlink(p.c_str());
    }
  } cleanup{{bin_tmp, idx_tmp}};

  {
    data::UniqueFd bin = data::open_write_truncate(bin_tmp);
    for (const Shard& s : plan.shards) {
      const std::string p = shard_dataset_prefix(output_prefix, s.index, key) + ".bin";
      data::MappedFile probe(p);  // size only; the copy itself goes through the kernel
      const uint64_t bytes = probe.size();
      copy_whole_file(p, bytes, bin.get(), bin_tmp);
    }
    if (::fsync(bin.get()) != 0) throw Error(data::os_error(bin_tmp, "fsync failed"));
  }
  {
    data::UniqueFd idx = data::open_write_truncate(idx_tmp);
    BufferedOut out(idx.get(), idx_tmp);
    uint8_t header[kHeaderBytes];
    std::memcpy(header, "MMIDIDX\0\0", 9);
    const uint64_t version = 1;
    std::memcpy(header + 9, &version, 8);
    header[17] = static_cast<uint8_t>(dtype);
    std::memcpy(header + 18, &S, 8);
    std::memcpy(header + 26, &D, 8);
    out.write(header, kHeaderBytes);
    const int64_t item = static_cast<int64_t>(data::dtype_size(dtype));
    // Section by section; each shard's .idx is mapped again per pass (the page cache keeps it warm).
    for (int section = 0; section < 3; ++section) {
      int64_t pointer = 0, shift = 0;
      if (section == 2) {
        const int64_t zero = 0;
        out.write(&zero, 8);
      }
      for (const Shard& s : plan.shards) {
        data::MappedFile f(shard_dataset_prefix(output_prefix, s.index, key) + ".idx");
        const uint64_t s_i = load<uint64_t>(f.data() + 18), d_i = load<uint64_t>(f.data() + 26);
        const uint8_t* lengths = f.data() + kHeaderBytes;
        if (section == 0) {
          out.write(lengths, 4 * s_i);
        } else if (section == 1) {
          for (uint64_t i = 0; i < s_i; ++i) {
            out.write(&pointer, 8);
            pointer += static_cast<int64_t>(load<int32_t>(lengths + 4 * i)) * item;
          }
        } else {
          const uint8_t* doc = f.data() + kHeaderBytes + 12 * s_i;
          for (uint64_t j = 1; j < d_i; ++j) {
            const int64_t v = load<int64_t>(doc + 8 * j) + shift;
            out.write(&v, 8);
          }
          shift += static_cast<int64_t>(s_i);
        }
      }
    }
    out.flush();
    if (::fsync(idx.get()) != 0) throw Error(data::os_error(idx_tmp, "fsync failed"));
  }
  lock.check_held();
  cleanup.paths.clear();  // publish_dataset() removes them on failure
  data::publish_dataset(bin_tmp, idx_tmp, bin_final, idx_final);
}

}  // namespace

PrepSummary assemble_shards(const std::string& output_prefix, const ShardPlan& plan,
                            const std::vector<ShardManifest>& manifests) {
  data::WriterLock lock(data::output_prefix_lock_base(output_prefix), "output prefix " + output_prefix);
  PrepSummary total;
  for (const auto& m : manifests) {
    const PrepSummary& c = m.counts;
    total.documents += c.documents;
    total.empty_documents += c.empty_documents;
    total.sequences += c.sequences;
    total.tokens += c.tokens;
    total.skipped_lines += c.skipped_lines;
    total.invalid_utf8_replaced += c.invalid_utf8_replaced;
    total.lone_surrogates_replaced += c.lone_surrogates_replaced;
    total.input_bytes += c.input_bytes;
    total.text_bytes += c.text_bytes;
  }
  for (const auto& key : plan.json_keys) {
    assemble_key(output_prefix, plan, key, lock);
    total.outputs.push_back(output_prefix + "_" + key + "_" + plan.level);
  }
  return total;
}

void write_assembled_marker(const std::string& output_prefix, const ShardPlan& plan, const std::string& assembled_by,
                            const std::string& tmp) {
  std::string text = "{\"assembled_by\": " + json_quote(assembled_by) + ", \"outputs\": [";
  for (size_t i = 0; i < plan.json_keys.size(); ++i) {
    const std::string prefix = output_prefix + "_" + plan.json_keys[i] + "_" + plan.level;
    struct stat bin {}, idx {};
    if (::stat((prefix + ".bin").c_str(), &bin) != 0 || ::stat((prefix + ".idx").c_str(), &idx) != 0)
      throw Error(data::os_error(prefix, "cannot stat the assembled dataset"));
    text += std::string(i ? ", " : "") + "{\"prefix\": " + json_quote(prefix) + ", \"bin_bytes\": " +
            std::to_string(bin.st_size) + ", \"idx_bytes\": " + std::to_string(idx.st_size) + "}";
  }
  text += "]}\n";
  const std::string path = shard_dir(output_prefix) + "/assembled.json";
  {
    data::UniqueFd fd = data::open_write_truncate(tmp);
    data::write_all(fd.get(), text.data(), text.size(), tmp);
    if (::fsync(fd.get()) != 0) throw Error(data::os_error(tmp, "fsync failed"));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string msg = data::os_error(path, "cannot rename " + tmp + " to it");
    ::unlink(tmp.c_str());
    throw Error(msg);
  }
  data::fsync_parent_dir(path);
}

std::string assembled_problem(const std::string& output_prefix, const ShardPlan& plan) {
  const std::string path = shard_dir(output_prefix) + "/assembled.json";
  std::string text;
  try {
    data::MappedFile f(path);
    text.assign(reinterpret_cast<const char*>(f.data()), f.size());
  } catch (const Error&) {
    return "no " + path;
  }
  // Recorded sizes per output prefix (none in a marker written before they were recorded).
  std::map<std::string, std::pair<uint64_t, uint64_t>> recorded;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(text).get(root)) return path + " is not valid JSON";
  simdjson::dom::array outputs;
  if (!root["outputs"].get(outputs)) {
    for (auto o : outputs) {
      std::string_view prefix;
      uint64_t bin = 0, idx = 0;
      if (o["prefix"].get(prefix) || o["bin_bytes"].get(bin) || o["idx_bytes"].get(idx))
        return path + ": an output entry is malformed";
      recorded[std::string(prefix)] = {bin, idx};
    }
  }
  for (const auto& key : plan.json_keys) {
    const std::string prefix = output_prefix + "_" + key + "_" + plan.level;
    const auto it = recorded.find(prefix);
    if (it == recorded.end()) {
      try {
        data::IndexedDataset::open(prefix);
      } catch (const Error& e) {
        return e.what();
      }
      continue;
    }
    const std::pair<const char*, uint64_t> files[] = {{".bin", it->second.first}, {".idx", it->second.second}};
    for (const auto& [ext, bytes] : files) {
      struct stat st {};
      if (::stat((prefix + ext).c_str(), &st) != 0) return prefix + ext + " is missing (deleted or moved)";
      if (static_cast<uint64_t>(st.st_size) != bytes)
        return prefix + ext + " holds " + std::to_string(st.st_size) + " bytes, the assembly wrote " +
               std::to_string(bytes);
    }
  }
  return "";
}

PrepSummary merge_shards(const std::string& output_prefix) {
  const auto start = std::chrono::steady_clock::now();
  const ShardPlan plan = read_plan(output_prefix);
  std::vector<ShardManifest> manifests;
  std::vector<uint32_t> missing;
  for (const Shard& s : plan.shards) {
    if (auto m = complete_shard(output_prefix, plan, s.index))
      manifests.push_back(std::move(*m));
    else
      missing.push_back(s.index);
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 20; ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
    if (missing.size() > 20) list += ", …";
    throw Error(shard_dir(output_prefix) + ": " + std::to_string(missing.size()) + " of " +
                std::to_string(plan.shards.size()) + " shards are not complete (" + list +
                "); rerun the same `lmforge prep` command (every rank, or once with --world-size 1) to make them, "
                "then merge again");
  }
  PrepSummary total = assemble_shards(output_prefix, plan, manifests);
  remove_stale_tmp_dirs(output_prefix, /*all_hosts=*/true);
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return total;
}

}  // namespace lmforge::prep
