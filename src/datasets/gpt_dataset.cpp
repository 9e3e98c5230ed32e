// defines: GptDataset (indices + Megatron-named .npy cache), GptSampleSource (blend × split), description JSON
#include "datasets/gpt_dataset.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "datasets/blending.h"
#include "datasets/npy.h"
#include "util/error.h"

namespace lmforge::datasets {

namespace fs = std::filesystem;

// ---- description (the cache key) ----

std::string python_json_string(const std::string& s) {
  std::string out = "\"";
  auto u4 = [&](uint32_t cp) {
    static const char* hex = "0123456789abcdef";
    out += "\\u";
    for (int k = 3; k >= 0; --k) out += hex[(cp >> (4 * k)) & 15];
  };
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7f) u4(c);
          else out += char(c);
      }
      ++i;
      continue;
    }
    // Decode one UTF-8 sequence (strictly: no overlongs, no surrogates, ≤ U+10FFFF).
    int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    uint32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0f : c & 0x1f;
    bool ok = len >= 2 && i + size_t(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const uint8_t cc = uint8_t(s[i + size_t(k)]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok) {
      const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      ok = cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    }
    if (!ok) {
      u4(0xdc00 + c);  // surrogateescape: one undecodable byte
      ++i;
      continue;
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      u4(0xd800 + (cp >> 10));
      u4(0xdc00 + (cp & 0x3ff));
    } else {
      u4(cp);
    }
    i += size_t(len);
  }
  return out + "\"";
}

std::string gpt_description(const std::string& path_prefix, int64_t num_samples, Split index_split,
                            const std::string& split, uint32_t seed, int32_t seq_length) {
  std::string d = "{\n";
  d += "    \"class\": \"GPTDataset\",\n";
  d += "    \"path_prefix\": " + python_json_string(path_prefix) + ",\n";
  d += "    \"num_samples\": " + std::to_string(num_samples) + ",\n";
  d += "    \"index_split\": \"" + std::string(split_name(index_split)) + "\",\n";
  d += "    \"split\": " + python_json_string(split) + ",\n";
  d += "    \"random_seed\": " + std::to_string(seed) + ",\n";
  d += "    \"sequence_length\": " + std::to_string(seq_length) + "\n";
  d += "}";
  return d;
}

// ---- GptDataset ----

namespace {

std::string python_path_join(const std::string& a, const std::string& b) {
  if (a.empty() || a.back() == '/') return a + b;
  return a + "/" + b;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(tmp + ": cannot create (" + std::strerror(errno) + ")");
    f << text;
    f.flush();
    if (!f) throw Error(tmp + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error(path + ": cannot rename into place: " + ec.message());
}

}  // namespace

std::shared_ptr<const std::vector<int32_t>> sequence_sizes(const data::IndexedDataset& dataset) {
  const uint64_t count = dataset.sequence_count();
  if (count > uint64_t(INT32_MAX))
    throw Error(dataset.prefix() + ": " + std::to_string(count) + " sequences, more than Megatron's int32 indices hold");
  auto sizes = std::make_shared<std::vector<int32_t>>(count);
  for (uint64_t i = 0; i < count; ++i) (*sizes)[i] = dataset.sequence_length(i);
  return sizes;
}

GptDataset::GptDataset(std::shared_ptr<const data::IndexedDataset> dataset, std::string path_prefix, Split index_split,
                       int64_t begin, int64_t end, int64_t num_samples, const GptDatasetConfig& config)
    : GptDataset(dataset, sequence_sizes(*dataset), std::move(path_prefix), index_split, begin, end, num_samples,
                 config) {}

GptDataset::GptDataset(std::shared_ptr<const data::IndexedDataset> dataset,
                       std::shared_ptr<const std::vector<int32_t>> sizes, std::string path_prefix, Split index_split,
                       int64_t begin, int64_t end, int64_t num_samples, const GptDatasetConfig& config)
    : dataset_(std::move(dataset)), sizes_(std::move(sizes)), seq_length_(config.seq_length) {
  if (sizes_->size() != dataset_->sequence_count())
    throw Error(path_prefix + ": sizes do not match the dataset's " + std::to_string(dataset_->sequence_count()) +
                " sequences");

  description_ = gpt_description(path_prefix, num_samples, index_split, config.split, config.seed, config.seq_length);
  md5_ = md5_hex(description_);
  cache_dir_ = config.cache_path.empty()
                   ? python_path_join(python_path_join(path_prefix, "cache"), "GPTDataset_indices")
                   : config.cache_path;
  if (try_load_cache(begin, end, num_samples)) {
    from_cache_ = true;
    return;
  }
  indices_ = build_gpt_indices(*sizes_, begin, end, num_samples, config.seq_length, config.seed);
  write_cache();
}

std::string GptDataset::cache_file(const std::string& suffix) const {
  return python_path_join(cache_dir_, md5_ + "-GPTDataset-" + suffix);
}

void GptDataset::write_cache() const {
  std::error_code ec;
  fs::create_directories(cache_dir_, ec);
  if (ec)
    throw Error(cache_dir_ + ": cannot create the index cache directory (" + ec.message() +
                "); choose a writable one with --data-cache-path");
  const auto& g = indices_;
  write_npy(cache_file("document_index.npy"), "<i4", {int64_t(g.document_index.size())}, g.document_index.data());
  write_npy(cache_file("sample_index.npy"), "<i4", {int64_t(g.sample_index.size() / 2), 2}, g.sample_index.data());
  if (g.shuffle_is_int64) {
    write_npy(cache_file("shuffle_index.npy"), "<i8", {int64_t(g.shuffle_index.size())}, g.shuffle_index.data());
  } else {
    std::vector<uint32_t> narrow(g.shuffle_index.begin(), g.shuffle_index.end());
    write_npy(cache_file("shuffle_index.npy"), "<u4", {int64_t(narrow.size())}, narrow.data());
  }
  // Written last: a crash before this leaves fewer than four files, which is a cache miss.
  write_text_atomic(cache_file("description.txt"), description_);
}

bool GptDataset::try_load_cache(int64_t begin, int64_t end, int64_t num_samples) {
  const std::string fd = cache_file("description.txt"), fdoc = cache_file("document_index.npy"),
                    fs_ = cache_file("sample_index.npy"), fsh = cache_file("shuffle_index.npy");
  for (const auto& f : {fd, fdoc, fs_, fsh})
    if (!fs::is_regular_file(f)) return false;
  {
    std::ifstream in(fd, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text != description_) throw Error(fd + ": does not hold the description its md5 name stands for; delete the cache");
  }
  const std::vector<int32_t>& sizes = *sizes_;
  if (begin < 0 || end > int64_t(sizes.size()) || begin >= end)
    throw Error("GPT split [" + std::to_string(begin) + ", " + std::to_string(end) + ") is empty or out of range");
  GptIndices g;
  for (int64_t i = begin; i < end; ++i) g.tokens_per_epoch += sizes[size_t(i)];
  g.plan = plan_epochs(g.tokens_per_epoch, seq_length_, num_samples);
  const int64_t total = g.plan.total_samples;
  const int64_t docs = g.plan.epochs * (end - begin);
  auto bad = [](const std::string& f, const std::string& why) {
    return Error(f + ": " + why + " (a stale or foreign index cache; delete it to rebuild)");
  };

  NpyArray a = read_npy(fdoc);
  if (a.descr != "<i4" || a.shape != std::vector<int64_t>{docs})
    throw bad(fdoc, "expected int32 [" + std::to_string(docs) + "], found " + a.descr);
  g.document_index.resize(size_t(docs));
  std::memcpy(g.document_index.data(), a.data.data(), a.data.size());
  for (int32_t d : g.document_index)
    if (d < begin || d >= end) throw bad(fdoc, "document " + std::to_string(d) + " outside the split");

  a = read_npy(fs_);
  if (a.descr != "<i4" || a.shape != std::vector<int64_t>{total + 1, 2})
    throw bad(fs_, "expected int32 [" + std::to_string(total + 1) + ", 2], found " + a.descr);
  g.sample_index.resize(size_t(2 * (total + 1)));
  std::memcpy(g.sample_index.data(), a.data.data(), a.data.size());
  for (int64_t r = 0; r <= total; ++r) {
    const int32_t p = g.sample_index[size_t(2 * r)], o = g.sample_index[size_t(2 * r + 1)];
    if (p < 0 || p >= docs || o < 0 || (o > 0 && o >= sizes[size_t(g.document_index[size_t(p)])]))
      throw bad(fs_, "row " + std::to_string(r) + " points outside the document index");
    if (r > 0 && (p < g.sample_index[size_t(2 * r - 2)]))
      throw bad(fs_, "row " + std::to_string(r) + " goes backwards");
  }

  a = read_npy(fsh);
  g.shuffle_is_int64 = a.descr == "<i8";
  if ((a.descr != "<u4" && a.descr != "<i8") || a.shape != std::vector<int64_t>{total})
    throw bad(fsh, "expected uint32/int64 [" + std::to_string(total) + "], found " + a.descr);
  g.shuffle_index.resize(size_t(total));
  if (g.shuffle_is_int64) {
    std::memcpy(g.shuffle_index.data(), a.data.data(), a.data.size());
  } else {
    for (int64_t i = 0; i < total; ++i) {
      uint32_t v;
      std::memcpy(&v, a.data.data() + 4 * i, 4);
      g.shuffle_index[size_t(i)] = v;
    }
  }
  for (int64_t v : g.shuffle_index)
    if (v < 0 || v >= total) throw bad(fsh, "sample " + std::to_string(v) + " out of range");
  indices_ = std::move(g);
  return true;
}

void GptDataset::sample(int64_t i, std::vector<int32_t>& tokens) const {
  thread_local std::vector<SamplePiece> pieces;
  thread_local std::vector<int32_t> part;
  sample_pieces(*sizes_, indices_.document_index, indices_.sample_index, indices_.shuffle_index, i, pieces);
  tokens.clear();
  for (const auto& p : pieces) {
    dataset_->read_sequence(uint64_t(p.sequence), part, p.offset, p.count);
    tokens.insert(tokens.end(), part.begin(), part.end());
  }
}

// ---- GptSampleSource ----

struct GptSampleSource::SplitData {
  std::vector<std::unique_ptr<GptDataset>> parts;  // one per blended dataset
  std::vector<int16_t> dataset_index;              // blends only
  std::vector<int64_t> dataset_sample_index;
  int64_t size = 0;
  std::vector<std::string> notes;
};

GptSampleSource::GptSampleSource(const std::vector<std::string>& data_path, const GptDatasetConfig& config,
                                 const std::array<int64_t, 3>& samples_per_split)
    : config_(config) {
  if (config.seq_length < 1) throw Error("--seq-length must be positive, got " + std::to_string(config.seq_length));
  const auto weights = parse_split(config.split);
  const auto blend = parse_data_path(data_path);
  // "w p" with a single pair is still a blend in Megatron: its samples are asked with the 1.005 margin and drawn
  // through a BlendedDataset, so the indices (and cache keys) differ from a bare "p".
  const bool blended = data_path.size() > 1;
  std::vector<double> w;
  for (const auto& b : blend) w.push_back(b.weight);
  std::vector<std::array<int64_t, 3>> asked;
  if (blended) asked = blend_sizes(w, samples_per_split);
  else asked = {samples_per_split};

  std::vector<std::array<int64_t, 4>> bounds;
  std::vector<std::shared_ptr<const std::vector<int32_t>>> sizes;
  for (const auto& b : blend) {
    datasets_.push_back(std::shared_ptr<const data::IndexedDataset>(data::IndexedDataset::open(b.prefix)));
    sizes.push_back(sequence_sizes(*datasets_.back()));
    bounds.push_back(split_bounds(weights, int64_t(datasets_.back()->sequence_count())));
  }
  splits_.resize(kNumSplits);
  for (int s = 0; s < kNumSplits; ++s) {
    if (weights[size_t(s)] == 0.0 || samples_per_split[size_t(s)] <= 0) continue;
    size_t empty = 0;
    for (const auto& b : bounds) empty += b[size_t(s)] == b[size_t(s) + 1];
    if (empty == bounds.size()) continue;  // too few sequences for this split anywhere: not built
    if (empty != 0) {
      std::string which;
      for (size_t d = 0; d < bounds.size(); ++d)
        if (bounds[d][size_t(s)] == bounds[d][size_t(s) + 1])
          which += (which.empty() ? "" : ", ") + blend[d].prefix + " (" +
                   std::to_string(datasets_[d]->sequence_count()) + " sequences)";
      throw Error(std::string("--split ") + config.split + ": the " + split_name(Split(s)) +
                  " split is empty in " + which + " but not in the other blended datasets (a dataset too small for "
                  "the split, or an empty one?)");
    }
    auto sd = std::make_unique<SplitData>();
    for (size_t d = 0; d < blend.size(); ++d) {
      auto ds = std::make_unique<GptDataset>(datasets_[d], sizes[d], blend[d].prefix, Split(s), bounds[d][size_t(s)],
                                             bounds[d][size_t(s) + 1], asked[d][size_t(s)], config);
      std::ostringstream note;
      note << split_name(Split(s)) << ": " << blend[d].prefix << " sequences [" << bounds[d][size_t(s)] << ", "
           << bounds[d][size_t(s) + 1] << "), " << ds->indices().plan.epochs << " epoch(s)"
           << (ds->indices().plan.separate_final_epoch ? " (last shuffled apart)" : "") << ", " << ds->size()
           << " samples (asked " << asked[d][size_t(s)] << "), index " << (ds->loaded_from_cache() ? "loaded from " : "written to ")
           << ds->cache_dir() << "/" << ds->md5() << "-GPTDataset-*";
      sd->notes.push_back(note.str());
      sd->parts.push_back(std::move(ds));
    }
    if (blended) {
      for (size_t d = 0; d < blend.size(); ++d) sd->size += asked[d][size_t(s)];
      // BlendedDataset normalises the already-normalised weights once more; the bits of that result drive the order.
      build_blending_indices(normalize_weights(w), sd->size, sd->dataset_index, sd->dataset_sample_index);
      std::vector<int64_t> need(blend.size(), 0);
      for (int64_t i = 0; i < sd->size; ++i) {
        const size_t d = size_t(sd->dataset_index[size_t(i)]);
        need[d] = std::max(need[d], sd->dataset_sample_index[size_t(i)] + 1);
      }
      for (size_t d = 0; d < blend.size(); ++d)
        if (need[d] > sd->parts[d]->size())
          throw Error(blend[d].prefix + ": the blend needs " + std::to_string(need[d]) + " " + split_name(Split(s)) +
                      " samples from it but it has " + std::to_string(sd->parts[d]->size()));
    } else {
      sd->size = sd->parts[0]->size();
    }
    splits_[size_t(s)] = std::move(sd);
  }
}

GptSampleSource::~GptSampleSource() = default;

bool GptSampleSource::has_split(Split split) const { return splits_[size_t(split)] != nullptr; }

int64_t GptSampleSource::size(Split split) const {
  const auto& sd = splits_[size_t(split)];
  return sd ? sd->size : 0;
}

void GptSampleSource::sample(Split split, int64_t i, std::vector<int32_t>& tokens) const {
  const auto& sd = splits_[size_t(split)];
  if (!sd) throw Error(std::string("no ") + split_name(split) + " samples: the split is empty for --split " + config_.split);
  if (i < 0 || i >= sd->size)
    throw Error(std::string(split_name(split)) + " sample " + std::to_string(i) + " is out of range [0, " +
                std::to_string(sd->size) + ")");
  if (sd->dataset_index.empty()) {
    sd->parts[0]->sample(i, tokens);
    return;
  }
  sd->parts[size_t(sd->dataset_index[size_t(i)])]->sample(sd->dataset_sample_index[size_t(i)], tokens);
}

std::string GptSampleSource::summary() const {
  std::string out;
  for (int s = 0; s < kNumSplits; ++s) {
    const auto& sd = splits_[size_t(s)];
    if (!sd) {
      out += std::string(split_name(Split(s))) + ": not built\n";
      continue;
    }
    for (const auto& n : sd->notes) out += n + "\n";
    if (!sd->dataset_index.empty())
      out += std::string(split_name(Split(s))) + ": blend of " + std::to_string(sd->parts.size()) + " datasets, " +
             std::to_string(sd->size) + " samples\n";
  }
  return out;
}

}  // namespace lmforge::datasets
