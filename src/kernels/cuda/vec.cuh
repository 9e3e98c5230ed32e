// defines: the typed fast paths' device helpers: to_f()/from_f() (one element of float, bf16 or f16 to and from
//          fp32, round to nearest even), load8()/store8() (8 consecutive elements through 16-byte accesses: one for
//          bf16/f16, two for f32), load2(), vec_grid(); and on the host flat_vec_ok(), vec_rows_ok(),
//          pair_rows_ok() (the operands a fast path needs) and with_dtype() (calls a generic lambda with a value of
//          the dtype's element type)
//
// Why: a kernel reading through DView branches on the dtype and loads 2 or 4 bytes per instruction; on GPT-2's
// activations (bf16 rows of 768-50304 elements) that runs at a third of the memory bandwidth. The typed kernels
// load 16 bytes per instruction with the dtype fixed at compile time, and do the same fp32 arithmetic per element as
// the DView kernels, which stay for strided and mixed-dtype operands.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "kernels/tensor.h"

namespace lmforge::kernels::cuda {

constexpr int kVec = 8;  // elements per vector access

template <class T>
__device__ __forceinline__ float to_f(T x);
template <>
__device__ __forceinline__ float to_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ __forceinline__ float to_f<__half>(__half x) {
  return __half2float(x);
}

template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}

// p[0..8) to fp32; p 16-byte aligned.
template <class T>
__device__ __forceinline__ void load8(const T* p, float (&v)[kVec]) {
  constexpr int kPerAccess = 16 / sizeof(T);
#pragma unroll
  for (int a = 0; a < kVec / kPerAccess; a++) {
    const int4 raw = reinterpret_cast<const int4*>(p)[a];
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerAccess; j++) v[a * kPerAccess + j] = to_f<T>(e[j]);
  }
}

// p[0..8) = v rounded to T; p 16-byte aligned.
template <class T>
__device__ __forceinline__ void store8(T* p, const float (&v)[kVec]) {
  constexpr int kPerAccess = 16 / sizeof(T);
#pragma unroll
  for (int a = 0; a < kVec / kPerAccess; a++) {
    int4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerAccess; j++) e[j] = from_f<T>(v[a * kPerAccess + j]);
    reinterpret_cast<int4*>(p)[a] = raw;
  }
}

// p[0], p[1] to fp32 in one 4-byte (bf16/f16) or 8-byte (f32) access; p aligned to two elements.
template <class T>
__device__ __forceinline__ void load2(const T* p, float (&v)[2]) {
  if constexpr (sizeof(T) == 4) {
    const float2 f = *reinterpret_cast<const float2*>(p);
    v[0] = f.x, v[1] = f.y;
  } else {
    const uint32_t u = *reinterpret_cast<const uint32_t*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
    v[0] = to_f<T>(e[0]), v[1] = to_f<T>(e[1]);
  }
}

// Rows of t readable by load2 at even columns: a float type, data aligned to two elements, an even row stride.
inline bool pair_rows_ok(const Tensor& t) {
  return (t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16) &&
         reinterpret_cast<uintptr_t>(t.data) % (2 * dtype_size(t.dtype)) == 0 && t.stride() % 2 == 0;
}

// Rows of t readable by load8 at columns that are multiples of 8: a float type, data and row stride multiples of
// 16 bytes.
inline bool vec_rows_ok(const Tensor& t) {
  return (t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16) &&
         reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && ((size_t)t.stride() * dtype_size(t.dtype)) % 16 == 0;
}

// Blocks of `threads` for a grid-stride loop over `items`: one item per thread up to 32 blocks per SM (H100: 4224
// blocks of 256), beyond that the loop.
inline unsigned vec_grid(int64_t items, int threads, int sm_count) {
  const int64_t want = (items + threads - 1) / threads, cap = (int64_t)(sm_count > 0 ? sm_count : 132) * 32;
  return (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
}

// The flat fast path's conditions: every present operand of dtype d, contiguous, its data 16-byte aligned.
inline bool flat_vec_ok(DType d, std::initializer_list<const Tensor*> ts) {
  if (d != DType::F32 && d != DType::BF16 && d != DType::F16) return false;
  for (const Tensor* t : ts)
    if (t->present() && (t->dtype != d || !t->contiguous() || reinterpret_cast<uintptr_t>(t->data) % 16 != 0))
      return false;
  return true;
}

// f(T{}) with T the element type of d (float, __nv_bfloat16 or __half).
template <class F>
void with_dtype(DType d, F&& f) {
  if (d == DType::BF16) f(__nv_bfloat16{});
  else if (d == DType::F16) f(__half{});
  else f(float{});
}

}  // namespace lmforge::kernels::cuda
