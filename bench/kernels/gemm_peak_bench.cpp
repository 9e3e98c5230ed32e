// defines: bench_gemm_peak — the fp32 and bf16 GEMM throughput of kernels::linear_forward (OpenBLAS sgemm; oneDNN
//          bf16 matmul with AVX512-BF16/AMX, else fp32 GEMMs of the widened bf16 operands) on large training-like
//          shapes: the peaks a training step's GFLOP/s is a fraction of (bench/train/run_mixed_precision_bench.sh)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"

using namespace lmforge;

namespace {

// Best-of-reps GFLOP/s of out[N,OC] = inp[N,IC]·W[IC,OC] in `dtype` (2·N·IC·OC flops per call).
double measure(kernels::DType dtype, int N, int IC, int OC, int reps) {
  kernels::Backend& be = kernels::cpu_backend();
  kernels::Buffer x(be, dtype, (size_t)N * IC), w(be, dtype, (size_t)IC * OC), y(be, dtype, (size_t)N * OC);
  // Small non-zero values (bit patterns of ~0.01 in either dtype): zeros could take shortcuts.
  std::vector<float> host((size_t)std::max(N * IC, IC * OC), 0.01f);
  kernels::Buffer f(be, kernels::DType::F32, host.size());
  be.copy_to_device(f.data(), host.data(), host.size() * sizeof(float));
  kernels::copy(x.view({(int64_t)N * IC}), f.view({(int64_t)N * IC}));
  kernels::copy(w.view({(int64_t)IC * OC}), f.view({(int64_t)IC * OC}));
  double best = 1e30;
  for (int r = 0; r < reps + 1; r++) {  // the first call JIT-compiles oneDNN's kernel / warms OpenBLAS's buffers
    const auto t0 = std::chrono::steady_clock::now();
    kernels::linear_forward(y.view({N, OC}), x.view({N, IC}), w.view({IC, OC}), kernels::Tensor{},
                            kernels::WeightLayout::IN_OUT);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::min(best, t);
  }
  return 2.0 * N * IC * OC / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 10;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_gemm_peak [--reps N]   (threads: OMP_NUM_THREADS)\n");
      return 2;
    }
  }
  std::printf("backend: %s; bf16 GEMM: %s\n", kernels::cpu_backend().info().c_str(),
              kernels::bf16_gemm_cpu_path().c_str());
  // GPT-2 124M's MLP projection at B·T = 512 and 1024, and the LM head's shape of config A.
  const int shapes[][3] = {{1024, 768, 3072}, {512, 768, 3072}, {1024, 256, 50304}};
  for (kernels::DType dtype : {kernels::DType::F32, kernels::DType::BF16}) {
    double peak = 0.0;
    for (const auto& s : shapes) {
      const double g = measure(dtype, s[0], s[1], s[2], reps);
      peak = std::max(peak, g);
      std::printf("gemm %s [%d x %d]·[%d x %d]: %.0f GFLOP/s\n", kernels::dtype_name(dtype), s[0], s[1], s[1], s[2], g);
    }
    std::printf("peak %s: %.0f GFLOP/s\n", kernels::dtype_name(dtype), peak);
  }
  return 0;
}
