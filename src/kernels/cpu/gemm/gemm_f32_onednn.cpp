// defines: gemm_f32_onednn() — row-major fp32 matrix products through oneDNN's matmul (AVX-512 kernels), and
//          fp32_gemm_uses_onednn(), the run-time choice between it and OpenBLAS for gemm()
#include <cblas.h>
#include <cpuid.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lmforge::kernels::cpu {
namespace {

bool has_avx512f() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b >> 16) & 1u;
}

// Whether OpenBLAS runs AVX-512 kernels: its core (OPENBLAS_CORETYPE or its own detection) is one of the AVX-512
// ones of OpenBLAS 0.3.21's dynamic architectures (or later ones').
bool openblas_core_has_avx512() {
  const char* core = openblas_get_corename();
  if (!core) return false;
  for (const char* avx512 : {"skylakex", "cooperlake", "sapphirerapids"})
    if (strcasecmp(core, avx512) == 0) return true;
  return false;
}

// oneDNN or OpenBLAS for fp32: whichever runs the CPU's widest vectors.
// - AVX-512F in the CPU but not in OpenBLAS's core (this project's VMs set OPENBLAS_CORETYPE=Haswell, and some
//   VMs' detection falls back to it): oneDNN's brgemm matmul, which always uses the widest vectors the CPU has.
//   Measured on BERT-base's [512 × 768]·[768 × {768, 2304, 3072}] products and their transposed backward forms,
//   2 threads: oneDNN 1.2–1.8x OpenBLAS-Haswell per CPU-second (bench/train/RESULTS.md, "BERT-base").
// - AVX-512 kernels in both (OpenBLAS's core SkylakeX or Cooperlake): OpenBLAS, single-threaded on each thread's
//   block of C (gemm()). Inside GPT-2 124M's training step (seq 256, batch 2; AMD EPYC with AVX-512, 2 threads)
//   it took less time than oneDNN on 11 of the 15 product shapes (all five weight-gradient shapes, e.g.
//   [768 × 3072 × 512] 390 -> 470 GFLOP/s; oneDNN was ahead by 4–9 % on two forward shapes and on the LM head's
//   forward and dx), 6 % less over all products; the step 0.99–1.06 s -> 0.95–0.97 s.
// - No AVX-512F: OpenBLAS (oneDNN's AVX2 matmul measured 1.07–3x slower than OpenBLAS on an AVX2 EPYC).
// LMFORGE_FP32_GEMM=openblas or =onednn overrides the choice (for comparisons); oneDNN only where AVX-512F exists.
struct Fp32GemmChoice {
  bool onednn;
  const char* why;
};
Fp32GemmChoice choose_fp32_gemm() {
  const char* env = std::getenv("LMFORGE_FP32_GEMM");
  if (env && std::strcmp(env, "openblas") == 0) return {false, "LMFORGE_FP32_GEMM=openblas"};
  if (env && *env && std::strcmp(env, "onednn") != 0)
    throw Error(std::string("LMFORGE_FP32_GEMM=") + env + ": expected openblas or onednn");
  if (!has_avx512f()) {
    return {false, env && *env ? "LMFORGE_FP32_GEMM=onednn, but this CPU has no AVX-512F" : "no AVX-512F in this CPU"};
  }
  if (env && *env) return {true, "LMFORGE_FP32_GEMM=onednn"};
  if (openblas_core_has_avx512()) return {false, "OpenBLAS's core has AVX-512 kernels"};
  return {true, "AVX-512F in this CPU, not in OpenBLAS's core"};
}

// Decided once: the environment and the CPU do not change.
const Fp32GemmChoice& fp32_gemm_choice() {
  static const Fp32GemmChoice choice = choose_fp32_gemm();
  return choice;
}

const dnnl::engine& f32_engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A [rows, cols] fp32 row-major matrix with leading dimension ld, or the transpose of one, seen as [rows, cols].
dnnl::memory::desc f32_matrix(int64_t rows, int64_t cols, int64_t ld, bool transposed) {
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32, strides);
}

}  // namespace

bool fp32_gemm_uses_onednn() { return fp32_gemm_choice().onednn; }

std::string fp32_gemm_info() {
  return std::string(fp32_gemm_choice().onednn ? "oneDNN's matmul" : "OpenBLAS") + " (" + fp32_gemm_choice().why + ")";
}

// C = op(A)·op(B) + beta·C for beta 0 (overwrite) or 1 (oneDNN's sum post-op). oneDNN runs on the OpenMP team,
// the same threads as every other kernel here, and caches the primitive of each shape (a hash lookup per call).
void gemm_f32_onednn(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
                     int ldb, float beta, float* C, int ldc) {
  if (beta != 0.0f && beta != 1.0f) throw std::logic_error("gemm_f32_onednn: beta must be 0 or 1");
  const dnnl::memory::desc a_md = f32_matrix(M, K, lda, trans_a), b_md = f32_matrix(K, N, ldb, trans_b),
                           c_md = f32_matrix(M, N, ldc, false);
  dnnl::primitive_attr attr;
  if (beta == 1.0f) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, f32_engine());
  const dnnl::matmul mm(pd);
  dnnl::stream s(f32_engine());
  dnnl::memory a(a_md, f32_engine(), const_cast<float*>(A)), b(b_md, f32_engine(), const_cast<float*>(B)),
      c(c_md, f32_engine(), C);
  mm.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  s.wait();
}

}  // namespace lmforge::kernels::cpu
