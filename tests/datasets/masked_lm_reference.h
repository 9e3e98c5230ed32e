// defines: test helpers for the BERT/T5 dataset tests — shared paths, .npy arrays as int64, the numpy reference
//   (megatron_bert_reference.py) run once per suite with its outputs read back, and the checks both tests make of a
//   dataset's splits: against Megatron's dumps (expect_matches_dump), against the numpy reference
//   (expect_matches_reference), and that warm sampling allocates nothing (expect_warm_samples_allocation_free)
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "datasets/gpt_indices.h"
#include "datasets/npy.h"
#include "datasets/samples_map.h"
#include "reference.h"

namespace lmforge::datasets::testing {

inline std::string sentence_prefix() { return shared_prefix("sample_bert_text_sentence"); }
inline std::string bert_vocab_path() { return std::string(LMFORGE_SHARED_DIR) + "/data/vocab/bert-base-uncased-vocab.txt"; }
inline std::string megatron_samples(const std::string& rel) {
  return std::string(LMFORGE_SHARED_DIR) + "/data/sample/megatron_samples/" + rel;
}

// Any integer .npy as int64 values (row-major), with its shape.
struct IntArray {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;
};
inline IntArray read_int_npy(const std::string& path) {
  const NpyArray a = read_npy(path);
  IntArray out;
  out.shape = a.shape;
  const size_t item = npy_itemsize(a.descr);
  const size_t n = a.data.size() / item;
  out.values.resize(n);
  const bool is_signed = a.descr[1] == 'i';
  for (size_t i = 0; i < n; ++i) {
    uint64_t u = 0;
    std::memcpy(&u, a.data.data() + i * item, item);
    if (is_signed && item < 8 && (u >> (8 * item - 1)) & 1) u |= ~uint64_t(0) << (8 * item);
    out.values[i] = int64_t(u);
  }
  return out;
}

// Row r (length `width`) of a flat array.
inline std::vector<int64_t> row_of(const std::vector<int64_t>& flat, size_t r, size_t width) {
  return std::vector<int64_t>(flat.begin() + std::ptrdiff_t(r * width), flat.begin() + std::ptrdiff_t((r + 1) * width));
}
inline std::vector<int64_t> widen(const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

inline std::string bert_reference_script() {
  return std::string(LMFORGE_SOURCE_DIR) + "/tests/datasets/megatron_bert_reference.py";
}

// A suite whose numpy reference (megatron_bert_reference.py) runs once over Cases::json() (one JSON object per case,
// with the fields the script reads) into dir_, a temporary directory under the Cases::kTag name.
template <class Cases>
class ReferenceSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = temp_dir(Cases::kTag);
    std::string json = "[";
    for (const std::string& c : Cases::json()) json += (json.size() > 1 ? ", " : "") + c;
    write_text(dir_ + "/cases.json", json + "]");
    run_python(bert_reference_script() + " " + dir_ + "/cases.json " + dir_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static inline std::string dir_;
};

// A samples map's rows flattened as (first, end, target) triples, as the dumps and the reference hold them.
inline std::vector<int64_t> map_values(const SamplesMap& m) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < m.size(); ++i) {
    const SamplesMapRow r = m.row(i);
    v.insert(v.end(), {int64_t(r.first), int64_t(r.end), int64_t(r.target)});
  }
  return v;
}

// Every map row and the first `samples` samples of each split equal Megatron's dump under megatron_samples(dump):
// <split>_samples_mapping.npy and <split>_<field>.npy per field. field(sample, name): one field as int64 values.
template <class Sample, class Datasets, class Field, size_t N>
void expect_matches_dump(const Datasets& ds, const std::string& dump, const char* const (&fields)[N], Field field,
                         int samples) {
  for (int k = 0; k < kNumSplits; ++k) {
    const std::string split = split_name(Split(k));
    ASSERT_TRUE(ds.split[size_t(k)]) << split;
    const auto& d = *ds.split[size_t(k)];
    const IntArray map = read_int_npy(megatron_samples(dump + "/" + split + "_samples_mapping.npy"));
    EXPECT_EQ(map_values(d.samples_map()), map.values) << split;
    EXPECT_FALSE(d.samples_map().wide());
    Sample s;
    for (const char* name : fields) {
      const IntArray want = read_int_npy(megatron_samples(dump + "/" + split + "_" + name + ".npy"));
      size_t width = 1;
      for (size_t a = 1; a < want.shape.size(); ++a) width *= size_t(want.shape[a]);
      for (int i = 0; i < samples; ++i) {
        d.sample(i, s);
        ASSERT_EQ(field(s, name), row_of(want.values, size_t(i), width)) << split << " sample " << i << " " << name;
      }
    }
  }
}

// One split against the numpy reference's outputs <base>.map.bin, <base>.index.bin (the sample indices it drew)
// and <base>.<field>.bin per field.
template <class Sample, class Dataset, class Field, size_t N>
void expect_matches_reference(const Dataset& d, const std::string& base, const char* const (&fields)[N], Field field) {
  const auto want_map = read_raw<uint64_t>(base + ".map.bin");
  ASSERT_EQ(std::vector<int64_t>(want_map.begin(), want_map.end()), map_values(d.samples_map())) << base;
  const auto index = read_raw<int64_t>(base + ".index.bin");
  std::vector<std::vector<int64_t>> want;
  for (const char* name : fields) want.push_back(read_raw<int64_t>(base + "." + name + ".bin"));
  Sample s;
  for (size_t j = 0; j < index.size(); ++j) {
    d.sample(index[j], s);
    for (size_t f = 0; f < want.size(); ++f) {
      const size_t width = want[f].size() / index.size();
      ASSERT_EQ(field(s, fields[f]), row_of(want[f], j, width)) << base << " sample " << index[j] << " " << fields[f];
    }
  }
}

// Sampling every row of `d` a second time, once the reused Sample's buffers have grown, allocates nothing (counted
// by alloc_counter.h's allocation_count, which the test program includes); prints "<what>: N samples/s".
template <class Sample, class Dataset>
void expect_warm_samples_allocation_free(const Dataset& d, int64_t (*allocation_count)(), const char* what) {
  Sample s;
  for (int64_t i = 0; i < d.size(); ++i) d.sample(i, s);  // buffers reach their largest size
  const int64_t before = allocation_count();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < d.size(); ++i) d.sample(i, s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(allocation_count() - before, 0);
  std::printf("%s: %.0f samples/s\n", what, double(d.size()) / seconds);
}

}  // namespace lmforge::datasets::testing
