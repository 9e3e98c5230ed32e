// defines: gemm_bf16_onednn() — row-major bf16 matrix products with fp32 accumulation through oneDNN's matmul
//          (gemm_bf16()'s native path, gemm/gemm_bf16_widen.cpp)
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <string>
#include <unordered_map>

#include "kernels/cpu/cpu_common.h"
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

// oneDNN's scratchpad (its packed copies of the operands, tens of MB for the LM head) in one buffer reused across
// calls. oneDNN's own default allocates it per execution here, and every fresh allocation of that size is new
// pages: the profile of a bf16 training step showed ~40 % of its CPU time in page faults and the memset that
// first touches them. One buffer per calling thread (GEMMs are issued from outside parallel regions, so in
// practice one), grown to the largest scratchpad asked for.
void* scratchpad(size_t bytes) {
  thread_local GrowingBuffer buffer;
  try {
    return buffer.get(bytes);
  } catch (const std::bad_alloc&) {
    throw Error("gemm_bf16: cannot allocate a " + std::to_string(bytes) + "-byte scratchpad");
  }
}

}  // namespace

void gemm_bf16_onednn(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t* A, int lda,
                      const uint16_t* B, int ldb, bool accumulate, void* C, DType c_dtype, int ldc, const float* bias) {
  using dt = dnnl::memory::data_type;
  // Transposed operands go to oneDNN as strided memory descriptors (no copy): its brgemm matmul packs them itself.
  // Measured here (oneDNN 2.6.3, AVX512-BF16, one thread, CPU time): the LM head's weight gradient
  // [50304,1024]·[1024,256] with a column-major A 119 ms against 85 ms row-major, and [768,1024]ᵀ·[1024,3072]
  // 15.4 ms against 14.5 ms, where first copying the transposed operand row-major costs a memory-bound pass over it
  // (100 MB of bf16 dlogits for that head).
  const dnnl::memory::desc a_md = matrix(M, K, dt::bf16, lda, trans_a);
  const dnnl::memory::desc b_md = matrix(K, N, dt::bf16, ldb, trans_b);
  const dnnl::memory::desc c_md = matrix(M, N, dnnl_type(c_dtype), ldc, false);
  const dnnl::memory::desc bias_md =
      bias ? dnnl::memory::desc({1, N}, dt::f32, dnnl::memory::dims{N, 1}) : dnnl::memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {  // C = A·B (+ bias) + 1·C
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, bias_md, c_md), attr, engine());
  } catch (const dnnl::error& e) {  // oneDNN 2.6 has bf16 matmuls only on CPUs with AVX-512
    throw Error(std::string("gemm_bf16: oneDNN has no bf16 matmul for this CPU (") + e.what() +
                "); LMFORGE_CPU_BF16_GEMM=widen runs bf16 products as fp32 products of the widened operands");
  }
  const dnnl::matmul mm(pd);
  dnnl::stream s(engine());
  dnnl::memory a(a_md, engine(), const_cast<uint16_t*>(A)), b(b_md, engine(), const_cast<uint16_t*>(B)),
      c(c_md, engine(), C);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  const dnnl::memory::desc pad_md = pd.scratchpad_desc();
  if (pad_md.get_size() > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(pad_md, engine(), scratchpad(pad_md.get_size())));
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, engine(), const_cast<float*>(bias)));
  mm.execute(s, args);
  s.wait();
}

}  // namespace lmforge::kernels::cpu
