// defines: what runs an op case (op_cases.h) on a device: Target (device, dtype), targets(), cuda_unavailable(),
//          execute() (upload, forward, backward, download), the dtype tolerances and expect_close(); shared by the
//          CPU/guarded op tests (test_ops.cpp) and the CUDA op tests (test_ops_cuda.cpp)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/tensor.h"
#include "op_cases.h"

namespace lmforge::kernels::testing {

struct Target {
  Device device;
  DType dtype;
  std::string name() const { return std::string(device_name(device)) + "/" + dtype_name(dtype); }
};

// Why the CUDA device cannot be used here (the backend's error: no CUDA backend in this build, no driver, no
// device); empty when it can.
std::string cuda_unavailable();

// Every (device, dtype) of this build with a usable device: CPU and GUARDED (when the build has the CPU kernels)
// and CUDA (when cuda_unavailable() is empty), each × {F32, BF16, F16}. A case runs on those whose op_supported()
// says yes.
std::vector<Target> targets();

uint16_t to_bf16(float x);  // round to nearest even
float from_bf16(uint16_t b);
uint16_t to_f16(float x);  // round to nearest even, overflow to inf
float from_f16(uint16_t u);

size_t count(const std::vector<int64_t>& shape);
// n normal(0, 1) floats from mt19937(seed).
std::vector<float> noise(size_t n, uint32_t seed);
// Host floats to a device buffer of `dtype` (rounded to nearest even), and back.
Buffer upload(Backend& be, DType dtype, const std::vector<float>& host);
std::vector<float> download(Backend& be, const Buffer& b);

// One execution of a case on a target: operands uploaded, forward (and backward with the given douts and gradient
// pre-fills) run, everything downloaded. Outputs and saved tensors are filled with NaN before the forward (every
// element must be written).
struct Result {
  std::vector<std::vector<float>> out, din;
};
Result execute(const OpCase& c, const Target& target, const std::vector<std::vector<float>>& in_values,
               const std::vector<std::vector<float>>* dout, const std::vector<std::vector<float>>* prefill);

std::vector<std::vector<float>> values_of(const OpCase& c);
std::vector<std::vector<int32_t>> ids_of(const OpCase& c);

// Relative tolerance of a dtype's results (of the largest magnitude in the result): fp32 arithmetic error; bf16
// (8 significant bits, unit roundoff 2^-9 ≈ 2e-3) and f16 (11 bits, 2^-12 ≈ 2.4e-4) storage of the operands and
// results, amplified by the ops' sums and cancellations (layernorm, softmax) to about 15 units.
double tolerance(DType dtype);
// A low-precision run that agrees with fp32 more closely than this (relative to the largest magnitude) would be
// fp32 in disguise: storage rounding alone moves bf16 results by ~2^-9 and f16 by ~2^-12.
double least_difference(DType dtype);

// Largest |got − want| within rel·max(1, max |want|); a gtest failure naming `what` and the worst element if not.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rel, const std::string& what);
std::vector<double> widen(const std::vector<float>& v);

}  // namespace lmforge::kernels::testing
