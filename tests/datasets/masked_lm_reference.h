// defines: test helpers for the BERT/T5 dataset tests — shared paths, .npy arrays as int64, the numpy reference
//   (megatron_bert_reference.py) run once per suite with its outputs read back
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "datasets/npy.h"
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

}  // namespace lmforge::datasets::testing
