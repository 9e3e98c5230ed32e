// defines: the flash attention kernels of the CUDA backend (FlashAttention-2: Dao, 2023): flash_forward() (online
//          softmax over key tiles, fp32 statistics and output accumulators, the row log-sum-exp saved) and
//          flash_backward() (D_t = dout_t·out_t, then dk/dv per key tile over query tiles and dq per query tile over
//          key tiles, p = exp(s − lse) recomputed; no atomics, so runs are bit-identical). Head sizes 32, 64 and 128;
//          attention_cuda.cu's row kernels serve the others and LMFORGE_CUDA_ATTENTION=rows.
//
// Math (ops.h): s_tj = q_t·k_j/√hs over the allowed keys (causal j <= t, key padding), p = softmax_j s,
// out_t = Σ_j drop(p_tj)·v_j, lse_t = m_t + log l_t (+inf for a row without allowed keys, so exp(s − lse) = 0).
// Forward per query row, key tile by key tile: m' = max(m, max_j s_j); α = exp(m − m'); l' = α·l + Σ_j exp(s_j − m');
// O' = α·O + Σ_j drop(exp(s_j − m'))·v_j; at the end out = O/l. Dropout scales p after the statistics (lse holds
// the undropped softmax), with the CPU's Philox keep decision of element ((b·total_heads + head_offset + h)·Tq + t)·Tk
// + j, regenerated in the backward. Backward: dS_tj = p_tj·(drop_tj·dP_tj − D_t), dP_tj = dout_t·v_j,
// dV_j += Σ_t drop(p_tj)·dout_t, dK_j += Σ_t dS_tj·q_t/√hs, dQ_t += Σ_j dS_tj·k_j/√hs.
//
// Tiles: a CTA of W warps owns 16·W rows (queries in the forward and dq kernels, keys in the dk/dv kernel); each
// warp owns 16 of them and runs its own online softmax, so a CTA synchronises only around loading a tile. The other
// side runs in tiles of NT = 64 keys (forward, dq) or NT = 32 queries (dk/dv: less shared memory, two CTAs per H100
// SM). Operand tiles are staged in shared memory in the tensor-core dtype T (bf16/f16 when q, k, v (and dout) all
// are; fp32 otherwise), zero-filled past the sequence ends (no NaN from stale memory meets a zero probability).
// Products: bf16/f16 on tensor cores (nvcuda::wmma 16×16×16, fp32 accumulate; sm_80 and later); fp32 by fp32 FMAs
// (no TF32: fp32 stays within the op cases' 2e-5 of the CPU). Scores, statistics and accumulators are fp32 in shared
// memory (a warp's 16×NT scores, its 16×hs output or gradient accumulator); probabilities and dS enter the second
// product rounded to T, as in FlashAttention. Causal masking skips whole tiles above the diagonal.
// W = 4 (fp32 with hs = 128: W = 2). Shared memory per CTA in bytes (the layouts below; 16-bit T | fp32 T):
//   hs    forward            dq                  dk/dv
//   32     51456 |  68864     74240 |  94976      57600 |  70912
//   64     71936 | 101632     98816 | 135936      86272 | 111872
//   128   112896 | 116608    147968 | 141952     143616 | 113536
// All fit an A100's 163 KiB opt-in and an H100's 227 KiB (bf16 hs 64 on an H100: 3 forward, 2 dq, 2 dk/dv CTAs per
// SM); a device with less opt-in shared memory (cudaDevAttrMaxSharedMemoryPerBlockOptin) gets false and the row
// kernels. Registers (ptxas -v, CUDA 13.0, sm_90a; no spill anywhere; bf16 kernels keep a 16-byte stack frame):
//   forward  bf16 95-96, f16 92-96, f32 96 (hs 32, 64) / 128 (hs 128)
//   dq       bf16 40-56, f16 48-64, f32 56-95;   dk/dv  bf16 40, f16 44-56, f32 48-95;   row dots 32
// Timings exist only from a GPU run (bench/RESULTS.md).
//
// Cost for GPT-2 124M training (B = 16, T = 1024, 12 layers of 12 heads of 64, causal, bf16): one product of a
// layer is B·H·T²·hs·2 FLOP = 25.8 GFLOP, halved by causality; the forward runs 2 (S, P·V) = 25.8 GFLOP, the
// backward 7 (S and dP recomputed in both the dq and the dk/dv kernel, dQ, dK, dV) = 90 GFLOP: 1.39 TFLOP per step
// (FlashAttention-2's single backward does 5 products: 1.08). At 200-300 TFLOP/s (WMMA with the accumulators
// round-tripping through shared memory; cuDNN/FA2 reach ~400-500 on an H100) that is 4.6-7 ms of a ~35-40 ms
// step (12 TFLOP of GEMMs at ~350 TFLOP/s), against ~2.5 ms for PyTorch's SDPA; the probabilities PyTorch's eager
// non-flash path would keep (f32 [B,H,T,T]: 805 MB per layer) are never stored. With attention dropout each kept
// or dropped entry costs a Philox4x32-10 call in the forward and in both backward kernels (~0.2 ms per layer).
#include <mma.h>

#include <string>

#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"

namespace lmforge::kernels::cuda {
namespace {

// ---- element types ---------------------------------------------------------------------------------------------
template <class T>
struct Elem;
template <>
struct Elem<float> {
  static constexpr int pad = 1;  // row padding (elements): rows land on distinct banks
  static __device__ __forceinline__ float from(float x) { return x; }
  static __device__ __forceinline__ float to_f(float x) { return x; }
};
template <>
struct Elem<__nv_bfloat16> {
  static constexpr int pad = 8;  // 16 bytes: wmma wants 32-byte-aligned fragments and ldm a multiple of 8
  static __device__ __forceinline__ __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
};
template <>
struct Elem<__half> {
  static constexpr int pad = 8;
  static __device__ __forceinline__ __half from(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
};

// Tensor cores for 16-bit operands on sm_80 and later (bf16 wmma needs sm_80); fp32 FMAs otherwise.
template <class T>
__device__ constexpr bool use_tensor_cores() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return sizeof(T) == 2;
#else
  return false;
#endif
}

constexpr size_t align128(size_t n) { return (n + 127) / 128 * 128; }

// ---- warp products on shared memory ------------------------------------------------------------------------------
// C[16][NT] = A[16][HS]·B[NT][HS]ᵀ (A, B row-major with leading dimensions lda, ldb; C f32, ldc).
template <class T, int HS, int NT>
__device__ __forceinline__ void warp_abt(float* C, int ldc, const T* A, int lda, const T* B, int ldb) {
  if constexpr (use_tensor_cores<T>()) {
    using namespace nvcuda;
#pragma unroll
    for (int n = 0; n < NT / 16; n++) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < HS; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;  // Bᵀ: column n of Bᵀ is row n of B
        wmma::load_matrix_sync(a, A + kk, (unsigned)lda);
        wmma::load_matrix_sync(b, B + n * 16 * ldb + kk, (unsigned)ldb);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(C + n * 16, acc, (unsigned)ldc, wmma::mem_row_major);
    }
  } else {
    constexpr int U = NT / 32;  // columns per lane
    const int lane = threadIdx.x % 32;
    float acc[16][U];
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
      for (int u = 0; u < U; u++) acc[r][u] = 0.0f;
    for (int c = 0; c < HS; c++) {
      float b[U];
#pragma unroll
      for (int u = 0; u < U; u++) b[u] = Elem<T>::to_f(B[(lane + 32 * u) * ldb + c]);
#pragma unroll
      for (int r = 0; r < 16; r++) {
        const float a = Elem<T>::to_f(A[r * lda + c]);
#pragma unroll
        for (int u = 0; u < U; u++) acc[r][u] = fmaf(a, b[u], acc[r][u]);
      }
    }
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
      for (int u = 0; u < U; u++) C[r * ldc + lane + 32 * u] = acc[r][u];
  }
}

// C[16][HS] += A[16][NT]·B[NT][HS] (A, B row-major; C f32).
template <class T, int HS, int NT>
__device__ __forceinline__ void warp_ab_acc(float* C, int ldc, const T* A, int lda, const T* B, int ldb) {
  if constexpr (use_tensor_cores<T>()) {
    using namespace nvcuda;
#pragma unroll
    for (int n = 0; n < HS / 16; n++) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, C + n * 16, (unsigned)ldc, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < NT; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, A + kk, (unsigned)lda);
        wmma::load_matrix_sync(b, B + kk * ldb + n * 16, (unsigned)ldb);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(C + n * 16, acc, (unsigned)ldc, wmma::mem_row_major);
    }
  } else {
    constexpr int U = HS / 32;
    const int lane = threadIdx.x % 32;
    float acc[16][U];
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
      for (int u = 0; u < U; u++) acc[r][u] = C[r * ldc + lane + 32 * u];
    for (int j = 0; j < NT; j++) {
      float b[U];
#pragma unroll
      for (int u = 0; u < U; u++) b[u] = Elem<T>::to_f(B[j * ldb + lane + 32 * u]);
#pragma unroll
      for (int r = 0; r < 16; r++) {
        const float a = Elem<T>::to_f(A[r * lda + j]);
#pragma unroll
        for (int u = 0; u < U; u++) acc[r][u] = fmaf(a, b[u], acc[r][u]);
      }
    }
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
      for (int u = 0; u < U; u++) C[r * ldc + lane + 32 * u] = acc[r][u];
  }
}

// Rows [row0, row0 + rows) of head columns [col0, col0 + HS) of src into dst[rows][ld] (as T), zeros past `valid`.
template <class T, int HS>
__device__ __forceinline__ void load_tile(T* dst, int ld, const DView& src, int64_t row0, int rows, int valid,
                                          int64_t col0) {
  for (int i = threadIdx.x; i < rows * HS; i += blockDim.x) {
    const int r = i / HS, c = i % HS;
    dst[r * ld + c] = Elem<T>::from(r < valid ? src.ld(row0 + r, col0 + c) : 0.0f);
  }
}

// Zeroes n floats.
__device__ __forceinline__ void zero_f32(float* p, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = 0.0f;
}

template <class T, int HS>
struct Shape {
  static constexpr int W = (sizeof(T) == 4 && HS == 128) ? 2 : 4;  // warps per CTA
  static constexpr int R = 16 * W;                                  // rows a CTA owns
  static constexpr int LDT = HS + Elem<T>::pad;                     // an operand tile's row (T)
  static constexpr int LDO = HS + 4;                                // an f32 accumulator's row
};

// ---- forward -----------------------------------------------------------------------------------------------------
template <class T, int HS>
struct ForwardLayout {
  using S = Shape<T, HS>;
  static constexpr int NT = 64, LDS = NT + 4, LDP = NT + Elem<T>::pad;
  static constexpr size_t q = 0, k = align128(q + sizeof(T) * S::R * S::LDT),
                          v = align128(k + sizeof(T) * NT * S::LDT), s = align128(v + sizeof(T) * NT * S::LDT),
                          p = align128(s + 4 * S::R * LDS), o = align128(p + sizeof(T) * S::R * LDP),
                          alpha = align128(o + 4 * S::R * S::LDO), bytes = align128(alpha + 4 * S::R);
};

// One CTA per (query tile, head, batch).
template <class T, int HS>
__global__ void __launch_bounds__(Shape<T, HS>::W * 32)
    flash_forward_kernel(DView out, float* lse, DView q, DView k, DView v, Geometry g) {
  using S = Shape<T, HS>;
  using L = ForwardLayout<T, HS>;
  constexpr int NT = L::NT;
  extern __shared__ __align__(128) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem + L::q);
  T* ks = reinterpret_cast<T*>(smem + L::k);
  T* vs = reinterpret_cast<T*>(smem + L::v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sw = reinterpret_cast<float*>(smem + L::s) + warp * 16 * L::LDS;
  T* pw = reinterpret_cast<T*>(smem + L::p) + warp * 16 * L::LDP;
  float* ow = reinterpret_cast<float*>(smem + L::o) + warp * 16 * S::LDO;
  float* aw = reinterpret_cast<float*>(smem + L::alpha) + warp * 16;
  const int64_t q0 = (int64_t)blockIdx.x * S::R, h = blockIdx.y, b = blockIdx.z;
  const int qvalid = (int)min((int64_t)S::R, g.Tq - q0);
  load_tile<T, HS>(qs, S::LDT, q, b * g.Tq + q0, S::R, qvalid, h * HS);
  zero_f32(reinterpret_cast<float*>(smem + L::o), S::R * S::LDO);
  float m[16], l[16];
#pragma unroll
  for (int r = 0; r < 16; r++) m[r] = -INFINITY, l[r] = 0.0f;
  const int64_t tw = q0 + warp * 16;  // the warp's first query
  // Causal: keys after the tile's last query are never allowed (Tq == Tk).
  const int64_t kend = g.causal ? min(g.Tk, q0 + S::R) : g.Tk;
  for (int64_t k0 = 0; k0 < kend; k0 += NT) {
    __syncthreads();  // the previous tile's k, v are read
    const int kvalid = (int)min((int64_t)NT, g.Tk - k0);
    load_tile<T, HS>(ks, S::LDT, k, b * g.Tk + k0, NT, kvalid, h * HS);
    load_tile<T, HS>(vs, S::LDT, v, b * g.Tk + k0, NT, kvalid, h * HS);
    __syncthreads();
    if (tw >= g.Tq || (g.causal && k0 > tw + 15)) continue;  // the warp's rows: none, or no key of this tile
    warp_abt<T, HS, NT>(sw, L::LDS, qs + warp * 16 * S::LDT, S::LDT, ks, S::LDT);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; r++) {
      const int64_t t = tw + r;
      float s[NT / 32];
      float mt = -INFINITY;
#pragma unroll
      for (int u = 0; u < NT / 32; u++) {
        const int64_t j = k0 + lane + 32 * u;
        const bool ok = t < g.Tq && j < g.Tk && g.allowed(b, t, j);
        s[u] = ok ? sw[r * L::LDS + lane + 32 * u] * g.scale : -INFINITY;
        mt = fmaxf(mt, s[u]);
      }
      mt = warp_max(mt);
      const float mn = fmaxf(m[r], mt);
      const float alpha = m[r] == -INFINITY ? 1.0f : expf(m[r] - mn);  // O and l are 0 while m is -inf
      float sum = 0.0f;
#pragma unroll
      for (int u = 0; u < NT / 32; u++) {
        const int64_t j = k0 + lane + 32 * u;
        const float pj = s[u] == -INFINITY ? 0.0f : expf(s[u] - mn);
        sum += pj;
        pw[r * L::LDP + lane + 32 * u] = Elem<T>::from(pj == 0.0f ? 0.0f : pj * g.factor(b, h, t, j));
      }
      sum = warp_sum(sum);
      l[r] = l[r] * alpha + sum;
      m[r] = mn;
      if (lane == 0) aw[r] = alpha;
    }
    __syncwarp();
    for (int i = lane; i < 16 * HS; i += 32) ow[(i / HS) * S::LDO + i % HS] *= aw[i / HS];
    __syncwarp();
    warp_ab_acc<T, HS, NT>(ow, S::LDO, pw, L::LDP, vs, S::LDT);
    __syncwarp();
  }
  __syncthreads();  // with no key tile at all, the zeroed accumulators are another thread's writes
#pragma unroll
  for (int r = 0; r < 16; r++) {
    const int64_t t = tw + r;
    if (t < g.Tq) {
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      if (lane == 0) lse[(b * g.H + h) * g.Tq + t] = l[r] > 0.0f ? m[r] + logf(l[r]) : INFINITY;
      for (int c = lane; c < HS; c += 32) out.st(b * g.Tq + t, h * HS + c, ow[r * S::LDO + c] * inv);
    }
  }
}

// ---- backward ----------------------------------------------------------------------------------------------------
// D[(b·H + h)·Tq + t] = Σ_c dout[b,t,h·hs + c]·out[b,t,h·hs + c]: one warp per row (fixed lane order and tree).
__global__ void flash_rowdot_kernel(float* D, DView dout, DView out, Geometry g) {
  const int64_t rows = g.B * g.H * g.Tq;
  const int lane = threadIdx.x % 32;
  for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < rows;
       w += (int64_t)gridDim.x * blockDim.x / 32) {
    const int64_t t = w % g.Tq, h = w / g.Tq % g.H, b = w / (g.Tq * g.H);
    float s = 0.0f;
    for (int64_t c = lane; c < g.hs; c += 32) s += dout.ld(b * g.Tq + t, h * g.hs + c) * out.ld(b * g.Tq + t, h * g.hs + c);
    s = warp_sum(s);
    if (lane == 0) D[w] = s;
  }
}

// p_tj (undropped) from a score, and dS_tj = p·(drop·dP − D_t); masked and out-of-range entries give 0.
struct Grad {
  float p, pd, ds;  // p, drop(p), dS
};
__device__ __forceinline__ Grad grad_at(const Geometry& g, int64_t b, int64_t h, int64_t t, int64_t j, float s,
                                        float dp, float lse_t, float d_t) {
  if (t >= g.Tq || j >= g.Tk || !g.allowed(b, t, j)) return Grad{0.0f, 0.0f, 0.0f};
  const float p = expf(s * g.scale - lse_t);  // lse = +inf (no allowed key) gives 0
  const float f = p == 0.0f ? 1.0f : g.factor(b, h, t, j);
  return Grad{p, p * f, p * (f * dp - d_t)};
}

template <class T, int HS>
struct DqLayout {
  using S = Shape<T, HS>;
  static constexpr int NT = 64, LDS = NT + 4, LDP = NT + Elem<T>::pad;
  static constexpr size_t q = 0, dout = align128(q + sizeof(T) * S::R * S::LDT),
                          k = align128(dout + sizeof(T) * S::R * S::LDT), v = align128(k + sizeof(T) * NT * S::LDT),
                          s = align128(v + sizeof(T) * NT * S::LDT), dp = align128(s + 4 * S::R * LDS),
                          p = align128(dp + 4 * S::R * LDS), dq = align128(p + sizeof(T) * S::R * LDP),
                          stats = align128(dq + 4 * S::R * S::LDO), bytes = align128(stats + 2 * 4 * S::R);
};

// dq_t += Σ_j dS_tj·k_j/√hs: one CTA per (query tile, head, batch), over the key tiles.
template <class T, int HS>
__global__ void __launch_bounds__(Shape<T, HS>::W * 32)
    flash_dq_kernel(DView dq, const float* lse, const float* D, DView q, DView k, DView v, DView dout, Geometry g) {
  using S = Shape<T, HS>;
  using L = DqLayout<T, HS>;
  constexpr int NT = L::NT;
  extern __shared__ __align__(128) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem + L::q);
  T* dos = reinterpret_cast<T*>(smem + L::dout);
  T* ks = reinterpret_cast<T*>(smem + L::k);
  T* vs = reinterpret_cast<T*>(smem + L::v);
  float* lse_s = reinterpret_cast<float*>(smem + L::stats);
  float* d_s = lse_s + S::R;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sw = reinterpret_cast<float*>(smem + L::s) + warp * 16 * L::LDS;
  float* dpw = reinterpret_cast<float*>(smem + L::dp) + warp * 16 * L::LDS;
  T* pw = reinterpret_cast<T*>(smem + L::p) + warp * 16 * L::LDP;
  float* dqw = reinterpret_cast<float*>(smem + L::dq) + warp * 16 * S::LDO;
  const int64_t q0 = (int64_t)blockIdx.x * S::R, h = blockIdx.y, b = blockIdx.z;
  const int qvalid = (int)min((int64_t)S::R, g.Tq - q0);
  load_tile<T, HS>(qs, S::LDT, q, b * g.Tq + q0, S::R, qvalid, h * HS);
  load_tile<T, HS>(dos, S::LDT, dout, b * g.Tq + q0, S::R, qvalid, h * HS);
  for (int i = threadIdx.x; i < S::R; i += blockDim.x) {
    lse_s[i] = i < qvalid ? lse[(b * g.H + h) * g.Tq + q0 + i] : INFINITY;
    d_s[i] = i < qvalid ? D[(b * g.H + h) * g.Tq + q0 + i] : 0.0f;
  }
  zero_f32(reinterpret_cast<float*>(smem + L::dq), S::R * S::LDO);
  const int64_t tw = q0 + warp * 16;
  const int64_t kend = g.causal ? min(g.Tk, q0 + S::R) : g.Tk;
  for (int64_t k0 = 0; k0 < kend; k0 += NT) {
    __syncthreads();
    const int kvalid = (int)min((int64_t)NT, g.Tk - k0);
    load_tile<T, HS>(ks, S::LDT, k, b * g.Tk + k0, NT, kvalid, h * HS);
    load_tile<T, HS>(vs, S::LDT, v, b * g.Tk + k0, NT, kvalid, h * HS);
    __syncthreads();
    if (tw >= g.Tq || (g.causal && k0 > tw + 15)) continue;
    warp_abt<T, HS, NT>(sw, L::LDS, qs + warp * 16 * S::LDT, S::LDT, ks, S::LDT);
    warp_abt<T, HS, NT>(dpw, L::LDS, dos + warp * 16 * S::LDT, S::LDT, vs, S::LDT);
    __syncwarp();
    for (int r = 0; r < 16; r++) {
      const int64_t t = tw + r;
      for (int c = lane; c < NT; c += 32) {
        const Grad gr = grad_at(g, b, h, t, k0 + c, sw[r * L::LDS + c], dpw[r * L::LDS + c], lse_s[warp * 16 + r],
                                d_s[warp * 16 + r]);
        pw[r * L::LDP + c] = Elem<T>::from(gr.ds);
      }
    }
    __syncwarp();
    warp_ab_acc<T, HS, NT>(dqw, S::LDO, pw, L::LDP, ks, S::LDT);
    __syncwarp();
  }
  __syncthreads();
  for (int r = 0; r < 16; r++) {
    const int64_t t = tw + r;
    if (t >= g.Tq) break;
    for (int c = lane; c < HS; c += 32) {
      const int64_t row = b * g.Tq + t, col = h * HS + c;
      dq.st(row, col, dq.ld(row, col) + dqw[r * S::LDO + c] * g.scale);
    }
  }
}

template <class T, int HS>
struct DkvLayout {
  using S = Shape<T, HS>;
  static constexpr int NT = 32, LDS = NT + 4, LDP = NT + Elem<T>::pad;
  static constexpr size_t k = 0, v = align128(k + sizeof(T) * S::R * S::LDT), q = align128(v + sizeof(T) * S::R * S::LDT),
                          dout = align128(q + sizeof(T) * NT * S::LDT), s = align128(dout + sizeof(T) * NT * S::LDT),
                          dp = align128(s + 4 * S::R * LDS), p = align128(dp + 4 * S::R * LDS),
                          dk = align128(p + sizeof(T) * S::R * LDP), dv = align128(dk + 4 * S::R * S::LDO),
                          stats = align128(dv + 4 * S::R * S::LDO), bytes = align128(stats + 2 * 4 * NT);
};

// dv_j += Σ_t drop(p_tj)·dout_t and dk_j += Σ_t dS_tj·q_t/√hs: one CTA per (key tile, head, batch), over the query
// tiles (causal: from the tile holding its first key). The warp's products run transposed: Sᵀ = K_w·Qᵀ, dPᵀ =
// V_w·doutᵀ.
template <class T, int HS>
__global__ void __launch_bounds__(Shape<T, HS>::W * 32)
    flash_dkv_kernel(DView dk, DView dv, const float* lse, const float* D, DView q, DView k, DView v, DView dout,
                     Geometry g) {
  using S = Shape<T, HS>;
  using L = DkvLayout<T, HS>;
  constexpr int NT = L::NT;
  extern __shared__ __align__(128) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem + L::k);
  T* vs = reinterpret_cast<T*>(smem + L::v);
  T* qs = reinterpret_cast<T*>(smem + L::q);
  T* dos = reinterpret_cast<T*>(smem + L::dout);
  float* lse_s = reinterpret_cast<float*>(smem + L::stats);
  float* d_s = lse_s + NT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sw = reinterpret_cast<float*>(smem + L::s) + warp * 16 * L::LDS;
  float* dpw = reinterpret_cast<float*>(smem + L::dp) + warp * 16 * L::LDS;
  T* pw = reinterpret_cast<T*>(smem + L::p) + warp * 16 * L::LDP;
  float* dkw = reinterpret_cast<float*>(smem + L::dk) + warp * 16 * S::LDO;
  float* dvw = reinterpret_cast<float*>(smem + L::dv) + warp * 16 * S::LDO;
  const int64_t k0 = (int64_t)blockIdx.x * S::R, h = blockIdx.y, b = blockIdx.z;
  const int kvalid = (int)min((int64_t)S::R, g.Tk - k0);
  load_tile<T, HS>(ks, S::LDT, k, b * g.Tk + k0, S::R, kvalid, h * HS);
  load_tile<T, HS>(vs, S::LDT, v, b * g.Tk + k0, S::R, kvalid, h * HS);
  zero_f32(reinterpret_cast<float*>(smem + L::dk), S::R * S::LDO);
  zero_f32(reinterpret_cast<float*>(smem + L::dv), S::R * S::LDO);
  const int64_t jw = k0 + warp * 16;  // the warp's first key
  const int64_t tbegin = g.causal ? k0 / NT * NT : 0;
  for (int64_t t0 = tbegin; t0 < g.Tq; t0 += NT) {
    __syncthreads();
    const int tvalid = (int)min((int64_t)NT, g.Tq - t0);
    load_tile<T, HS>(qs, S::LDT, q, b * g.Tq + t0, NT, tvalid, h * HS);
    load_tile<T, HS>(dos, S::LDT, dout, b * g.Tq + t0, NT, tvalid, h * HS);
    for (int i = threadIdx.x; i < NT; i += blockDim.x) {
      lse_s[i] = i < tvalid ? lse[(b * g.H + h) * g.Tq + t0 + i] : INFINITY;
      d_s[i] = i < tvalid ? D[(b * g.H + h) * g.Tq + t0 + i] : 0.0f;
    }
    __syncthreads();
    if (jw >= g.Tk || (g.causal && t0 + NT - 1 < jw)) continue;  // no key, or no query of this tile sees them
    warp_abt<T, HS, NT>(sw, L::LDS, ks + warp * 16 * S::LDT, S::LDT, qs, S::LDT);
    warp_abt<T, HS, NT>(dpw, L::LDS, vs + warp * 16 * S::LDT, S::LDT, dos, S::LDT);
    __syncwarp();
    for (int r = 0; r < 16; r++) {
      const int64_t j = jw + r;
      for (int c = lane; c < NT; c += 32) {
        const Grad gr = grad_at(g, b, h, t0 + c, j, sw[r * L::LDS + c], dpw[r * L::LDS + c], lse_s[c], d_s[c]);
        pw[r * L::LDP + c] = Elem<T>::from(gr.pd);
        sw[r * L::LDS + c] = gr.ds;  // kept for dk after dv's product has read pw
      }
    }
    __syncwarp();
    warp_ab_acc<T, HS, NT>(dvw, S::LDO, pw, L::LDP, dos, S::LDT);
    __syncwarp();
    for (int i = lane; i < 16 * NT; i += 32) pw[(i / NT) * L::LDP + i % NT] = Elem<T>::from(sw[(i / NT) * L::LDS + i % NT]);
    __syncwarp();
    warp_ab_acc<T, HS, NT>(dkw, S::LDO, pw, L::LDP, qs, S::LDT);
    __syncwarp();
  }
  __syncthreads();
  for (int r = 0; r < 16; r++) {
    const int64_t j = jw + r;
    if (j >= g.Tk) break;
    for (int c = lane; c < HS; c += 32) {
      const int64_t row = b * g.Tk + j, col = h * HS + c;
      dv.st(row, col, dv.ld(row, col) + dvw[r * S::LDO + c]);
      dk.st(row, col, dk.ld(row, col) + dkw[r * S::LDO + c] * g.scale);
    }
  }
}

// ---- launches ----------------------------------------------------------------------------------------------------
template <class T, int HS>
bool forward_as(const AttentionArgs& a, const Tensor& out, float* lse) {
  using S = Shape<T, HS>;
  using L = ForwardLayout<T, HS>;
  if (!fits(flash_forward_kernel<T, HS>, L::bytes)) return false;
  const Geometry g = geometry(a);
  const dim3 grid((unsigned)((g.Tq + S::R - 1) / S::R), (unsigned)g.H, (unsigned)g.B);
  flash_forward_kernel<T, HS><<<grid, S::W * 32, L::bytes, cuda_context().stream>>>(view_of(out), lse, view_of(a.q),
                                                                                    view_of(a.k), view_of(a.v), g);
  check_launch("attention_forward (flash)");
  return true;
}

template <class T, int HS>
bool backward_as(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                 const Tensor& out, const float* lse) {
  using S = Shape<T, HS>;
  if (!fits(flash_dq_kernel<T, HS>, DqLayout<T, HS>::bytes) || !fits(flash_dkv_kernel<T, HS>, DkvLayout<T, HS>::bytes))
    return false;
  const Geometry g = geometry(a);
  cudaStream_t s = cuda_context().stream;
  Scratch d((size_t)(g.B * g.H * g.Tq) * sizeof(float));
  float* D = static_cast<float*>(d.get());
  if (g.Tq > 0) {
    attention_row_dots(D, dout, out, g);
    flash_dq_kernel<T, HS><<<dim3((unsigned)((g.Tq + S::R - 1) / S::R), (unsigned)g.H, (unsigned)g.B), S::W * 32,
                             DqLayout<T, HS>::bytes, s>>>(view_of(dq), lse, D, view_of(a.q), view_of(a.k),
                                                          view_of(a.v), view_of(dout), g);
    check_launch("attention_backward (flash, dq)");
  }
  if (g.Tk > 0) {
    flash_dkv_kernel<T, HS><<<dim3((unsigned)((g.Tk + S::R - 1) / S::R), (unsigned)g.H, (unsigned)g.B), S::W * 32,
                              DkvLayout<T, HS>::bytes, s>>>(view_of(dk), view_of(dv), lse, D, view_of(a.q),
                                                            view_of(a.k), view_of(a.v), view_of(dout), g);
    check_launch("attention_backward (flash, dk dv)");
  }
  return true;
}

// The tile dtype: the operands' own 16-bit dtype when every staged operand has it (no rounding on staging), fp32
// otherwise.
DType tile_dtype(std::initializer_list<const Tensor*> staged) {
  const DType d = (*staged.begin())->dtype;
  for (const Tensor* t : staged)
    if (t->dtype != d) return DType::F32;
  return d;
}

template <class T>
bool forward_hs(const AttentionArgs& a, const Tensor& out, float* lse, int64_t hs) {
  return with_head_size(hs, [&](auto HS) { return forward_as<T, decltype(HS)::value>(a, out, lse); });
}
template <class T>
bool backward_hs(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                 const Tensor& out, const float* lse, int64_t hs) {
  return with_head_size(hs, [&](auto HS) { return backward_as<T, decltype(HS)::value>(a, dq, dk, dv, dout, out, lse); });
}

}  // namespace

void attention_row_dots(float* D, const Tensor& dout, const Tensor& out, const Geometry& g) {
  if (g.B * g.H * g.Tq == 0) return;
  flash_rowdot_kernel<<<blocks_for(g.B * g.H * g.Tq * 32, 256), 256, 0, cuda_context().stream>>>(
      D, view_of(dout), view_of(out), g);
  check_launch("attention_backward (row dots)");
}

bool flash_forward(const AttentionArgs& a, const Tensor& out, float* lse) {
  const int64_t hs = a.q.dim(2) / a.heads;
  switch (tile_dtype({&a.q, &a.k, &a.v})) {
    case DType::BF16: return forward_hs<__nv_bfloat16>(a, out, lse, hs);
    case DType::F16: return forward_hs<__half>(a, out, lse, hs);
    default: return forward_hs<float>(a, out, lse, hs);
  }
}

bool flash_backward(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                    const Tensor& out, const float* lse) {
  const int64_t hs = a.q.dim(2) / a.heads;
  switch (tile_dtype({&a.q, &a.k, &a.v, &dout})) {
    case DType::BF16: return backward_hs<__nv_bfloat16>(a, dq, dk, dv, dout, out, lse, hs);
    case DType::F16: return backward_hs<__half>(a, dq, dk, dv, dout, out, lse, hs);
    default: return backward_hs<float>(a, dq, dk, dv, dout, out, lse, hs);
  }
}

}  // namespace lmforge::kernels::cuda
