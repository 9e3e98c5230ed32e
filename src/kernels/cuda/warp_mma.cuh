// defines: the warp-level tensor-core primitives of the attention kernels (attention_mma.cuh): ldmatrix_x4() and
//          ldmatrix_x4_trans() (four 8×8 16-bit tiles from shared memory into registers), mma_16816() (D += A·B on
//          a 16×16 A, a 16×8 B, fp32 accumulators), cp_async_16() / cp_async_commit() / cp_async_wait_all()
//          (16-byte global → shared copies that run behind the arithmetic, zero-filling where told), pack2()
//          (two floats rounded into one 32-bit register of two 16-bit values), to_f32(), shfl_xor(), fast_exp2(), and
//          LMFORGE_SMEM /
//          LMFORGE_UNROLL. sm_80 and later (the backend refuses older GPUs).
//
// Where LMFORGE_WARP_EMULATION is defined (tests/kernels/warp_emulator.h, included first), this header defines
// nothing: the emulator gives the same names with each lane as a CPU thread, so the CPU tests run the kernels' own
// source against a double-precision reference.
//
// Register layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16", .bf16/.f16), lane = 4·g + c (g = lane / 4,
// c = lane % 4), each 32-bit register two 16-bit values, the lower column (or row) in the low half:
//   A (16×16, row-major): a0 = A[g][2c, 2c+1], a1 = A[g+8][2c, 2c+1], a2 = A[g][2c+8, 2c+9], a3 = A[g+8][2c+8, 2c+9]
//   B (16×8, "col"):      b0 = B[2c, 2c+1][g], b1 = B[2c+8, 2c+9][g]
//   C/D (16×8, fp32):     d0, d1 = D[g][2c, 2c+1];  d2, d3 = D[g+8][2c, 2c+1]
// ldmatrix .x4: lanes 8i..8i+7 give the row addresses of tile i; register i of lane l holds tile i's row l/4,
// elements 2(l%4) and 2(l%4)+1 (.trans: column l/4, rows 2(l%4) and 2(l%4)+1).
#pragma once
#include <cstdint>

#ifndef LMFORGE_WARP_EMULATION
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define LMFORGE_UNROLL _Pragma("unroll")
// The kernel's dynamic shared memory, as bytes.
#define LMFORGE_SMEM(name) extern __shared__ __align__(128) unsigned char name[]

namespace lmforge::kernels::cuda {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}

// d += A·B, fp32 accumulate, the operands' 16-bit type T.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// lo in the low 16 bits, hi in the high, each rounded to nearest even.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

// 16 bytes from global src to shared dst (both 16-byte aligned), or 16 zero bytes when !full (src is not read).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(full ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Every copy this thread issued has landed (visible to the other threads after the next barrier).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }

// 2^x by the special-function unit (relative error about 2⁻²², subnormal results kept; 2^−inf = +0): one
// instruction where exp2f() without --use_fast_math adds range handling, on the attention kernels' every score.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace lmforge::kernels::cuda
#endif  // LMFORGE_WARP_EMULATION
