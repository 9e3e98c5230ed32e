// defines: gemm_bf16() — row-major bf16 matrix products with fp32 accumulation through oneDNN's matmul
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <memory>

#include "kernels/cpu/cpu_ops.h"
#include "util/error.h"

namespace lmforge::kernels::cpu {
namespace {

// One CPU engine for the process; oneDNN keeps its own cache of compiled primitives keyed by the descriptors, so
// re-creating a matmul of a shape seen before costs a hash lookup, not a JIT compilation.
const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::data_type dnnl_type(DType d) {
  switch (d) {
    case DType::BF16: return dnnl::memory::data_type::bf16;
    case DType::F32: return dnnl::memory::data_type::f32;
    default: throw Error(std::string("gemm_bf16: no oneDNN type for ") + dtype_name(d));
  }
}

// A [rows, cols] row-major matrix with leading dimension ld, or its transpose seen as [rows, cols].
dnnl::memory::desc matrix(int64_t rows, int64_t cols, dnnl::memory::data_type t, int64_t ld, bool transposed) {
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, t, strides);
}

// dst [cols, rows] = srcᵀ for src [rows, cols] with row stride ld, in 32×32 tiles over the team.
std::unique_ptr<uint16_t[]> transposed(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld) {
  std::unique_ptr<uint16_t[]> dst(new uint16_t[(size_t)(rows * cols)]);
  uint16_t* d = dst.get();
  const int64_t tile = 32, tr = (rows + tile - 1) / tile, tc = (cols + tile - 1) / tile;
#pragma omp parallel for collapse(2) schedule(static) if (rows * cols >= (1 << 16))
  for (int64_t bi = 0; bi < tr; bi++)
    for (int64_t bj = 0; bj < tc; bj++) {
      const int64_t i1 = std::min(rows, (bi + 1) * tile), j1 = std::min(cols, (bj + 1) * tile);
      for (int64_t j = bj * tile; j < j1; j++)
        for (int64_t i = bi * tile; i < i1; i++) d[j * rows + i] = src[i * ld + j];
    }
  return dst;
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t* A, int lda, const uint16_t* B,
               int ldb, bool accumulate, void* C, DType c_dtype, int ldc, const float* bias) {
  using dt = dnnl::memory::data_type;
  // oneDNN 2.6's brgemm matmul is fast on row-major operands and ~30x slower on transposed (column-major) ones
  // (measured: a [256,1024]ᵀ·[1024,768] weight gradient 20 ms against 0.5 ms), so transposed operands are copied
  // into row-major order first (a memory-bound pass over bf16 data).
  std::unique_ptr<uint16_t[]> at, bt;
  if (trans_a) {  // A is stored [K, M]
    at = transposed(A, K, M, lda);
    A = at.get(), lda = K, trans_a = false;
  }
  if (trans_b) {  // B is stored [N, K]
    bt = transposed(B, N, K, ldb);
    B = bt.get(), ldb = N, trans_b = false;
  }
  const dnnl::memory::desc a_md = matrix(M, K, dt::bf16, lda, trans_a);
  const dnnl::memory::desc b_md = matrix(K, N, dt::bf16, ldb, trans_b);
  const dnnl::memory::desc c_md = matrix(M, N, dnnl_type(c_dtype), ldc, false);
  const dnnl::memory::desc bias_md =
      bias ? dnnl::memory::desc({1, N}, dt::f32, dnnl::memory::dims{N, 1}) : dnnl::memory::desc();
  dnnl::primitive_attr attr;
  if (accumulate) {  // C = A·B (+ bias) + 1·C
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, bias_md, c_md), attr, engine());
  const dnnl::matmul mm(pd);
  dnnl::stream s(engine());
  dnnl::memory a(a_md, engine(), const_cast<uint16_t*>(A)), b(b_md, engine(), const_cast<uint16_t*>(B)),
      c(c_md, engine(), C);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, engine(), const_cast<float*>(bias)));
  mm.execute(s, args);
  s.wait();
}

}  // namespace lmforge::kernels::cpu
