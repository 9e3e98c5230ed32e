// defines: the CPU linear layer on f16 storage (kernels/cpu/linear_f16.cpp): f16 operands (any of them may be f32
//          instead: the fp32 main gradients of f16 weights), fp32 products, f16 results rounded once
#pragma once
#include "kernels/ops.h"

namespace lmforge::kernels::cpu {

// linear_forward/backward of ops.h (shapes checked there; out, inp, dinp and dout contiguous, the weight and its
// gradient may have a row stride).
void linear_forward_f16(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int N, int IC,
                        int OC, WeightLayout layout);
void linear_backward_f16(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                         const Tensor& inp, const Tensor& weight, int N, int IC, int OC, WeightLayout layout);

// fp32 elements of the largest output or output-gradient block converted at once (128 MB): wider ones (the LM
// head's [N, vocab] logits) are done in blocks of output columns, so the scratch does not grow with the batch. Not
// smaller: every block is a GEMM and conversion passes ending in a barrier of the OpenMP team, and on a loaded
// machine each barrier can wait a scheduler time slice for a descheduled thread; with blocks of 4M elements the
// f16 LM head of config A (13 blocks) took 2x the fp32 one's CPU time at 2 threads, whole it took 1.1x. Tests size
// their cases from this constant to cross a block boundary.
inline constexpr int64_t kLinearF16BlockElems = int64_t(1) << 25;

}  // namespace lmforge::kernels::cpu
