// defines: NVIDIA BERT HDF5 shards — probing and reading through the HDF5 C API, shard listing (and telling a shard
//   path from a dataset prefix), the seeded stream
#include "datasets/hdf5_bert_shards.h"

#include <glob.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <new>

#include "util/error.h"

namespace lmforge::datasets {

namespace {

namespace fs = std::filesystem;

// The serial HDF5 library keeps global state (open-object tables, the error stack) and is not built thread-safe:
// every call into it happens under this lock. It guards the library, not data of ours.
std::mutex& hdf5_lock() {
  static std::mutex m;
  return m;
}

// While alive: HDF5 does not print its error stack to stderr (we report errors ourselves); restored afterwards.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5Errors() {
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, func_, data_);
  }
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The innermost message on HDF5's error stack (the most specific, e.g. "file signature not found").
std::string hdf5_reason() {
  std::string reason;
  auto walk = [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
    if (e->desc && *e->desc) *static_cast<std::string*>(out) = e->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk, &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason.empty() ? "HDF5 error" : reason;
}

// An HDF5 identifier closed by `close` when it goes out of scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// NVIDIA's datasets with their byte widths (create_pretraining_data.py: int32 ids, int8 masks) and ranks.
// `flags`: datasets of 0/1 values. NVIDIA's loader takes any integer type for them (np.asarray, then astype), and
// shards written from int32 arrays without the script's dtype='i1' exist, so wider types are read too: as 64-bit
// integers, every value checked to be 0 or 1 (so nothing is clamped), then narrowed.
struct DatasetSpec {
  const char* name;
  size_t bytes;
  int rank;
  const char* dims;  // for messages
  bool flags;
};
constexpr std::array<DatasetSpec, 6> kDatasets = {{{"input_ids", 4, 2, "[N, L]", false},
                                                   {"input_mask", 1, 2, "[N, L]", true},
                                                   {"segment_ids", 1, 2, "[N, L]", true},
                                                   {"masked_lm_positions", 4, 2, "[N, P]", false},
                                                   {"masked_lm_ids", 4, 2, "[N, P]", false},
                                                   {"next_sentence_labels", 1, 1, "[N]", true}}};

std::string where(const std::string& path, const char* dataset) { return path + ": dataset '" + dataset + "'"; }

Handle open_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(path + ": no such file (an NVIDIA BERT .hdf5 shard was expected)");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok())
    throw Error(path + ": cannot open as HDF5 (" + hdf5_reason() + "); is it a complete NVIDIA BERT shard?");
  return file;
}

Handle open_dataset(hid_t file, const std::string& path, const char* name) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
    throw Error(where(path, name) + " is missing (an NVIDIA BERT shard has input_ids, input_mask, segment_ids, "
                                    "masked_lm_positions, masked_lm_ids and next_sentence_labels)");
  Handle d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!d.ok()) throw Error(where(path, name) + " cannot be opened as a dataset (" + hdf5_reason() + ")");
  return d;
}

// Checks the type and rank of one dataset and returns its dimensions.
std::vector<int64_t> dataset_dims(hid_t dataset, const std::string& path, const DatasetSpec& spec) {
  Handle type(H5Dget_type(dataset), H5Tclose);
  if (!type.ok()) throw Error(where(path, spec.name) + ": cannot read its type (" + hdf5_reason() + ")");
  const size_t bytes = H5Tget_size(type.get());
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    throw Error(where(path, spec.name) + " is not integer (NVIDIA's shards hold int" + std::to_string(8 * spec.bytes) +
                ")");
  // HDF5 converts on reading and clamps what does not fit, so only types whose every value fits are taken.
  const bool is_unsigned = H5Tget_sign(type.get()) == H5T_SGN_NONE;
  if (!spec.flags && (bytes > spec.bytes || (is_unsigned && bytes == spec.bytes)))
    throw Error(where(path, spec.name) + " holds " + (is_unsigned ? "unsigned " : "") + std::to_string(8 * bytes) +
                "-bit integers where NVIDIA's create_pretraining_data.py writes int" + std::to_string(8 * spec.bytes) +
                " (their values could not all be read without loss; convert the shard)");
  Handle space(H5Dget_space(dataset), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) throw Error(where(path, spec.name) + ": cannot read its shape (" + hdf5_reason() + ")");
  if (rank != spec.rank)
    throw Error(where(path, spec.name) + " has " + std::to_string(rank) + " dimensions; expected " + spec.dims);
  std::array<hsize_t, 2> dims{};
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.begin() + rank);
}

std::string shape_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Deflate (gzip, what create_pretraining_data.py asks h5py for) cannot expand data more than 1032-fold: its longest
// match, 258 bytes, costs at least two bits. Any filter pipeline is held to that bound.
constexpr double kMaxFilterExpansion = 1032;

// What a dataset declares against what the file stores: a hostile or damaged header can declare 2e8 rows in a 3 KB
// file (chunks never written read back as fill values), and reading that whole would exhaust memory. Declared
// bytes D = Π dims × element size; stored bytes S = the dataset's allocated storage. Unfiltered data is stored as
// is, so D ≤ S; filtered data D ≤ 1032 S. Caller holds the lock.
void check_declared_size(hid_t dataset, const std::string& path, const DatasetSpec& spec,
                         const std::vector<int64_t>& dims) {
  Handle type(H5Dget_type(dataset), H5Tclose);
  double declared = type.ok() ? double(H5Tget_size(type.get())) : double(spec.bytes);
  for (const int64_t d : dims) declared *= double(d);
  if (declared == 0) return;
  const double stored = double(H5Dget_storage_size(dataset));
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  const int filters = plist.ok() ? H5Pget_nfilters(plist.get()) : 0;
  const double bound = filters > 0 ? stored * kMaxFilterExpansion : stored;
  if (declared <= bound) return;
  char sizes[160];
  std::snprintf(sizes, sizeof sizes, " (%.0f bytes) but the file stores %.0f bytes of it", declared, stored);
  throw Error(where(path, spec.name) + " declares shape " + shape_text(dims) + sizes +
              (filters > 0 ? " (compressed data expands at most 1032-fold)" : " (uncompressed)") +
              ": the shard is damaged or not what it claims (rows never written would read as fill values); "
              "recreate it");
}

// The bytes one shard takes in memory once read (Hdf5BertShard's arrays: int32 ids and positions, int8 flags).
double shard_memory_bytes(const Hdf5ShardInfo& info) {
  return double(info.rows) * (double(info.seq_length) * (4 + 1 + 1) + double(info.max_predictions) * (4 + 4) + 1);
}

// Half the machine's physical memory: a shard is read whole (its rows are visited in a random order), so one that
// needs more than this cannot be trained from here; the rest is left to the model and the other processes.
double shard_memory_budget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) / 2 : 0;
}

// Shapes of all six datasets, checked against one N (from input_ids), L (input_ids) and P (masked_lm_positions).
// Caller holds the lock.
Hdf5ShardInfo probe_locked(hid_t file, const std::string& path) {
  Hdf5ShardInfo info{path, -1, -1, -1};
  for (const DatasetSpec& spec : kDatasets) {
    Handle d = open_dataset(file, path, spec.name);
    const std::vector<int64_t> dims = dataset_dims(d.get(), path, spec);
    check_declared_size(d.get(), path, spec, dims);
    if (info.rows < 0) info.rows = dims[0];
    if (dims[0] != info.rows)
      throw Error(where(path, spec.name) + " has shape " + shape_text(dims) + ": " + std::to_string(dims[0]) +
                  " rows, but input_ids has N = " + std::to_string(info.rows) + " (every dataset has one row per "
                  "instance)");
    if (spec.rank == 1) continue;
    const bool by_l = spec.dims[4] == 'L';  // "[N, L]" or "[N, P]"
    int64_t& width = by_l ? info.seq_length : info.max_predictions;
    if (width < 0) width = dims[1];
    if (dims[1] != width)
      throw Error(where(path, spec.name) + " has shape " + shape_text(dims) + ", expected " + spec.dims + " with " +
                  (by_l ? "L = " : "P = ") + std::to_string(width) + " as in " +
                  (by_l ? "input_ids" : "masked_lm_positions"));
  }
  if (info.seq_length < 2)
    throw Error(where(path, "input_ids") + ": sequence length " + std::to_string(info.seq_length) +
                " is too short for [CLS] ... [SEP]");
  if (info.max_predictions < 1) throw Error(where(path, "masked_lm_positions") + " has no prediction slots (P = 0)");
  const double needed = shard_memory_bytes(info), budget = shard_memory_budget();
  if (budget > 0 && needed > budget) {
    char text[300];
    std::snprintf(text, sizeof text,
                  ": %lld rows of length %lld need %.0f MiB in memory once read, more than half this machine's "
                  "memory (%.0f MiB); a shard is read whole, so split it into smaller shards",
                  static_cast<long long>(info.rows), static_cast<long long>(info.seq_length), needed / 1048576,
                  budget / 1048576);
    throw Error(where(path, "input_ids") + text);
  }
  return info;
}

// Reads a whole dataset converted to T (a widening conversion: probe_locked() refused wider types), in blocks of
// rows of at most kReadBlockBytes: memory grows with the rows actually decoded, and a damaged block is reported
// (naming its rows) before the rest is allocated. `count` values, `width` per row.
constexpr size_t kReadBlockBytes = size_t(16) << 20;

template <class T>
std::vector<T> read_all(hid_t file, const std::string& path, const char* name, hid_t memory_type, size_t count,
                        int64_t width) {
  Handle d = open_dataset(file, path, name);
  std::vector<T> values;
  if (count == 0) return values;
  Handle file_space(H5Dget_space(d.get()), H5Sclose);
  const int rank = file_space.ok() ? H5Sget_simple_extent_ndims(file_space.get()) : -1;
  if (rank < 1) throw Error(where(path, name) + ": cannot read its shape (" + hdf5_reason() + ")");
  const size_t row_values = size_t(std::max<int64_t>(width, 1)), rows = count / row_values;
  const size_t block_rows = std::max<size_t>(1, kReadBlockBytes / (row_values * sizeof(T)));
  try {
    for (size_t first = 0; first < rows; first += block_rows) {
      const size_t n = std::min(block_rows, rows - first);
      const std::array<hsize_t, 2> start{hsize_t(first), 0}, extent{hsize_t(n), hsize_t(row_values)};
      Handle memory_space(H5Screate_simple(rank, extent.data(), nullptr), H5Sclose);
      values.resize((first + n) * row_values);
      if (!memory_space.ok() ||
          H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr) < 0 ||
          H5Dread(d.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT,
                  values.data() + first * row_values) < 0)
        throw Error(where(path, name) + ": cannot read rows " + std::to_string(first) + " to " +
                    std::to_string(first + n - 1) + " (" + hdf5_reason() + "); the file may be truncated or corrupt");
    }
  } catch (const std::bad_alloc&) {
    throw Error(where(path, name) + ": out of memory after reading " + std::to_string(values.size() / row_values) +
                " of its " + std::to_string(rows) + " rows");
  }
  return values;
}

// A 0/1 dataset (DatasetSpec::flags) as int8: read directly when stored as int8, else through int64 with every value
// checked, so that no out-of-range value is clamped into range by HDF5's conversion.
std::vector<int8_t> read_flags(hid_t file, const std::string& path, const char* name, size_t count, int64_t width) {
  Handle d = open_dataset(file, path, name);
  Handle type(H5Dget_type(d.get()), H5Tclose);
  if (type.ok() && H5Tget_size(type.get()) == 1 && H5Tget_sign(type.get()) != H5T_SGN_NONE)
    return read_all<int8_t>(file, path, name, H5T_NATIVE_INT8, count, width);
  std::vector<int64_t> wide = read_all<int64_t>(file, path, name, H5T_NATIVE_INT64, count, width);
  std::vector<int8_t> values(count);
  for (size_t i = 0; i < count; ++i) {
    if (wide[i] != 0 && wide[i] != 1)
      throw Error(where(path, name) + ": row " + std::to_string(int64_t(i) / width) + " holds " +
                  std::to_string(wide[i]) + ", outside [0, 1] (stored as a wider integer type than NVIDIA's int8)");
    values[i] = static_cast<int8_t>(wide[i]);
  }
  return values;
}

template <class T>
void expect_range(const std::vector<T>& v, int64_t width, const std::string& path, const char* name, int64_t lo,
                  int64_t hi) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < lo || v[i] > hi)
      throw Error(where(path, name) + ": row " + std::to_string(int64_t(i) / width) + " holds " +
                  std::to_string(int64_t(v[i])) + ", outside [" + std::to_string(lo) + ", " +
                  (hi == INT32_MAX ? std::string("2^31-1") : std::to_string(hi)) + "]");
}

// n = index of the first 0 among the P positions of a row (P if none): run_pretraining.py's rule.
int64_t used_predictions(const int32_t* positions, int64_t p) {
  int64_t n = 0;
  while (n < p && positions[n] != 0) ++n;
  return n;
}

void validate_values(const Hdf5BertShard& s) {
  const int64_t L = s.seq_length, P = s.max_predictions;
  expect_range(s.input_ids, L, s.path, "input_ids", 0, INT32_MAX);
  expect_range(s.input_mask, L, s.path, "input_mask", 0, 1);
  expect_range(s.segment_ids, L, s.path, "segment_ids", 0, 1);
  expect_range(s.next_sentence_labels, 1, s.path, "next_sentence_labels", 0, 1);
  for (int64_t r = 0; r < s.rows; ++r) {
    const int32_t* pos = s.masked_lm_positions.data() + r * P;
    const int32_t* ids = s.masked_lm_ids.data() + r * P;
    const int64_t n = used_predictions(pos, P);
    for (int64_t j = 0; j < n; ++j) {
      if (pos[j] < 1 || pos[j] >= L)
        throw Error(where(s.path, "masked_lm_positions") + ": row " + std::to_string(r) + " slot " + std::to_string(j) +
                    " is position " + std::to_string(pos[j]) + ", outside [1, " + std::to_string(L) + ")");
      if (ids[j] < 0)
        throw Error(where(s.path, "masked_lm_ids") + ": row " + std::to_string(r) + " slot " + std::to_string(j) +
                    " holds " + std::to_string(ids[j]) + " (token ids are >= 0)");
    }
  }
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

bool is_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

bool is_shard_name(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".hdf5" || ext == ".h5";
}

// A symbolic link whose target does not exist (a shard copied without its target, a moved volume).
bool is_dangling(const fs::path& p) {
  std::error_code ec;
  return fs::is_symlink(fs::symlink_status(p, ec)) && !fs::exists(p, ec);
}

std::string link_text(const fs::path& p) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(p, ec);
  return p.string() + (ec ? "" : " -> " + target.string());
}

void refuse_dangling(const std::string& spec, const std::vector<fs::path>& broken) {
  if (broken.empty()) return;
  std::string names;
  for (size_t i = 0; i < broken.size() && i < 5; ++i) names += (i ? ", " : "") + link_text(broken[i]);
  if (broken.size() > 5) names += " and " + std::to_string(broken.size() - 5) + " more";
  throw Error(spec + ": " + std::to_string(broken.size()) + " shard link" + (broken.size() == 1 ? "" : "s") +
              " whose target does not exist: " + names + " (restore the targets or remove the links; no shard is "
              "left out silently)");
}

std::vector<std::string> expand(const std::string& spec) {
  std::vector<std::string> files;
  std::vector<fs::path> broken;
  std::error_code ec;
  if (is_pattern(spec)) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), 0, nullptr, &g);
    if (rc != 0 && rc != GLOB_NOMATCH) {
      globfree(&g);
      throw Error(spec + ": cannot expand the pattern");
    }
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      if (fs::is_regular_file(g.gl_pathv[i], ec)) files.emplace_back(g.gl_pathv[i]);
      else if (is_dangling(g.gl_pathv[i])) broken.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
    refuse_dangling(spec, broken);
    if (files.empty()) throw Error(spec + ": the pattern matches no files");
  } else if (fs::is_directory(spec, ec)) {
    std::error_code list_error;
    for (const fs::directory_entry& e : fs::directory_iterator(spec, list_error)) {
      if (!is_shard_name(e.path())) continue;
      if (e.is_regular_file(ec)) files.push_back(e.path().string());
      else if (is_dangling(e.path())) broken.push_back(e.path());
    }
    if (list_error) throw Error(spec + ": cannot list the directory (" + list_error.message() + ")");
    std::sort(broken.begin(), broken.end());
    refuse_dangling(spec, broken);
    if (files.empty()) throw Error(spec + ": the directory holds no .hdf5 or .h5 files");
  } else {
    if (is_dangling(spec)) throw Error(link_text(spec) + ": a symbolic link whose target does not exist");
    if (!fs::is_regular_file(spec, ec)) throw Error(spec + ": no such file, directory or matching pattern");
    files.push_back(spec);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

uint64_t splitmix_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::vector<int64_t> splitmix_permutation(int64_t n, uint64_t state) {
  std::vector<int64_t> a(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) a[i] = i;
  auto next = [&state] { return splitmix_mix(state += 0x9E3779B97F4A7C15ULL); };
  for (int64_t j = n - 1; j >= 1; --j) {
    // Unbiased draw from [0, b): reject the lowest (2^64 mod b) values so every residue is equally likely.
    const uint64_t b = static_cast<uint64_t>(j) + 1;
    const uint64_t threshold = (0 - b) % b;
    uint64_t r = next();
    while (r < threshold) r = next();
    std::swap(a[j], a[r % b]);
  }
  return a;
}

Hdf5ShardInfo probe_hdf5_bert_shard(const std::string& path) {
  std::lock_guard<std::mutex> lock(hdf5_lock());
  QuietHdf5Errors quiet;
  Handle file = open_file(path);
  return probe_locked(file.get(), path);
}

Hdf5BertShard read_hdf5_bert_shard(const std::string& path) {
  Hdf5BertShard s;
  {
    std::lock_guard<std::mutex> lock(hdf5_lock());
    QuietHdf5Errors quiet;
    Handle file = open_file(path);
    const Hdf5ShardInfo info = probe_locked(file.get(), path);
    s.path = path;
    s.rows = info.rows;
    s.seq_length = info.seq_length;
    s.max_predictions = info.max_predictions;
    const size_t nl = size_t(s.rows * s.seq_length), np = size_t(s.rows * s.max_predictions), n = size_t(s.rows);
    const hid_t file_id = file.get();
    s.input_ids = read_all<int32_t>(file_id, path, "input_ids", H5T_NATIVE_INT32, nl, s.seq_length);
    s.input_mask = read_flags(file_id, path, "input_mask", nl, s.seq_length);
    s.segment_ids = read_flags(file_id, path, "segment_ids", nl, s.seq_length);
    s.masked_lm_positions =
        read_all<int32_t>(file_id, path, "masked_lm_positions", H5T_NATIVE_INT32, np, s.max_predictions);
    s.masked_lm_ids = read_all<int32_t>(file_id, path, "masked_lm_ids", H5T_NATIVE_INT32, np, s.max_predictions);
    s.next_sentence_labels = read_flags(file_id, path, "next_sentence_labels", n, 1);
  }
  validate_values(s);
  return s;
}

void hdf5_bert_example(const Hdf5BertShard& s, int64_t row, BertExample& out) {
  if (row < 0 || row >= s.rows)
    throw Error(s.path + ": row " + std::to_string(row) + " out of range (" + std::to_string(s.rows) + " rows)");
  const size_t L = size_t(s.seq_length), P = size_t(s.max_predictions);
  const size_t base = size_t(row) * L;
  out.text.assign(s.input_ids.begin() + base, s.input_ids.begin() + base + L);
  out.types.assign(s.segment_ids.begin() + base, s.segment_ids.begin() + base + L);
  out.padding_mask.assign(s.input_mask.begin() + base, s.input_mask.begin() + base + L);
  out.labels.assign(L, -1);
  out.loss_mask.assign(L, 0);
  const int32_t* pos = s.masked_lm_positions.data() + size_t(row) * P;
  const int32_t* ids = s.masked_lm_ids.data() + size_t(row) * P;
  const int64_t n = used_predictions(pos, int64_t(P));
  for (int64_t j = 0; j < n; ++j) {
    out.labels[size_t(pos[j])] = ids[j];
    out.loss_mask[size_t(pos[j])] = 1;
  }
  out.is_random = s.next_sentence_labels[size_t(row)];
  out.truncated = 0;
}

void check_megatron_prefix(const std::string& command, const std::string& prefix) {
  std::error_code ec;
  if (fs::exists(prefix + ".idx", ec) || !is_hdf5_bert_data_path(prefix)) return;
  const std::string reads = "`lmforge train " + command + "` reads a Megatron dataset prefix: PREFIX names the "
                            "files PREFIX.bin and PREFIX.idx (made by `lmforge prep`)";
  bool shards = !fs::is_directory(prefix, ec);
  std::vector<std::string> found;  // the dataset prefixes in a directory given as one, sorted
  if (!shards) {
    std::error_code list_error;
    for (const fs::directory_entry& e : fs::directory_iterator(prefix, list_error)) {
      shards = shards || is_shard_name(e.path());
      if (e.path().extension() == ".idx") found.push_back((e.path().parent_path() / e.path().stem()).string());
    }
  }
  std::sort(found.begin(), found.end());
  std::string prefixes;
  for (size_t i = 0; i < found.size() && i < 3; ++i) prefixes += (i ? ", " : "") + found[i];
  if (found.size() > 3) prefixes += " and " + std::to_string(found.size() - 3) + " more";
  if (shards)
    throw Error("--data-path " + prefix + ": HDF5 shards (NVIDIA's pre-masked BERT data) are `lmforge train bert` "
                "data; " + reads);
  throw Error("--data-path " + prefix + ": a directory, not a dataset prefix; " + reads +
              (prefixes.empty() ? std::string(" (this directory holds no .idx file)")
                                : " (in this directory: " + prefixes + ")"));
}

void check_fairseq_data(const std::string& spec) {
  std::error_code ec;
  if (is_pattern(spec) || fs::exists(spec, ec) || is_dangling(spec)) return;
  if (fs::exists(spec + ".idx", ec) || fs::exists(spec + ".bin", ec))
    throw Error("--data " + spec + ": a Megatron dataset prefix (" + spec + ".bin/.idx), not HDF5 shards: fairseq's "
                "--data takes NVIDIA's pre-masked HDF5 shards (a directory, glob or .hdf5 file); give a dataset "
                "prefix with --data-path instead");
  throw Error("--data " + spec + ": no such file or directory");
}

bool is_hdf5_bert_data_path(const std::string& spec) {
  std::error_code ec;
  const std::string ext = fs::path(spec).extension().string();
  return is_pattern(spec) || ext == ".hdf5" || ext == ".h5" || fs::is_directory(spec, ec);
}

std::vector<std::string> list_hdf5_bert_shards(const std::string& spec, Hdf5Split split) {
  std::vector<std::string> train, valid;
  for (const std::string& f : expand(spec)) {
    const std::string name = fs::path(f).filename().string();
    if (contains(name, "training"))
      train.push_back(f);
    else if (contains(name, "test") || contains(name, "valid") || contains(name, "eval"))
      valid.push_back(f);
    else
      throw Error(f + ": cannot tell whether this is a training or a validation shard: NVIDIA's rule takes files "
                      "whose names contain 'training' for training; validation files must contain 'test', 'valid' "
                      "or 'eval' (rename the file, or name only the shards you mean)");
  }
  if (split == Hdf5Split::kTrain && train.empty())
    throw Error(spec + ": no training shards (file names must contain 'training', as NVIDIA's run_pretraining.py "
                       "selects them)");
  return split == Hdf5Split::kTrain ? train : valid;
}

Hdf5BertShards::Hdf5BertShards(std::vector<std::string> files, uint64_t seed) : seed_(seed) {
  if (files.empty()) throw Error("no HDF5 BERT shards given");
  for (const std::string& f : files) {
    shards_.push_back(probe_hdf5_bert_shard(f));
    const Hdf5ShardInfo& s = shards_.back();
    if (s.seq_length != shards_.front().seq_length)
      throw Error(f + ": sequence length " + std::to_string(s.seq_length) + " differs from " +
                  std::to_string(shards_.front().seq_length) + " in " + shards_.front().path +
                  " (shards of one run share one length: do not mix phase-1 and phase-2 shards)");
    samples_per_epoch_ += s.rows;
  }
  seq_length_ = shards_.front().seq_length;
  if (samples_per_epoch_ == 0) throw Error(files.front() + " and the other shards hold no samples (N = 0 in each)");
}

std::vector<int64_t> Hdf5BertShards::shard_order(int64_t epoch) const {
  const uint64_t state = splitmix_mix(splitmix_mix(seed_ ^ 0x5348415244ULL) ^ static_cast<uint64_t>(epoch));
  return splitmix_permutation(int64_t(shards_.size()), state);
}

const Hdf5BertShards::EpochPlan& Hdf5BertShards::plan(int64_t epoch) {
  if (plan_.epoch != epoch) {
    plan_.epoch = epoch;
    plan_.order = shard_order(epoch);
    plan_.ends.resize(plan_.order.size());
    int64_t total = 0;
    for (size_t s = 0; s < plan_.order.size(); ++s) plan_.ends[s] = total += shards_[size_t(plan_.order[s])].rows;
  }
  return plan_;
}

Hdf5BertShards::Location Hdf5BertShards::locate(int64_t index) {
  if (index < 0) throw Error("HDF5 BERT sample index " + std::to_string(index) + " is negative");
  Location at;
  at.epoch = index / samples_per_epoch_;
  const int64_t offset = index % samples_per_epoch_;
  const EpochPlan& p = plan(at.epoch);
  // The first slot whose rows end after `offset` (empty shards end where their predecessor does and are skipped).
  at.slot = std::upper_bound(p.ends.begin(), p.ends.end(), offset) - p.ends.begin();
  at.file = p.order[size_t(at.slot)];
  const int64_t r = offset - (at.slot == 0 ? 0 : p.ends[size_t(at.slot) - 1]);
  if (rows_.epoch != at.epoch || rows_.file != at.file) {
    const uint64_t state = splitmix_mix(splitmix_mix(splitmix_mix(seed_ ^ 0x524F57ULL) ^ uint64_t(at.epoch)) ^
                                        uint64_t(at.file));
    rows_ = RowCache{at.epoch, at.file, splitmix_permutation(shards_[size_t(at.file)].rows, state)};
  }
  at.row = rows_.permutation[size_t(r)];
  return at;
}

void Hdf5BertShards::sample(int64_t index, BertExample& out) {
  const Location at = locate(index);
  if (loaded_file_ != at.file) {
    loaded_ = Hdf5BertShard{};  // free the previous shard before reading the next
    loaded_file_ = -1;
    loaded_ = read_hdf5_bert_shard(shards_[size_t(at.file)].path);
    const Hdf5ShardInfo& probed = shards_[size_t(at.file)];
    if (loaded_.rows != probed.rows || loaded_.seq_length != probed.seq_length)
      throw Error(probed.path + ": the shard changed while training (was " + std::to_string(probed.rows) + " rows)");
    loaded_file_ = at.file;
    ++shard_loads_;
  }
  hdf5_bert_example(loaded_, at.row, out);
}

}  // namespace lmforge::datasets
