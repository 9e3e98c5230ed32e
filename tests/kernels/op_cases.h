// defines: lmforge::kernels::testing::OpCase (one op exercised on given operands), op_cases() (the list every
//          backend runs), shape_cases(), philox4x32_10() (an independent re-statement of the dropout generator)
//
// After ggml's test-backend-ops: every op of kernels/ops.h is described ONCE as a case — its operands (host
// values), how to call its forward and backward on device tensors, and a naive double-precision re-statement of
// its forward written from the formula in ops.h (not from the kernels). test_ops.cpp runs every case on every
// (device, dtype) present: against the reference, against CPU fp32, against finite differences, and with one
// and two threads.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace lmforge::kernels::testing {

// A floating operand: host values, shape; `grad` operands get a gradient from backward and a finite-difference
// check.
struct FloatOperand {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  bool grad = true;
};
struct IdOperand {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<int32_t> values;
};

// Device tensors of one run of a case. in/din: the floating operands (of the run's dtype) and their gradients
// (absent for operands without `grad`); ids: i32 operands; saved: f32 scratch the forward writes for the
// backward (statistics, probabilities); out/dout: outputs (of the run's dtype) and their incoming gradients.
struct OpRun {
  std::vector<Tensor> in, din, ids, saved, out, dout;
};

struct OutputSpec {
  std::vector<int64_t> shape;
  bool f32 = false;  // always fp32 (statistics such as the cross-entropy's row maxima), whatever the run's dtype
};

struct OpCase {
  std::string name;
  Op op;
  std::vector<FloatOperand> in;
  std::vector<IdOperand> ids;
  std::vector<std::vector<int64_t>> saved;  // shapes of f32 scratch tensors
  std::vector<OutputSpec> out;
  std::function<void(const OpRun&)> forward;
  std::function<void(const OpRun&)> backward;  // empty: the op has no backward (decode, copy, optimizer)
  // The outputs in double precision from the host operands (in, ids): the formula of ops.h, written plainly.
  std::function<std::vector<std::vector<double>>(const std::vector<std::vector<float>>& in,
                                                 const std::vector<std::vector<int32_t>>& ids)>
      reference;
};

// `large`: shapes above the kernels' parallel thresholds (for the thread-count check); otherwise shapes small
// enough for a finite-difference check of every element.
std::vector<OpCase> op_cases(bool large);
// The cases at the shapes that pick a vectorised backend's fast and generic paths (op_cases_shapes.cpp; part of
// op_cases()).
std::vector<OpCase> shape_cases(bool large);

// Philox4x32-10 (Salmon et al., SC'11), written from the paper's constants, for the dropout reference.
struct Philox4 {
  uint32_t v[4];
};
Philox4 philox4x32_10(Philox4 counter, uint32_t key0, uint32_t key1);
// The dropout decision ops.h specifies, from philox4x32_10(): element i kept?
bool reference_keep(float p, uint64_t seed, uint64_t stream, uint64_t i);

// The columns [first, first + count) of the last dimension of a contiguous or strided view.
Tensor columns(const Tensor& t, int64_t first, int64_t count);

}  // namespace lmforge::kernels::testing
