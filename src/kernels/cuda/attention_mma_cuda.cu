// defines: mma_forward() and mma_backward(), the launches of the tensor-core attention kernels (attention_mma.cuh)
//          for bf16 and f16 operands of head size 32, 64 or 128 with 16-byte aligned rows; attention_cuda.cu tries them
//          first (LMFORGE_CUDA_ATTENTION=flash or rows skips them), and the WMMA flash kernels and the row kernels
//          serve the rest.
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"

namespace lmforge::kernels::cuda {
namespace {

using mma_attention::kRows;
using mma_attention::kWarps;
using mma_attention::Operand;

template <class T>
Operand<T> operand(const Tensor& t) {
  return Operand<T>{static_cast<const T*>(t.data), t.stride()};
}

// cp.async moves 16-byte pieces: the rows must start on 16-byte boundaries.
bool rows_aligned(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.stride() * (int64_t)dtype_size(t.dtype) % 16 == 0;
}

unsigned tiles(int64_t n) { return (unsigned)((n + kRows - 1) / kRows); }

template <class T, int HS>
bool forward_as(const AttentionArgs& a, const Tensor& out, float* lse) {
  auto kernel = mma_attention::mma_forward_kernel<T, HS, DView>;
  const int bytes = mma_attention::forward_smem<HS>(sizeof(T));
  if (!fits(kernel, bytes)) return false;
  const Geometry g = geometry(a);
  if (g.Tq > 0)
    kernel<<<dim3(tiles(g.Tq), (unsigned)g.H, (unsigned)g.B), kWarps * 32, bytes, cuda_context().stream>>>(
        view_of(out), lse, operand<T>(a.q), operand<T>(a.k), operand<T>(a.v), g);
  check_launch("attention_forward (tensor cores)");
  return true;
}

template <class T, int HS>
bool backward_as(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                 const Tensor& out, const float* lse) {
  auto dq_kernel = mma_attention::mma_dq_kernel<T, HS, DView>;
  auto dkv_kernel = mma_attention::mma_dkv_kernel<T, HS, DView>;
  const int dq_bytes = mma_attention::dq_smem<HS>(sizeof(T)), dkv_bytes = mma_attention::dkv_smem<HS>(sizeof(T));
  if (!fits(dq_kernel, dq_bytes) || !fits(dkv_kernel, dkv_bytes)) return false;
  const Geometry g = geometry(a);
  cudaStream_t s = cuda_context().stream;
  Scratch d((size_t)(g.B * g.H * g.Tq) * sizeof(float));
  float* D = static_cast<float*>(d.get());
  // The dq kernel forms D = dout·out itself from an output of the operands' type with cp.async-able rows (the
  // forward's own); any other output goes through the row-dot kernel first.
  const bool dots_in_dq = out.dtype == a.q.dtype && rows_aligned(out);
  if (!dots_in_dq) attention_row_dots(D, dout, out, g);
  const Operand<T> q = operand<T>(a.q), k = operand<T>(a.k), v = operand<T>(a.v), o = operand<T>(dout);
  const Operand<T> staged_out = dots_in_dq ? operand<T>(out) : Operand<T>{nullptr, 0};
  if (g.Tq > 0) {
    dq_kernel<<<dim3(tiles(g.Tq), (unsigned)g.H, (unsigned)g.B), kWarps * 32, dq_bytes, s>>>(view_of(dq), lse, D,
                                                                                            staged_out, q, k, v, o, g);
    check_launch("attention_backward (tensor cores, dq)");
  }
  if (g.Tk > 0) {
    dkv_kernel<<<dim3(tiles(g.Tk), (unsigned)g.H, (unsigned)g.B), kWarps * 32, dkv_bytes, s>>>(
        view_of(dk), view_of(dv), lse, D, q, k, v, o, g);
    check_launch("attention_backward (tensor cores, dk dv)");
  }
  return true;
}

// The operands' 16-bit dtype where all of them have it and their rows suit cp.async; F32 (no tensor-core path)
// otherwise.
DType staged_dtype(std::initializer_list<const Tensor*> staged) {
  const DType d = (*staged.begin())->dtype;
  if (d != DType::BF16 && d != DType::F16) return DType::F32;
  for (const Tensor* t : staged)
    if (t->dtype != d || !rows_aligned(*t)) return DType::F32;
  return d;
}

// f(T{}) for the tile dtype's CUDA type; false for F32 (no tensor-core path).
template <class F>
bool with_tile_type(DType d, F&& f) {
  switch (d) {
    case DType::BF16: return f(__nv_bfloat16{});
    case DType::F16: return f(__half{});
    default: return false;
  }
}

}  // namespace

bool mma_forward(const AttentionArgs& a, const Tensor& out, float* lse) {
  return with_tile_type(staged_dtype({&a.q, &a.k, &a.v}), [&](auto t) {
    return with_head_size(a.q.dim(2) / a.heads,
                          [&](auto hs) { return forward_as<decltype(t), decltype(hs)::value>(a, out, lse); });
  });
}

bool mma_backward(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                  const Tensor& out, const float* lse) {
  return with_tile_type(staged_dtype({&a.q, &a.k, &a.v, &dout}), [&](auto t) {
    return with_head_size(a.q.dim(2) / a.heads, [&](auto hs) {
      return backward_as<decltype(t), decltype(hs)::value>(a, dq, dk, dv, dout, out, lse);
    });
  });
}

}  // namespace lmforge::kernels::cuda
