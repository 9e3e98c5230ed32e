// defines: the CPU bias add (in place) and its gradient, the column sums (fp32: column_sums(); bf16 / f16 storage:
//          column_sums_lowp(), also the linear layer's bias gradient), and the registration
#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {

namespace {

// Columns per thread block: at most kMaxColumnBlock, and narrower (down to 16, one cache line of fp32) so that there
// are two blocks per thread where the columns allow. Each column is summed over the rows in order by one thread
// whatever the block width, so the width changes no result. Why: with blocks of 256, a bias gradient of 256 columns
// or fewer (ELECTRA-Small's every encoder bias but the FFN's, all of its generator's) was summed over the 4096
// rows of a batch by one thread while the other waited (column_sums ~1 % of a step's samples, nearly all on the
// main thread).
constexpr int64_t kMaxColumnBlock = 256;
int64_t column_block(int64_t OC) {
  const int64_t parts = 2 * (int64_t)omp_get_max_threads();
  const int64_t width = ((OC + parts - 1) / parts + 15) / 16 * 16;
  return std::clamp<int64_t>(width, 16, kMaxColumnBlock);
}

}  // namespace

void column_sums(float* acc_out, const float* x, int N, int OC) {
  const int block = (int)column_block(OC);
  const int nblocks = (OC + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)N * OC >= kParallelMin)
  for (int k = 0; k < nblocks; k++) {
    int o0 = k * block, o1 = o0 + block < OC ? o0 + block : OC;
    float acc[kMaxColumnBlock];
    for (int o = o0; o < o1; o++) acc[o - o0] = 0.0f;
    for (int n = 0; n < N; n++) {
      const float* d = x + (size_t)n * OC;
#pragma omp simd
      for (int o = o0; o < o1; o++) acc[o - o0] += d[o];
    }
    for (int o = o0; o < o1; o++) acc_out[o] += acc[o - o0];
  }
}

// acc[o] += Σ_n x[n,o]: threads own column blocks and walk all rows in order (deterministic), summing in fp32.
void column_sums_lowp(const Tensor& acc, const Tensor& x) {
  const Ref a(acc), d(x);
  const int64_t N = x.rows(), OC = x.dim(-1);
  const int64_t block = column_block(OC);
  const int64_t nblocks = (OC + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)(N * OC) >= kParallelMin)
  for (int64_t k = 0; k < nblocks; k++) {
    const int64_t o0 = k * block, w = std::min(block, OC - o0);
    float sum[kMaxColumnBlock] = {}, buf[kMaxColumnBlock];
    for (int64_t n = 0; n < N; n++) {
      const float* v = d.load(n, o0, w, buf);
#pragma omp simd
      for (int64_t o = 0; o < w; o++) sum[o] += v[o];
    }
    float* out = a.load(0, o0, w, buf);
    for (int64_t o = 0; o < w; o++) out[o] += sum[o];
    a.store(0, o0, w, out);
  }
}

namespace {

// ---- fp32 ---------------------------------------------------------------------------------------------------------

void bias_add_rows(float* x, const float* bias, int N, int C) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= kParallelMin)
  for (int n = 0; n < N; n++) {
    float* row = x + (size_t)n * C;
#pragma omp simd
    for (int c = 0; c < C; c++) row[c] += bias[c];
  }
}

void bias_add_forward_f32(const Tensor& x, const Tensor& bias) {
  const AsF32 y(x, AsF32::INOUT), b(bias, AsF32::IN);
  bias_add_rows(y, b, (int)x.rows(), (int)x.dim(-1));
}

void bias_add_backward_f32(const Tensor& dbias, const Tensor& dout) {
  const AsF32 db(dbias, AsF32::INOUT), d(dout, AsF32::IN);
  column_sums(db, d, (int)dout.rows(), (int)dout.dim(-1));
}

// ---- bf16 / f16 storage -------------------------------------------------------------------------------------------

void bias_add_forward_lowp(const Tensor& x, const Tensor& bias) {
  const Ref y(x);
  const int64_t N = x.rows(), C = x.dim(-1);
  const std::vector<float> b = small_f32(bias);
  for_rows(N, C, (size_t)C, [&](int64_t n, float* s) {
    float* v = y.load(n, 0, C, s);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) v[c] += b[(size_t)c];
    y.store(n, 0, C, v);
  });
}

}  // namespace

void register_bias_add(KernelTable& t) {
  t.add<Kernel::BIAS_ADD_FORWARD>(Device::CPU, DType::F32, bias_add_forward_f32);
  t.add<Kernel::BIAS_ADD_BACKWARD>(Device::CPU, DType::F32, bias_add_backward_f32);
  for (DType lowp : {DType::BF16, DType::F16}) {
    t.add<Kernel::BIAS_ADD_FORWARD>(Device::CPU, lowp, bias_add_forward_lowp);
    t.add<Kernel::BIAS_ADD_BACKWARD>(Device::CPU, lowp, column_sums_lowp);
  }
}

}  // namespace lmforge::kernels::cpu
