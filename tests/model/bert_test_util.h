// defines: helpers of the BERT/T5 model tests: running a Python reference (cached) and reading its tensors,
//          Megatron's bert_s128 samples as int32 rows, loading a safetensors file into a model's parameters by name,
//          a gradient comparison relative to the reference's max-abs and its floor
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "datasets/npy.h"
#include "param/parameter.h"

namespace lmforge::testing {

// Runs the reference once per (script text, the text of reference_common.py it imports, arguments) and caches its
// output in the build tree (ctest runs each test in its own process).
inline std::string reference_file(const std::string& name, const std::string& args) {
  const std::string dir = std::string(LMFORGE_SOURCE_DIR) + "/tests/model/", script = dir + name;
  std::string text;
  for (const std::string& file : {script, dir + "reference_common.py"}) {
    std::ifstream src(file);
    if (!src) throw std::runtime_error("missing " + file);
    text.append((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  }
  const std::string out = std::string(LMFORGE_BINARY_DIR) + "/" + name + "_" +
                          std::to_string(std::hash<std::string>{}(text + "\n" + args)) + ".safetensors";
  if (!std::ifstream(out)) {
    const std::string tmp = out + "." + std::to_string(::getpid());
    const std::string cmd = "/usr/bin/python3 " + script + " --out " + tmp + " " + args;
    const int rc = std::system(cmd.c_str());
    if (rc != 0) throw std::runtime_error("reference script failed (rc " + std::to_string(rc) + "): " + cmd);
    std::rename(tmp.c_str(), out.c_str());
  }
  return out;
}

template <typename T>
std::vector<T> read_all(const checkpoint::SafetensorsFile& f, const std::string& name) {
  const checkpoint::TensorInfo& info = f.at(name);
  if (checkpoint::dtype_size(info.dtype) != sizeof(T)) throw std::runtime_error(name + ": unexpected dtype");
  const auto bytes = f.bytes(info);
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

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
