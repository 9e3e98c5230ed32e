// defines: the multi-tensor op checks (ops.h: adamw_update_multi, sgd_update_multi, lamb_*_multi, scale_multi,
//          sum_squares_multi) run on one device: each multi form against its single-tensor op over the same runs,
//          bit for bit, on many runs of odd sizes (1, 7, 65537, 300001, empty ones), per-run groups, LAMB tensors
//          cut into several runs listed apart and its trust-ratio edge cases (p = 0, u = 0); and where the device
//          is not the CPU, the element-wise results against the CPU's single-tensor ops, bit for bit (where the
//          build has the CPU kernels). Shared by
//          the CPU/guarded op tests (test_ops.cpp) and the CUDA op tests (test_ops_cuda.cpp).
#pragma once
#include "kernels/tensor.h"

namespace lmforge::kernels::testing {

void check_adamw_multi(Device device);
void check_sgd_multi(Device device);
void check_lamb_multi(Device device);
void check_scale_and_sum_squares_multi(Device device);

}  // namespace lmforge::kernels::testing
