// defines: the tensor-core attention kernels (FlashAttention-2: Dao, 2023) for 16-bit q, k, v (bf16 or f16) and
//          head sizes 32, 64 and 128: mma_forward_kernel() (online softmax, the row log-sum-exp saved), mma_dq_kernel()
//          and mma_dkv_kernel() (the backward, p = exp(s − lse) recomputed; no atomics, so runs are bit-identical).
//          Launched by attention_mma_cuda.cu; also compiled on the CPU under tests/kernels/warp_emulator.h, whose
//          tests run this source against a double-precision reference.
//
// Math (ops.h, as attention_flash_cuda.cu): s_tj = q_t·k_j/√hs over the allowed keys (causal j <= t, key padding);
// p = softmax_j s; out_t = Σ_j drop(p_tj)·v_j; lse_t = log Σ_j exp(s_tj) (+inf for a row without allowed keys).
// Scores are kept in base 2 (x = s·log2(e)/√hs, so exp becomes one ex2.approx, relative error 2⁻²²):
// m = max_j x, l = Σ_j 2^(x − m), lse = (m + log2 l)·ln 2. Forward, key tile by key tile: m' = max(m, max_j x_j);
// α = 2^(m − m'); l' = α·l + Σ 2^(x − m'); O' = α·O + Σ_j drop(2^(x_j − m'))·v_j; out = O/l.
// Backward with D_t = dout_t·out_t: dP_tj = dout_t·v_j,
// dS_tj = p_tj·(drop_tj·dP_tj − D_t); dV_j += Σ_t drop(p_tj)·dout_t; dK_j += Σ_t dS_tj·q_t/√hs;
// dQ_t += Σ_j dS_tj·k_j/√hs. Dropout: the CPU's Philox keep decision of element ((b·total_heads + head_offset + h)·Tq
// + t)·Tk + j (Geometry::factor), the statistics on the undropped p.
//
// Work split (warp_mma.cuh has the register layouts): a CTA of 4 warps; each warp owns 16 rows of the CTA's 64
// (queries in the forward and dq kernels, keys in the dk/dv kernel) and keeps their operand fragments (q, or k and
// v, and dout) in registers for the whole kernel (head size 128: k and v reloaded per tile); the other side streams
// through shared memory in tiles of 64 rows (the backward at head size 128: 32), two stages deep (cp.async loads
// the next tile while the tensor cores work on this one). Scores, probabilities and accumulators never leave
// registers: a score tile's C fragments are the A fragments of the next product once
// rounded to T (probabilities and dS enter the second product in T, as in FlashAttention), and a row's max and sum
// are reduced over the 4 lanes that hold it. Causal: key tiles after a query tile's last row are never loaded, and a
// warp skips a tile none of its rows can see; causal grids start with the longest rows (query tiles from the end).
// Shared memory rows are HS + 8 elements (16 bytes of padding: ldmatrix's 8 row addresses fall on distinct banks).
//
// Shared memory per CTA, forward / dq / dk/dv: hs 32 26.1 / 36.6 / 31.7 KB; hs 64 46.6 / 65.3 / 56.3 KB; hs 128
// 87.6 / 87.5 / 70.1 KB (all within an A100's 163 KB opt-in).
// FLOP per GPT-2 124M step (B 16, T 1024, causal): forward 2 products, backward 7 (S recomputed in both backward
// kernels, dP in both): 1.39 TFLOP.
#pragma once
#include <cstdint>

#include "kernels/cuda/attention_geometry.cuh"
#include "kernels/cuda/warp_mma.cuh"

namespace lmforge::kernels::cuda::mma_attention {

// Rows b·T + t of a [B·T, stride] 16-bit operand; head h's columns start at h·hs.
template <class T>
struct Operand {
  const T* p;
  int64_t stride;  // elements between row starts (a multiple of 8: 16-byte rows for cp.async)
};

constexpr int kWarps = 4, kRows = 16 * kWarps, kTile = 64;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

template <int HS>
__host__ __device__ constexpr int ld() {
  return HS + 8;
}
// The backward kernels' streaming tile (keys for dq, queries for dk/dv): 64 rows, 32 at head size 128, where the
// fragments of a 64-wide tile and the 128-wide accumulators would not fit 255 registers.
template <int HS>
__host__ __device__ constexpr int backward_tile() {
  return HS > 64 ? 32 : 64;
}
// Whether the dk/dv kernel keeps its warp's k and v fragments in registers for the whole kernel (head size 128
// reloads them from shared memory for each tile instead: 64 fewer registers, two ldmatrix passes more per tile).
template <int HS>
__host__ __device__ constexpr bool resident_kv() {
  return HS <= 64;
}
// Dynamic shared memory of each kernel (bytes).
template <int HS>
__host__ __device__ constexpr int forward_smem(int elem) {
  return (kRows + 4 * kTile) * ld<HS>() * elem + 2 * kTile * 4;
}
template <int HS>
__host__ __device__ constexpr int dq_smem(int elem) {
  return (3 * kRows + 4 * backward_tile<HS>()) * ld<HS>() * elem + (2 * backward_tile<HS>() + kRows) * 4;
}
template <int HS>
__host__ __device__ constexpr int dkv_smem(int elem) {
  return (2 * kRows + 4 * backward_tile<HS>()) * ld<HS>() * elem + 4 * backward_tile<HS>() * 4;
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Rows [row0, row0 + R) of op's columns [col0, col0 + HS) into dst[R][ld], zeros from row `valid` on; every thread
// of the CTA issues its share of cp.async copies (the caller commits and waits).
template <class T, int HS, int R>
__device__ __forceinline__ void load_tile(T* dst, Operand<T> op, int64_t row0, int64_t valid, int64_t col0) {
  constexpr int chunks = HS / 8;  // 16-byte pieces of a row
  for (int i = threadIdx.x; i < R * chunks; i += kWarps * 32) {
    const int r = i / chunks, c = i % chunks;
    const bool full = r < valid;
    cp_async_16(dst + r * ld<HS>() + c * 8, full ? op.p + (row0 + r) * op.stride + col0 + c * 8 : op.p, full);
  }
}

// The A fragments of rows 0..15 of m[.][ld], columns 0..16·KS.
template <class T, int KS, int LD>
__device__ __forceinline__ void load_a(uint32_t (&a)[KS][4], const T* m) {
  const int lane = threadIdx.x % 32;
  LMFORGE_UNROLL
  for (int kk = 0; kk < KS; kk++) ldmatrix_x4(a[kk], m + (lane % 16) * LD + kk * 16 + (lane / 16) * 8);
}

// acc[N/8] += A·B for A 16 × 16·KS (fragments a) and B read from the row-major shared tile m[.][LD], one x4
// ldmatrix per two 8-column n tiles: B = Mᵀ for M the N × 16·KS tile (S = Q·Kᵀ: "col" B straight from M's rows), or
// B = M for M the 16·KS × N tile (kTransposed: O += P·V, M read transposed by ldmatrix.trans).
template <class T, int KS, int N, int LD, bool kTransposed>
__device__ __forceinline__ void mma_tile(float (&acc)[N / 8][4], const uint32_t (&a)[KS][4], const T* m) {
  const int lane = threadIdx.x % 32, row8 = lane % 8, hi8 = (lane / 16) * 8, mid8 = ((lane / 8) % 2) * 8;
  LMFORGE_UNROLL
  for (int kk = 0; kk < KS; kk++)
    LMFORGE_UNROLL
    for (int np = 0; np < N / 16; np++) {
      uint32_t b[4];
      if constexpr (kTransposed) ldmatrix_x4_trans(b, m + (kk * 16 + row8 + mid8) * LD + np * 16 + hi8);
      else ldmatrix_x4(b, m + (np * 16 + row8 + hi8) * LD + kk * 16 + mid8);
      mma_16816<T>(acc[2 * np], a[kk], b[0], b[1]);
      mma_16816<T>(acc[2 * np + 1], a[kk], b[2], b[3]);
    }
}
// S = A·Mᵀ and O += A·M (mma_tile).
template <class T, int KS, int N, int LD>
__device__ __forceinline__ void mma_abt(float (&acc)[N / 8][4], const uint32_t (&a)[KS][4], const T* m) {
  mma_tile<T, KS, N, LD, false>(acc, a, m);
}
template <class T, int KS, int N, int LD>
__device__ __forceinline__ void mma_ab(float (&acc)[N / 8][4], const uint32_t (&a)[KS][4], const T* m) {
  mma_tile<T, KS, N, LD, true>(acc, a, m);
}

// A fragments (16 × N, rounded to T) from fp32 C fragments of 16 × N: n tiles 2kk and 2kk+1 are k-step kk.
template <class T, int N>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[N / 16][4], const float (&c)[N / 8][4]) {
  LMFORGE_UNROLL
  for (int kk = 0; kk < N / 16; kk++) {
    a[kk][0] = pack2<T>(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = pack2<T>(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = pack2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = pack2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

// f(nt, i, r, c) for each of the lane's C-fragment elements of a 16 × N tile: n tile nt, register i, row half r
// (the rows g and g + 8 of warp_mma.cuh's layout), column c of the tile.
template <int N, class F>
__device__ __forceinline__ void for_each_element(F&& f) {
  const int lane = threadIdx.x % 32;
  LMFORGE_UNROLL
  for (int nt = 0; nt < N / 8; nt++)
    LMFORGE_UNROLL
    for (int i = 0; i < 4; i++) f(nt, i, i / 2, nt * 8 + 2 * (lane % 4) + i % 2);
}

// The max (or sum) of a row over the 4 lanes holding it.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, shfl_xor(v, 1));
  return fmaxf(v, shfl_xor(v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += shfl_xor(v, 1);
  return v + shfl_xor(v, 2);
}

// 0 for a key inside the sequence and not padded, −inf otherwise: added to the tile's scores.
__device__ __forceinline__ float key_bias(const Geometry& g, int64_t b, int64_t j) {
  return j < g.Tk && (g.padding == nullptr || g.padding[b * g.Tk + j] != 0) ? 0.0f : -INFINITY;
}

// Whether a key tile [k0, k0 + nt) needs the per-element mask for the warp's 16 query rows from tw: key padding,
// keys past the end, or causal keys after the warp's first row. Warp-uniform; the other tiles skip the mask's
// shared-memory reads and compares (at head size 64 the element-wise work per tile rivals its tensor-core work).
__device__ __forceinline__ bool tile_masked(const Geometry& g, int64_t k0, int64_t tw, int nt) {
  return g.padding != nullptr || k0 + nt > g.Tk || (g.causal && k0 + nt - 1 > tw);
}

// The key tiles of NT rows a query tile from q0 visits (causal: none after its last row).
__device__ __forceinline__ int key_tiles(const Geometry& g, int64_t q0, int nt) {
  const int64_t kend = g.causal ? min64(g.Tk, q0 + kRows) : g.Tk;
  return (int)((kend + nt - 1) / nt);
}

// Key tile kt of batch b's head columns from col0 into stage `stage` of the two-stage K and V buffers [2][NT][LD]
// (cp.async: the caller commits and waits) and of the key_bias() row buffer [2][NT] (plain stores).
template <class T, int HS, int NT>
__device__ __forceinline__ void load_key_tile(T* ks, T* vs, float* kbias, Operand<T> k, Operand<T> v,
                                              const Geometry& g, int64_t b, int64_t col0, int kt, int stage) {
  const int64_t k0 = (int64_t)kt * NT;
  load_tile<T, HS, NT>(ks + stage * NT * ld<HS>(), k, b * g.Tk + k0, g.Tk - k0, col0);
  load_tile<T, HS, NT>(vs + stage * NT * ld<HS>(), v, b * g.Tk + k0, g.Tk - k0, col0);
  for (int i = threadIdx.x; i < NT; i += kWarps * 32) kbias[stage * NT + i] = key_bias(g, b, k0 + i);
}

// Query tile of a forward or dq CTA: causal grids run the longest rows first.
__device__ __forceinline__ int64_t query_tile(const Geometry& g) {
  const int64_t tiles = (g.Tq + kRows - 1) / kRows;
  return (g.causal ? tiles - 1 - (int64_t)blockIdx.x : (int64_t)blockIdx.x) * kRows;
}

// ---- forward -----------------------------------------------------------------------------------------------------
// One CTA per (query tile, head, batch): out rows written, lse [B,H,Tq] saved.
template <class T, int HS, class OutView>
__global__ void __launch_bounds__(kWarps * 32)
    mma_forward_kernel(OutView out, float* lse, Operand<T> q, Operand<T> k, Operand<T> v, Geometry g) {
  constexpr int LD = ld<HS>(), KS = HS / 16, NT = kTile;
  LMFORGE_SMEM(smem);
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = qs + kRows * LD;    // [2][NT][LD]
  T* vs = ks + 2 * NT * LD;   // [2][NT][LD]
  float* kbias = reinterpret_cast<float*>(vs + 2 * NT * LD);  // [2][NT]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q0 = query_tile(g), h = blockIdx.y, b = blockIdx.z, col0 = h * HS;
  const int tiles = key_tiles(g, q0, NT);
  auto load_keys = [&](int kt, int stage) { load_key_tile<T, HS, NT>(ks, vs, kbias, k, v, g, b, col0, kt, stage); };
  load_tile<T, HS, kRows>(qs, q, b * g.Tq + q0, g.Tq - q0, col0);
  if (tiles > 0) load_keys(0, 0);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  uint32_t qf[KS][4];
  load_a<T, KS, LD>(qf, qs + warp * 16 * LD);
  float o[HS / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float scale2 = g.scale * kLog2e;
  const int64_t tw = q0 + warp * 16, trow[2] = {tw + lane / 4, tw + lane / 4 + 8};
  for (int kt = 0; kt < tiles; kt++) {
    const int stage = kt & 1;
    const int64_t k0 = (int64_t)kt * NT;
    if (kt + 1 < tiles) load_keys(kt + 1, stage ^ 1);  // that stage was last read before the previous barrier
    cp_async_commit();
    if (!(g.causal && k0 > tw + 15)) {  // warp-uniform: some row of the warp sees a key of this tile
      __syncwarp();  // ldmatrix and mma are .aligned: the whole warp, converged after the loads' uneven loops
      const T* kst = ks + stage * NT * LD;
      const float* kb = kbias + stage * NT;
      float s[NT / 8][4] = {};
      mma_abt<T, KS, NT, LD>(s, qf, kst);
      float mx[2] = {-INFINITY, -INFINITY};
      if (tile_masked(g, k0, tw, NT)) {
        for_each_element<NT>([&](int nt, int i, int r, int jc) {
          float x = s[nt][i] * scale2 + kb[jc];
          if (g.causal && k0 + jc > trow[r]) x = -INFINITY;
          s[nt][i] = x;
          mx[r] = fmaxf(mx[r], x);
        });
      } else {  // every key of the tile allowed for every row of the warp
        for_each_element<NT>([&](int nt, int i, int r, int) {
          s[nt][i] *= scale2;
          mx[r] = fmaxf(mx[r], s[nt][i]);
        });
      }
      float alpha[2], base[2];
      LMFORGE_UNROLL
      for (int r = 0; r < 2; r++) {
        const float mn = fmaxf(m[r], quad_max(mx[r]));
        base[r] = mn == -INFINITY ? 0.0f : mn;  // a row with no allowed key yet: every p and α is 0
        alpha[r] = fast_exp2(m[r] - base[r]);
        m[r] = mn;
        l[r] *= alpha[r];
      }
      for_each_element<NT>([&](int nt, int i, int r, int jc) {
        const float p = fast_exp2(s[nt][i] - base[r]);
        l[r] += p;
        s[nt][i] = g.p > 0.0f && p != 0.0f && trow[r] < g.Tq ? p * g.factor(b, h, trow[r], k0 + jc) : p;
      });
      LMFORGE_UNROLL
      for (int n = 0; n < HS / 8; n++)
        LMFORGE_UNROLL
        for (int i = 0; i < 4; i++) o[n][i] *= alpha[i / 2];
      __syncwarp();  // reconverged after the dropout branch
      uint32_t pa[NT / 16][4];
      c_to_a<T, NT>(pa, s);
      mma_ab<T, NT / 16, HS, LD>(o, pa, vs + stage * NT * LD);
    }
    cp_async_wait_all();
    __syncthreads();  // the next tile has landed; this stage is free for the load after next
  }
  LMFORGE_UNROLL
  for (int r = 0; r < 2; r++) {
    l[r] = quad_sum(l[r]);
    const int64_t t = trow[r];
    if (t >= g.Tq) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    LMFORGE_UNROLL
    for (int n = 0; n < HS / 8; n++)
      LMFORGE_UNROLL
      for (int e = 0; e < 2; e++) out.st(b * g.Tq + t, col0 + n * 8 + 2 * (lane % 4) + e, o[n][2 * r + e] * inv);
    if (lane % 4 == 0) lse[(b * g.H + h) * g.Tq + t] = l[r] > 0.0f ? (m[r] + log2f(l[r])) * kLn2 : INFINITY;
  }
}

// ---- backward ----------------------------------------------------------------------------------------------------
// view[base + rows[r], col0 + c] += factor·acc for the lane's two fragment rows (r = 0, 1: g and g + 8) below `end`
// and its columns c of the HS/8 n tiles.
template <int HS, class View>
__device__ __forceinline__ void accumulate_rows(View view, const float (&acc)[HS / 8][4], int64_t base,
                                                const int64_t (&rows)[2], int64_t end, int64_t col0, float factor) {
  const int lane = threadIdx.x % 32;
  LMFORGE_UNROLL
  for (int r = 0; r < 2; r++) {
    if (rows[r] >= end) continue;
    LMFORGE_UNROLL
    for (int n = 0; n < HS / 8; n++)
      LMFORGE_UNROLL
      for (int e = 0; e < 2; e++) {
        const int64_t col = col0 + n * 8 + 2 * (lane % 4) + e;
        view.st(base + rows[r], col, view.ld(base + rows[r], col) + acc[n][2 * r + e] * factor);
      }
  }
}

// dq_t += Σ_j dS_tj·k_j/√hs: one CTA per (query tile, head, batch), over the key tiles. D [B,H,Tq] holds the rows'
// dout·out: with out.p set, this kernel forms it from the staged dout and out tiles and writes it for the dk/dv
// kernel (launched after it on the stream); with out.p null it reads D (attention_row_dots()).
template <class T, int HS, class GradView>
__global__ void __launch_bounds__(kWarps * 32)
    mma_dq_kernel(GradView dq, const float* lse, float* D, Operand<T> out, Operand<T> q, Operand<T> k, Operand<T> v,
                  Operand<T> dout, Geometry g) {
  constexpr int LD = ld<HS>(), KS = HS / 16, NT = backward_tile<HS>();
  LMFORGE_SMEM(smem);
  T* qs = reinterpret_cast<T*>(smem);
  T* dos = qs + kRows * LD;
  T* os = dos + kRows * LD;
  T* ks = os + kRows * LD;    // [2][NT][LD]
  T* vs = ks + 2 * NT * LD;   // [2][NT][LD]
  float* kbias = reinterpret_cast<float*>(vs + 2 * NT * LD);  // [2][NT]
  float* d_s = kbias + 2 * NT;                                 // [kRows]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q0 = query_tile(g), h = blockIdx.y, b = blockIdx.z, col0 = h * HS;
  const int tiles = key_tiles(g, q0, NT);
  auto load_keys = [&](int kt, int stage) { load_key_tile<T, HS, NT>(ks, vs, kbias, k, v, g, b, col0, kt, stage); };
  load_tile<T, HS, kRows>(qs, q, b * g.Tq + q0, g.Tq - q0, col0);
  load_tile<T, HS, kRows>(dos, dout, b * g.Tq + q0, g.Tq - q0, col0);
  if (out.p != nullptr) load_tile<T, HS, kRows>(os, out, b * g.Tq + q0, g.Tq - q0, col0);
  if (tiles > 0) load_keys(0, 0);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  uint32_t qf[KS][4], df[KS][4];
  load_a<T, KS, LD>(qf, qs + warp * 16 * LD);
  load_a<T, KS, LD>(df, dos + warp * 16 * LD);
  const int64_t tw = q0 + warp * 16, trow[2] = {tw + lane / 4, tw + lane / 4 + 8};
  if (out.p != nullptr) {  // D of the warp's 16 rows: two lanes per row, half of its columns each
    const int row = warp * 16 + lane / 2, c0 = (lane % 2) * (HS / 2);
    float d = 0.0f;
    for (int c = 0; c < HS / 2; c++) d += to_f32(dos[row * LD + c0 + c]) * to_f32(os[row * LD + c0 + c]);
    d += shfl_xor(d, 1);
    if (lane % 2 == 0) {
      d_s[row] = d;
      if (q0 + row < g.Tq) D[(b * g.H + h) * g.Tq + q0 + row] = d;
    }
    __syncwarp();  // the warp reads its own rows' D below
  }
  float lse2[2], drow[2];  // the row's lse in base 2 (+inf past Tq: p = 0) and D
  LMFORGE_UNROLL
  for (int r = 0; r < 2; r++) {
    const bool in = trow[r] < g.Tq;
    lse2[r] = in ? lse[(b * g.H + h) * g.Tq + trow[r]] * kLog2e : INFINITY;
    drow[r] = !in ? 0.0f : out.p != nullptr ? d_s[trow[r] - q0] : D[(b * g.H + h) * g.Tq + trow[r]];
  }
  const float scale2 = g.scale * kLog2e;
  float acc[HS / 8][4] = {};
  for (int kt = 0; kt < tiles; kt++) {
    const int stage = kt & 1;
    const int64_t k0 = (int64_t)kt * NT;
    if (kt + 1 < tiles) load_keys(kt + 1, stage ^ 1);
    cp_async_commit();
    if (!(g.causal && k0 > tw + 15)) {
      __syncwarp();
      const T* kst = ks + stage * NT * LD;
      const float* kb = kbias + stage * NT;
      float s[NT / 8][4] = {}, dp[NT / 8][4] = {};
      mma_abt<T, KS, NT, LD>(s, qf, kst);
      mma_abt<T, KS, NT, LD>(dp, df, vs + stage * NT * LD);
      const bool masked = tile_masked(g, k0, tw, NT);
      for_each_element<NT>([&](int nt, int i, int r, int jc) {  // s becomes dS
        const int64_t j = k0 + jc;
        float ds = 0.0f;
        if (!masked || (kb[jc] == 0.0f && !(g.causal && j > trow[r]))) {
          const float p = fast_exp2(s[nt][i] * scale2 - lse2[r]);
          const float f = g.p > 0.0f && p != 0.0f ? g.factor(b, h, trow[r], j) : 1.0f;
          ds = p * (f * dp[nt][i] - drow[r]);
        }
        s[nt][i] = ds;
      });
      __syncwarp();
      uint32_t da[NT / 16][4];
      c_to_a<T, NT>(da, s);
      mma_ab<T, NT / 16, HS, LD>(acc, da, kst);
    }
    cp_async_wait_all();
    __syncthreads();
  }
  accumulate_rows<HS>(dq, acc, b * g.Tq, trow, g.Tq, col0, g.scale);
}

// dv_j += Σ_t drop(p_tj)·dout_t and dk_j += Σ_t dS_tj·q_t/√hs: one CTA per (key tile, head, batch), over the query
// tiles (causal: from the tile holding its first key). The warp's products run transposed: Sᵀ = K_w·Qᵀ, dPᵀ =
// V_w·doutᵀ, so the warp's 16 keys are the rows of every fragment.
template <class T, int HS, class GradView>
__global__ void __launch_bounds__(kWarps * 32)
    mma_dkv_kernel(GradView dk, GradView dv, const float* lse, const float* D, Operand<T> q, Operand<T> k,
                   Operand<T> v, Operand<T> dout, Geometry g) {
  constexpr int LD = ld<HS>(), KS = HS / 16, NT = backward_tile<HS>();
  LMFORGE_SMEM(smem);
  T* ks = reinterpret_cast<T*>(smem);
  T* vs = ks + kRows * LD;
  T* qs = vs + kRows * LD;    // [2][NT][LD]
  T* dos = qs + 2 * NT * LD;  // [2][NT][LD]
  float* lse_s = reinterpret_cast<float*>(dos + 2 * NT * LD);  // [2][NT], base 2, +inf past Tq
  float* d_s = lse_s + 2 * NT;                                  // [2][NT]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t k0 = (int64_t)blockIdx.x * kRows, h = blockIdx.y, b = blockIdx.z, col0 = h * HS;
  const int64_t tbegin = g.causal ? k0 / NT * NT : 0;  // causal: queries t >= j >= k0
  const int tiles = g.Tq > tbegin ? (int)((g.Tq - tbegin + NT - 1) / NT) : 0;
  auto load_queries = [&](int it, int stage) {
    const int64_t t0 = tbegin + (int64_t)it * NT;
    load_tile<T, HS, NT>(qs + stage * NT * LD, q, b * g.Tq + t0, g.Tq - t0, col0);
    load_tile<T, HS, NT>(dos + stage * NT * LD, dout, b * g.Tq + t0, g.Tq - t0, col0);
    for (int i = threadIdx.x; i < NT; i += kWarps * 32) {
      const bool in = t0 + i < g.Tq;
      lse_s[stage * NT + i] = in ? lse[(b * g.H + h) * g.Tq + t0 + i] * kLog2e : INFINITY;
      d_s[stage * NT + i] = in ? D[(b * g.H + h) * g.Tq + t0 + i] : 0.0f;
    }
  };
  load_tile<T, HS, kRows>(ks, k, b * g.Tk + k0, g.Tk - k0, col0);
  load_tile<T, HS, kRows>(vs, v, b * g.Tk + k0, g.Tk - k0, col0);
  if (tiles > 0) load_queries(0, 0);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  uint32_t kf[KS][4], vf[KS][4];
  if constexpr (resident_kv<HS>()) {
    load_a<T, KS, LD>(kf, ks + warp * 16 * LD);
    load_a<T, KS, LD>(vf, vs + warp * 16 * LD);
  }
  const int64_t jw = k0 + warp * 16, jrow[2] = {jw + lane / 4, jw + lane / 4 + 8};
  bool key_ok[2];
  LMFORGE_UNROLL
  for (int r = 0; r < 2; r++) key_ok[r] = key_bias(g, b, jrow[r]) == 0.0f;
  const float scale2 = g.scale * kLog2e;
  float dka[HS / 8][4] = {}, dva[HS / 8][4] = {};
  for (int it = 0; it < tiles; it++) {
    const int stage = it & 1;
    const int64_t t0 = tbegin + (int64_t)it * NT;
    if (it + 1 < tiles) load_queries(it + 1, stage ^ 1);
    cp_async_commit();
    if (!(g.causal && t0 + NT - 1 < jw)) {  // some query of the tile sees one of the warp's keys
      __syncwarp();
      const T* qst = qs + stage * NT * LD;
      const T* dost = dos + stage * NT * LD;
      const float* ls = lse_s + stage * NT;
      const float* dd = d_s + stage * NT;
      float st[NT / 8][4] = {}, dpt[NT / 8][4] = {};
      if constexpr (!resident_kv<HS>()) load_a<T, KS, LD>(kf, ks + warp * 16 * LD);
      mma_abt<T, KS, NT, LD>(st, kf, qst);
      if constexpr (!resident_kv<HS>()) load_a<T, KS, LD>(vf, vs + warp * 16 * LD);
      mma_abt<T, KS, NT, LD>(dpt, vf, dost);
      // Masked unless every query of the tile sees every key of the warp: causal needs t0 >= the warp's last key,
      // padding and the keys' end are per key (the queries past Tq have lse +inf, so p = 0 there anyway).
      const bool masked = (g.causal && t0 < jw + 15) || g.padding != nullptr || jw + 16 > g.Tk;
      for_each_element<NT>([&](int nt, int i, int r, int tc) {  // st becomes drop(p), dpt dS (both transposed)
        const int64_t t = t0 + tc;
        float pd = 0.0f, ds = 0.0f;
        if (!masked || (key_ok[r] && !(g.causal && jrow[r] > t))) {
          const float p = fast_exp2(st[nt][i] * scale2 - ls[tc]);
          const float f = g.p > 0.0f && p != 0.0f ? g.factor(b, h, t, jrow[r]) : 1.0f;
          pd = p * f;
          ds = p * (f * dpt[nt][i] - dd[tc]);
        }
        st[nt][i] = pd;
        dpt[nt][i] = ds;
      });
      __syncwarp();
      uint32_t a[NT / 16][4];
      c_to_a<T, NT>(a, st);
      mma_ab<T, NT / 16, HS, LD>(dva, a, dost);
      c_to_a<T, NT>(a, dpt);
      mma_ab<T, NT / 16, HS, LD>(dka, a, qst);
    }
    cp_async_wait_all();
    __syncthreads();
  }
  accumulate_rows<HS>(dv, dva, b * g.Tk, jrow, g.Tk, col0, 1.0f);
  accumulate_rows<HS>(dk, dka, b * g.Tk, jrow, g.Tk, col0, g.scale);
}

}  // namespace lmforge::kernels::cuda::mma_attention
