// defines: helpers of the BERT/T5 model tests: Megatron's bert_s128 samples as int32 rows, loading a safetensors
//          file into a model's parameters by name, and a gradient comparison relative to the reference's max-abs
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "datasets/npy.h"
#include "param/parameter.h"

namespace lmforge::testing {

// The first `rows` rows of an int64 .npy array, as int32 (Megatron's dataset fields).
inline std::vector<int32_t> npy_rows_i32(const std::string& path, int64_t rows) {
  const datasets::NpyArray a = datasets::read_npy(path);
  if (a.descr != "<i8") throw std::runtime_error(path + ": expected <i8, got " + a.descr);
  int64_t per_row = 1;
  for (size_t d = 1; d < a.shape.size(); d++) per_row *= a.shape[d];
  if (a.shape.empty() || a.shape[0] < rows) throw std::runtime_error(path + ": fewer rows than asked");
  const auto* v = reinterpret_cast<const int64_t*>(a.data.data());
  std::vector<int32_t> out((size_t)(rows * per_row));
  for (size_t i = 0; i < out.size(); i++) out[i] = (int32_t)v[i];
  return out;
}

// Every tensor of a whole (tensor-parallel size 1) table read from `file` by its name into `params`.
inline void load_whole(const checkpoint::SafetensorsFile& file, const param::ParamTable& table, float* params,
                       const std::string& prefix = "") {
  for (const param::Parameter& p : table) file.read_f32(prefix + p.name, p.shape, params + p.offset);
}

// max|ours − ref| / max(max|ref|, floor): the error relative to the tensor's scale. The floor keeps a tensor whose
// exact gradient is 0 (the attention key bias: softmax ignores a constant per query row) from dividing by ~0.
inline double relative_to_max(const float* ours, const double* ref, size_t n, double floor) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; i++) {
    diff = std::max(diff, std::fabs((double)ours[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return diff / std::max(scale, floor);
}

// The denominator floor for a gradient: the attention key bias's exact gradient is 0 (its float value is rounding
// noise of the scale of the key weight's gradient), so it is measured against that tensor's max-abs; every other
// tensor against 1e-6.
template <typename Lookup>  // std::vector<double>(const std::string& name)
double gradient_floor(const std::string& name, Lookup&& ref_grad) {
  const std::string suffix = "key.bias";
  if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return 1e-6;
  double m = 0.0;
  for (double v : ref_grad(name.substr(0, name.size() - 4) + "weight")) m = std::max(m, std::fabs(v));
  return std::max(m, 1e-6);
}

}  // namespace lmforge::testing
