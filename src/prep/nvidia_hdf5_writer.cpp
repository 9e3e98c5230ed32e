// defines: write_nvidia_hdf5()
#include "prep/nvidia_hdf5_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include "prep/run_deflate.h"
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

// Row `row` of field f for instance x, the whole width written (padding zeroed here, not by clearing the chunk):
// [CLS] A [SEP] B [SEP] copied from the documents' ids and masked as the replay drew (nvidia_instances.h).
void fill_row(const FieldSpec& f, const NvidiaInstances& in, const NvidiaInstance& x, size_t width,
              unsigned char* row) {
  const size_t a = x.a_length, b = x.b_length, n = a + b + 3;
  const uint16_t* positions = in.masked_positions.data() + x.mask_begin;
  const int32_t* replacements = in.replacements.data() + x.mask_begin;
  switch (f.field) {
    case Field::kInputIds: {
      int32_t* t = reinterpret_cast<int32_t*>(row);
      t[0] = in.cls;
      std::memcpy(t + 1, in.ids + x.a_begin, a * sizeof(int32_t));
      t[a + 1] = in.sep;
      std::memcpy(t + a + 2, in.ids + x.b_begin, b * sizeof(int32_t));
      t[n - 1] = in.sep;
      std::memset(t + n, 0, (width - n) * sizeof(int32_t));
      for (size_t k = 0; k < x.mask_count; ++k)
        if (replacements[k] != NvidiaInstances::kKeep) t[positions[k]] = replacements[k];
      break;
    }
    case Field::kInputMask:
      std::memset(row, 1, n);
      std::memset(row + n, 0, width - n);
      break;
    case Field::kSegmentIds:
      std::memset(row, 0, a + 2);
      std::memset(row + a + 2, 1, b + 1);
      std::memset(row + n, 0, width - n);
      break;
    case Field::kPositions:
    case Field::kMaskedIds: {
      int32_t* t = reinterpret_cast<int32_t*>(row);
      for (size_t k = 0; k < x.mask_count; ++k)
        t[k] = f.field == Field::kPositions ? int32_t(positions[k]) : in.token(x, positions[k]);
      std::memset(t + x.mask_count, 0, (width - x.mask_count) * sizeof(int32_t));
      break;
    }
    case Field::kNextSentence:
      row[0] = x.is_random_next;
      break;
  }
}

struct Chunk {
  size_t field = 0;
  size_t first_row = 0;
};

// A thread's deflater and its row buffer (kept between chunks: fresh ones were page faults every time).
struct Deflater {
  RunDeflater compressor;
  std::vector<unsigned char> raw;
};

// Rows [first_row, first_row + chunk_rows) of one field into d.raw, zero-padded to the whole chunk (HDF5 stores
// whole chunks; rows past N are never read).
void fill_chunk(const Chunk& c, const NvidiaInstances& in, size_t chunk_rows, Deflater& d) {
  const FieldSpec& f = kFields[c.field];
  const size_t width = width_of(f, in), row_bytes = width * f.bytes;
  d.raw.resize(chunk_rows * row_bytes);  // the thread's buffer: every byte is written below
  const size_t rows = std::min(chunk_rows, in.size() - c.first_row);
  for (size_t r = 0; r < rows; ++r) fill_row(f, in, in.rows[c.first_row + r], width, d.raw.data() + r * row_bytes);
  std::memset(d.raw.data() + rows * row_bytes, 0, (chunk_rows - rows) * row_bytes);
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
    for (size_t r = 0; r < n; r += chunk_rows[k]) all.push_back(Chunk{k, r});
  // One deflate code per dataset, shaped by its first chunk and covering every byte (run_deflate.h): the chunks of a
  // dataset are alike (rows in shuffled order), and a code per chunk cost a third of the compressing for 0.2 % less.
  std::vector<DeflateCode> codes;
  if (n > 0) {
    Deflater first;
    for (size_t k = 0; k < kFields.size(); ++k) {
      fill_chunk(Chunk{k, 0}, in, chunk_rows[k], first);
      codes.push_back(DeflateCode::covering(first.raw.data(), first.raw.size()));
    }
  }
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, size_t(std::max(1, workers)));
  // Batches bound the compressed bytes held at once; within one, chunks are built in parallel, written in order.
  // Each place in a batch keeps its stream buffer for the next batch (no allocation, copy or page fault per chunk).
  const size_t batch = size_t(std::max(1, workers)) * 8;
  std::vector<StreamBuffer> streams(batch);
  std::vector<size_t> sizes(batch);
  tbb::enumerable_thread_specific<Deflater> deflaters;
  for (size_t b = 0; b < all.size(); b += batch) {
    const size_t e = std::min(all.size(), b + batch);
    tbb::parallel_for(tbb::blocked_range<size_t>(b, e, 1), [&](const tbb::blocked_range<size_t>& range) {
      Deflater& d = deflaters.local();
      for (size_t i = range.begin(); i != range.end(); ++i) {
        fill_chunk(all[i], in, chunk_rows[all[i].field], d);
        sizes[i - b] = d.compressor.compress(d.raw.data(), d.raw.size(), codes[all[i].field], streams[i - b]);
      }
    });
    for (size_t i = b; i < e; ++i) {
      const Chunk& c = all[i];
      const hsize_t offset[2] = {hsize_t(c.first_row), 0};
      if (H5Dwrite_chunk(datasets[c.field], H5P_DEFAULT, 0, offset, sizes[i - b], streams[i - b].data()) < 0)
        fail("write dataset " + std::string(kFields[c.field].name) + " (disk full?)");
    }
  }
  owned.clear();
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) fail("flush the file (disk full?)");
}

}  // namespace lmforge::prep
