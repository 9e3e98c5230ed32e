// defines: write_nvidia_hdf5()
#include "prep/nvidia_hdf5_writer.h"

#include <hdf5.h>
#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include "util/error.h"

namespace lmforge::prep {
namespace {

class H5Handle {
 public:
  H5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Handle() {
    if (id_ >= 0) close_(id_);
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// HDF5 prints its error stack to stderr by default; errors are reported as lmforge::Error instead.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

enum class Field { kInputIds, kInputMask, kSegmentIds, kPositions, kMaskedIds, kNextSentence };

struct FieldSpec {
  const char* name;
  Field field;
  size_t bytes;  // 4: int32, 1: int8
  bool per_prediction;  // width P (else L); kNextSentence has rank 1
};
// create_pretraining_data.py's create_dataset() calls, in order.
constexpr std::array<FieldSpec, 6> kFields = {{{"input_ids", Field::kInputIds, 4, false},
                                               {"input_mask", Field::kInputMask, 1, false},
                                               {"segment_ids", Field::kSegmentIds, 1, false},
                                               {"masked_lm_positions", Field::kPositions, 4, true},
                                               {"masked_lm_ids", Field::kMaskedIds, 4, true},
                                               {"next_sentence_labels", Field::kNextSentence, 1, false}}};

size_t width_of(const FieldSpec& f, const NvidiaInstances& in) {
  if (f.field == Field::kNextSentence) return 1;
  return size_t(f.per_prediction ? in.max_predictions : in.seq_length);
}

template <class T>
void fill_row(const FieldSpec& f, const NvidiaInstances& in, size_t instance, T* row) {
  const uint64_t tb = in.token_begin[instance], te = in.token_begin[instance + 1];
  const uint64_t mb = in.mask_begin[instance], me = in.mask_begin[instance + 1];
  const size_t n = size_t(te - tb);
  switch (f.field) {
    case Field::kInputIds:
      for (size_t j = 0; j < n; ++j) row[j] = static_cast<T>(in.tokens[tb + j]);
      break;
    case Field::kInputMask:
      for (size_t j = 0; j < n; ++j) row[j] = 1;
      break;
    case Field::kSegmentIds:
      for (size_t j = in.a_length[instance]; j < n; ++j) row[j] = 1;
      break;
    case Field::kPositions:
      for (uint64_t j = mb; j < me; ++j) row[j - mb] = static_cast<T>(in.masked_positions[j]);
      break;
    case Field::kMaskedIds:
      for (uint64_t j = mb; j < me; ++j) row[j - mb] = static_cast<T>(in.masked_ids[j]);
      break;
    case Field::kNextSentence:
      row[0] = static_cast<T>(in.is_random_next[instance]);
      break;
  }
}

struct Chunk {
  size_t field = 0;
  size_t first_row = 0;
  std::vector<unsigned char> deflated;
};

// A thread's deflater and its scratch row buffer.
struct Deflater {
  std::unique_ptr<libdeflate_compressor, void (*)(libdeflate_compressor*)> compressor{
      libdeflate_alloc_compressor(1), libdeflate_free_compressor};
  std::vector<unsigned char> raw;
  std::vector<unsigned char> deflated;  // room for the worst case; the chunk keeps only its bytes
};

// Rows [first_row, first_row + chunk_rows) of one field, zero-padded to the whole chunk (HDF5 stores whole chunks;
// rows past N are never read), deflated at level 4 (h5py's compression='gzip') in the zlib format HDF5's deflate
// filter reads.
void build_chunk(Chunk& c, const NvidiaInstances& in, size_t chunk_rows, Deflater& d) {
  const FieldSpec& f = kFields[c.field];
  const size_t width = width_of(f, in), row_bytes = width * f.bytes;
  d.raw.assign(chunk_rows * row_bytes, 0);
  const size_t rows = std::min(chunk_rows, in.size() - c.first_row);
  for (size_t r = 0; r < rows; ++r) {
    const size_t instance = in.order[c.first_row + r];
    unsigned char* row = d.raw.data() + r * row_bytes;
    if (f.bytes == 4) fill_row(f, in, instance, reinterpret_cast<int32_t*>(row));
    else fill_row(f, in, instance, reinterpret_cast<int8_t*>(row));
  }
  if (!d.compressor) throw Error("libdeflate could not allocate a compressor (out of memory)");
  // Deflated into the thread's buffer and copied out at its size: a worst-case buffer per chunk was a fresh
  // allocation (and page faults) every time.
  d.deflated.resize(libdeflate_zlib_compress_bound(d.compressor.get(), d.raw.size()));
  const size_t size =
      libdeflate_zlib_compress(d.compressor.get(), d.raw.data(), d.raw.size(), d.deflated.data(), d.deflated.size());
  if (size == 0) throw Error("libdeflate could not compress an HDF5 chunk");
  c.deflated.assign(d.deflated.begin(), d.deflated.begin() + long(size));
}

}  // namespace

void write_nvidia_hdf5(const std::string& path, const NvidiaInstances& in, int workers) {
  QuietErrors quiet;
  auto fail = [&](const std::string& what) { throw Error(path + ": cannot " + what + " (HDF5)"); };
  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) fail("create the file");
  const size_t n = in.size();
  std::vector<hid_t> datasets;
  std::vector<size_t> chunk_rows(kFields.size(), 1);
  std::vector<std::unique_ptr<H5Handle>> owned;
  for (size_t k = 0; k < kFields.size(); ++k) {
    const FieldSpec& f = kFields[k];
    const size_t width = width_of(f, in);
    const int rank = f.field == Field::kNextSentence ? 1 : 2;
    const hsize_t dims[2] = {hsize_t(n), hsize_t(width)};
    H5Handle space(H5Screate_simple(rank, dims, nullptr), H5Sclose);
    H5Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (!space.ok() || !props.ok()) fail("describe dataset " + std::string(f.name));
    if (n > 0) {
      // About 256 KiB of uncompressed values per chunk: large enough for deflate, small enough to spread over
      // threads and for a reader to decompress little beyond the rows it wants.
      chunk_rows[k] = std::clamp<size_t>((size_t(256) << 10) / (width * f.bytes), 1, n);
      const hsize_t chunk[2] = {hsize_t(chunk_rows[k]), hsize_t(width)};
      if (H5Pset_chunk(props.get(), rank, chunk) < 0 || H5Pset_deflate(props.get(), 4) < 0)
        fail("set up compression of dataset " + std::string(f.name));
    }
    owned.push_back(std::make_unique<H5Handle>(
        H5Dcreate2(file.get(), f.name, f.bytes == 4 ? H5T_STD_I32LE : H5T_STD_I8LE, space.get(), H5P_DEFAULT,
                   props.get(), H5P_DEFAULT),
        H5Dclose));
    if (!owned.back()->ok()) fail("create dataset " + std::string(f.name));
    datasets.push_back(owned.back()->get());
  }

  std::vector<Chunk> all;
  for (size_t k = 0; k < kFields.size(); ++k)
    for (size_t r = 0; r < n; r += chunk_rows[k]) all.push_back(Chunk{k, r, {}});
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, size_t(std::max(1, workers)));
  // Batches bound the compressed bytes held at once; within one, chunks are built in parallel, written in order.
  const size_t batch = size_t(std::max(1, workers)) * 8;
  tbb::enumerable_thread_specific<Deflater> deflaters;
  for (size_t b = 0; b < all.size(); b += batch) {
    const size_t e = std::min(all.size(), b + batch);
    tbb::parallel_for(tbb::blocked_range<size_t>(b, e, 1), [&](const tbb::blocked_range<size_t>& range) {
      Deflater& d = deflaters.local();
      for (size_t i = range.begin(); i != range.end(); ++i) build_chunk(all[i], in, chunk_rows[all[i].field], d);
    });
    for (size_t i = b; i < e; ++i) {
      Chunk& c = all[i];
      const hsize_t offset[2] = {hsize_t(c.first_row), 0};
      if (H5Dwrite_chunk(datasets[c.field], H5P_DEFAULT, 0, offset, c.deflated.size(), c.deflated.data()) < 0)
        fail("write dataset " + std::string(kFields[c.field].name) + " (disk full?)");
      c.deflated = {};
    }
  }
  owned.clear();
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) fail("flush the file (disk full?)");
}

}  // namespace lmforge::prep
