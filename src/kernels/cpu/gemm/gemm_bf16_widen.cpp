// defines: gemm_bf16() — the per-CPU choice between oneDNN's bf16 matmul and gemm_bf16_widened(): bf16 matrix
//          products as fp32 products (gemm(), gemm/gemm_f32.cpp) of the operands widened exactly to fp32
//
// Why: a CPU without AVX512-BF16 and AMX has no bf16 dot-product instruction, and oneDNN then emulates one (or,
// without AVX-512, has no bf16 matmul at all); the fp32 GEMM is the fastest product such a CPU has. Widening a bf16
// to fp32 is exact (its 16 bits become the upper half of the fp32), so the fp32 GEMM multiplies the same numbers
// as oneDNN's bf16 kernels and accumulates in fp32 as they do: the two paths differ by the order of fp32 sums only.
// The rest of a bf16 step keeps bf16 storage; only the GEMM's own operands are widened into fp32 scratch kept
// across calls (cpu_common.h's GrowingBuffer: fresh buffers would page-fault on every call): small ones whole and
// once, large ones block by block where they are used. A weight's fp32 mirror (Tensor::widened, kept by the
// parameter store once per step) is taken as it is, so a weight is not widened again for every product.
#include <omp.h>

#include <algorithm>
#include <exception>
#include <string>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp.h"
#include "util/error.h"

namespace lmforge::kernels::cpu {
namespace {

// Widening and rounding passes below this many elements run on the calling thread: a pass is memory traffic of a
// few hundred microseconds at most below it, while on a loaded machine the barrier ending a parallel region can
// wait a scheduler time slice for a descheduled thread (linear_cpu.cpp's kConvertParallelMin, same reasoning).
constexpr int64_t kWidenParallelMin = int64_t(1) << 20;

struct WidenScratch {
  GrowingBuffer a, b, c;
  GrowingBuffer whole_a, whole_b;  // operands widened whole before a product's blocks (the team reads them)
};
// The calling thread's scratch (GEMMs are issued from outside parallel regions; thread_local keeps callers on
// different threads, such as pipeline stages, apart).
WidenScratch& widen_scratch() {
  thread_local WidenScratch s;
  return s;
}

float* wide_floats(GrowingBuffer& buffer, int64_t n) {
  try {
    return static_cast<float*>(buffer.get((size_t)std::max<int64_t>(n, 1) * sizeof(float)));
  } catch (const std::bad_alloc&) {
    throw Error("gemm_bf16 (widened): cannot allocate " + std::to_string(n * 4) + " bytes of fp32 scratch");
  }
}

struct WideMat {
  const float* p;
  int ld;
};

// An operand as the blocks below see it: bf16 memory still to be widened (h), or fp32 values (f: a mirror the
// caller passed, or the operand widened whole) taken as they are. Exactly one is set.
struct Src {
  const uint16_t* h = nullptr;
  const float* f = nullptr;
  int ld = 0;
};

// The block rows [r0, r0+rn) × columns [c0, c0+cn) of op(X) (X row-major with row stride ld, transposed when
// `trans`) in fp32, in X's own orientation (the stored block [rn, cn], or [cn, rn] when transposed), so the fp32
// GEMM takes it with the same transpose flag: fp32 X's memory itself, else bf16 X widened into fp32 scratch with a
// row stride of the block's width.
WideMat widen_block(const Src& X, bool trans, int64_t r0, int64_t rn, int64_t c0, int64_t cn, GrowingBuffer& buffer,
                    bool team) {
  if (trans) {
    std::swap(r0, c0);
    std::swap(rn, cn);
  }
  const int ld = X.ld;
  if (X.f != nullptr) return {X.f + r0 * (int64_t)ld + c0, ld};
  float* dst = wide_floats(buffer, rn * cn);
  const uint16_t* src = X.h + r0 * (int64_t)ld + c0;
#pragma omp parallel for schedule(static) if (team && rn * cn >= kWidenParallelMin)
  for (int64_t r = 0; r < rn; r++) {
    const uint16_t* s = src + r * (int64_t)ld;
    float* d = dst + r * cn;
#pragma omp simd
    for (int64_t c = 0; c < cn; c++) d[c] = bf16_to_f32(s[c]);
  }
  return {dst, (int)cn};
}

// (`team`: split a large pass over the OpenMP team; false inside a parallel region, where each thread does its own.)
//
// C's block [m0, m0+mb) × [n0, n0+nb) before its products: in place for an fp32 C, with the bias written (or, when
// accumulating, added) first so that the products add to it with beta 1; else fp32 scratch that the products
// overwrite and finish_wide_bf16() rounds.
struct WideBlock {
  float* p;
  int ld;
  float beta;
};
WideBlock start_wide_block(void* C, DType c_dtype, int ldc, bool accumulate, const float* bias, int64_t m0,
                           int64_t mb, int64_t n0, int64_t nb, GrowingBuffer& buffer, bool team) {
  if (c_dtype != DType::F32) return {wide_floats(buffer, mb * nb), (int)nb, 0.0f};
  float* c = static_cast<float*>(C) + m0 * ldc + n0;
  if (bias != nullptr) {
#pragma omp parallel for schedule(static) if (team && mb * nb >= kWidenParallelMin)
    for (int64_t r = 0; r < mb; r++) {
      float* row = c + r * ldc;
      const float* b = bias + n0;
      if (accumulate) {
#pragma omp simd
        for (int64_t j = 0; j < nb; j++) row[j] += b[j];
      } else {
        std::copy_n(b, nb, row);
      }
    }
  }
  return {c, ldc, accumulate || bias != nullptr ? 1.0f : 0.0f};
}

// A bf16 C's block from its fp32 products: each element rounded once from products + bias + (when accumulating)
// its old value, all added in fp32 — what oneDNN's bf16 matmul with a bias and a sum post-op computes.
void finish_wide_bf16(const WideBlock& v, uint16_t* C, int ldc, bool accumulate, const float* bias, int64_t m0,
                      int64_t mb, int64_t n0, int64_t nb, bool team) {
#pragma omp parallel for schedule(static) if (team && mb * nb >= kWidenParallelMin)
  for (int64_t r = 0; r < mb; r++) {
    const float* x = v.p + r * v.ld;
    uint16_t* c = C + (m0 + r) * ldc + n0;
    const float* b = bias != nullptr ? bias + n0 : nullptr;
    if (b != nullptr && accumulate) {
#pragma omp simd
      for (int64_t j = 0; j < nb; j++) c[j] = f32_to_bf16(x[j] + b[j] + bf16_to_f32(c[j]));
    } else if (b != nullptr) {
#pragma omp simd
      for (int64_t j = 0; j < nb; j++) c[j] = f32_to_bf16(x[j] + b[j]);
    } else if (accumulate) {
#pragma omp simd
      for (int64_t j = 0; j < nb; j++) c[j] = f32_to_bf16(x[j] + bf16_to_f32(c[j]));
    } else {
#pragma omp simd
      for (int64_t j = 0; j < nb; j++) c[j] = f32_to_bf16(x[j]);
    }
  }
}

// Block length along a dimension of length `len` such that a block times `other` (the largest extent it is
// multiplied with in a widened block) stays within `limit` elements: a multiple of 16 (whole AVX-512 vectors of
// fp32, and OpenBLAS's register tiles), all of it when it fits.
int64_t wide_block_len(int64_t len, int64_t other, int64_t limit) {
  if (len * other <= limit) return len;
  return std::max<int64_t>(16, limit / std::max<int64_t>(other, 1) / 16 * 16);
}

// One block of C, rows [m0, m0 + mlen) and columns [n0, n0 + nlen): op(A)·op(B) summed over K in chunks of kc
// (+ bias, + C when accumulating), a bf16 C rounded once at the end. Each operand block is widened into the scratch
// unless it already holds that block (`cache`: the one split dimension leaves the other operand's block the same
// from call to call, so it is widened once). team: the OpenMP team shares each pass (else the calling thread alone).
struct WidenedOperands {
  WideMat a{}, b{};
  int64_t a_key[2] = {-1, -1}, b_key[2] = {-1, -1};  // which block each scratch holds
};
void multiply_wide_block(bool trans_a, bool trans_b, int K, const Src& A, const Src& B, bool accumulate, void* C, DType c_dtype, int ldc, const float* bias, int64_t m0, int64_t mlen,
                         int64_t n0, int64_t nlen, int64_t kc, WidenScratch& s, WidenedOperands& cache, bool team) {
  WideBlock block = start_wide_block(C, c_dtype, ldc, accumulate, bias, m0, mlen, n0, nlen, s.c, team);
  if (K <= 0 && block.beta == 0.0f) {  // an empty sum: the products are 0
    for (int64_t r = 0; r < mlen; r++) std::fill_n(block.p + r * block.ld, nlen, 0.0f);
  }
  for (int64_t k0 = 0; k0 < K; k0 += kc) {
    const int64_t klen = std::min<int64_t>(kc, K - k0);
    if (cache.a_key[0] != m0 || cache.a_key[1] != k0) {
      cache.a = widen_block(A, trans_a, m0, mlen, k0, klen, s.a, team);
      cache.a_key[0] = m0, cache.a_key[1] = k0;
    }
    if (cache.b_key[0] != k0 || cache.b_key[1] != n0) {
      cache.b = widen_block(B, trans_b, k0, klen, n0, nlen, s.b, team);
      cache.b_key[0] = k0, cache.b_key[1] = n0;
    }
    gemm(trans_a, trans_b, (int)mlen, (int)nlen, (int)klen, cache.a.p, cache.a.ld, cache.b.p, cache.b.ld, block.beta,
         block.p, block.ld);
    block.beta = 1.0f;
  }
  if (c_dtype != DType::F32)
    finish_wide_bf16(block, static_cast<uint16_t*>(C), ldc, accumulate, bias, m0, mlen, n0, nlen, team);
}

// Team blocks: large blocks, each widened by the whole team and multiplied by the team's gemm() (which gives a CPU
// with AVX-512F oneDNN's multi-threaded fp32 matmul).
void widened_team_blocks(bool trans_a, bool trans_b, int M, int N, int K, const Src& A, const Src& B, bool accumulate, void* C, DType c_dtype, int ldc,
                         const float* bias, int64_t block_elems) {
  WidenScratch& s = widen_scratch();
  const bool c_scratch = c_dtype != DType::F32;
  // Split along the longest of M, N, K when a widened operand (or a bf16 C's fp32 block) would exceed block_elems:
  // M splits op(A)'s rows and C's, N splits op(B)'s columns and C's, K splits both operands' shared dimension and
  // the blocks' products add up in C (fp32 scratch for a bf16 C, rounded once at the end).
  const int64_t m_other = std::max<int64_t>(K, c_scratch ? N : 0), n_other = std::max<int64_t>(K, c_scratch ? M : 0);
  const int64_t k_other = std::max(M, N);
  int64_t mb = M, nb = N, kb = K;
  const bool fits = (int64_t)M * m_other <= block_elems && (int64_t)N * n_other <= block_elems;
  if (!fits) {
    if (M >= N && M >= K) mb = wide_block_len(M, m_other, block_elems);
    else if (N >= K) nb = wide_block_len(N, n_other, block_elems);
    else kb = wide_block_len(K, k_other, block_elems);
  }
  // Only one dimension is split, so one operand's block stays the same over the loop: it is widened once (the
  // keys say which block a scratch holds).
  WidenedOperands cache;
  for (int64_t m0 = 0; m0 < M; m0 += mb) {
    const int64_t mlen = std::min<int64_t>(mb, M - m0);
    for (int64_t n0 = 0; n0 < N; n0 += nb)
      multiply_wide_block(trans_a, trans_b, K, A, B, accumulate, C, c_dtype, ldc, bias, m0, mlen, n0,
                          std::min<int64_t>(nb, N - n0), kb, s, cache, true);
  }
}

// Thread slabs: ONE parallel region for the whole product. Each thread takes a contiguous range of C's rows (or
// columns, whichever dimension is longer, as gemm() splits) and walks it in chunks of at most block_elems-element
// pieces: it widens the chunk's operand blocks into its own scratch, multiplies them with gemm() (single-threaded
// OpenBLAS inside a parallel region) and rounds its bf16 results while they are still in cache. Why: the team
// blocks above end every widening, product and rounding pass in a barrier of the team, and on a loaded machine a
// barrier can wait a scheduler time slice for a descheduled thread (libgomp's spinning at them was a quarter of the
// CPU time of a bf16 step of config A, against a fifth for fp32); the widened chunks are also reused from cache
// rather than written to and re-read from memory.
void widened_thread_slabs(bool trans_a, bool trans_b, int M, int N, int K, const Src& A, const Src& B,
                          bool accumulate, void* C, DType c_dtype, int ldc, const float* bias, int64_t block_elems) {
  // Split the dimension that partitions the operand still in bf16, so that each of its elements is widened once
  // (splitting the other would have every thread widen all of it); with both or neither in bf16, the longer of M
  // and N.
  const bool a_bf16 = A.h != nullptr, b_bf16 = B.h != nullptr;
  const bool split_m = a_bf16 != b_bf16 ? a_bf16 : M >= N;
  const int64_t S = split_m ? M : N, other = split_m ? N : M;
  int threads = omp_get_max_threads();
  if (2.0 * M * N * K < 4e6 || omp_in_parallel()) threads = 1;  // gemm()'s own threshold for splitting
  const int64_t slab = ((S + threads - 1) / threads + 15) / 16 * 16;
  // K whole when the unsplit operand's [K, other] block fits, else chunks of K (the products add up in C) small
  // enough for the whole slab's [slab, K-chunk] block: then the unsplit operand is widened once per thread, not
  // once per slab chunk (the LM head's input gradient, [tokens, vocab]·[vocab, hidden], would widen the whole
  // weight per chunk). Then chunks of the slab so that its [chunk, K-chunk] block and C's [chunk, other] block fit.
  const int64_t kc = (int64_t)K * other <= block_elems
                         ? K
                         : std::max<int64_t>(16, block_elems / std::max(slab, other) / 16 * 16);
  const int64_t sc = std::max<int64_t>(16, std::min(slab, block_elems / std::max<int64_t>({kc, other, 1}) / 16 * 16));
  std::exception_ptr error;
#pragma omp parallel num_threads(threads) if (threads > 1)
  try {
    WidenScratch& s = widen_scratch();
    const int64_t s0 = (int64_t)omp_get_thread_num() * slab, s1 = std::min<int64_t>(S, s0 + slab);
    WidenedOperands cache;
    for (int64_t c0 = s0; c0 < s1; c0 += sc) {
      const int64_t len = std::min(sc, s1 - c0);
      const int64_t m0 = split_m ? c0 : 0, mlen = split_m ? len : M, n0 = split_m ? 0 : c0, nlen = split_m ? N : len;
      multiply_wide_block(trans_a, trans_b, K, A, B, accumulate, C, c_dtype, ldc, bias, m0, mlen, n0, nlen, kc, s,
                          cache, false);
    }
  } catch (...) {  // an exception may not leave a parallel region: the first one is rethrown after it
#pragma omp critical(gemm_bf16_widened_error)
    if (!error) error = std::current_exception();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

void gemm_bf16_widened(bool trans_a, bool trans_b, int M, int N, int K, Bf16Operand A, Bf16Operand B,
                       bool accumulate, void* C, DType c_dtype, int ldc, const float* bias, int64_t block_elems,
                       Bf16WidenThreads threads) {
  if (c_dtype != DType::F32 && c_dtype != DType::BF16)
    throw Error(std::string("gemm_bf16: no bf16 product into ") + dtype_name(c_dtype));
  if (M <= 0 || N <= 0) return;
  Src a{A.widened != nullptr ? nullptr : A.p, A.widened, A.ld}, b{B.widened != nullptr ? nullptr : B.p, B.widened, B.ld};
  // A bf16 operand small enough is widened whole, once, by the team (kBf16WidenWholeElems says why); a larger one
  // (the LM head's logits and their gradient, a vocabulary's embedding) is widened block by block where it is used.
  WidenScratch& s = widen_scratch();
  const int64_t whole_limit = block_elems > 0 ? block_elems : kBf16WidenWholeElems;
  if (a.h != nullptr && (int64_t)M * K <= whole_limit && K > 0)
    a = {nullptr, widen_block(a, trans_a, 0, M, 0, K, s.whole_a, true).p, trans_a ? M : K};
  if (b.h != nullptr && (int64_t)K * N <= whole_limit && K > 0)
    b = {nullptr, widen_block(b, trans_b, 0, K, 0, N, s.whole_b, true).p, trans_b ? K : N};
  if (a.f != nullptr && b.f != nullptr && c_dtype == DType::F32 && K > 0) {
    // Nothing left to widen or round: one fp32 product, with gemm()'s own threading (the bias written first).
    const WideBlock c = start_wide_block(C, c_dtype, ldc, accumulate, bias, 0, M, 0, N, s.c, true);
    gemm(trans_a, trans_b, M, N, K, a.f, a.ld, b.f, b.ld, c.beta, c.p, c.ld);
    return;
  }
  // Where gemm() gives large products to oneDNN (AVX-512F), the team's blocks keep them there; OpenBLAS runs as
  // fast on a thread's slab as on the whole product, without the barriers.
  if (threads == Bf16WidenThreads::AUTO)
    threads = fp32_gemm_uses_onednn() ? Bf16WidenThreads::TEAM : Bf16WidenThreads::SLABS;
  if (threads == Bf16WidenThreads::TEAM)
    widened_team_blocks(trans_a, trans_b, M, N, K, a, b, accumulate, C, c_dtype, ldc, bias,
                        block_elems > 0 ? block_elems : kBf16WidenTeamBlockElems);
  else
    widened_thread_slabs(trans_a, trans_b, M, N, K, a, b, accumulate, C, c_dtype, ldc, bias,
                         block_elems > 0 ? block_elems : kBf16WidenSlabBlockElems);
}

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, Bf16Operand A, Bf16Operand B, bool accumulate,
               void* C, DType c_dtype, int ldc, const float* bias) {
  if (bf16_gemm_choice().path == Bf16GemmChoice::NATIVE)
    gemm_bf16_onednn(trans_a, trans_b, M, N, K, A.p, A.ld, B.p, B.ld, accumulate, C, c_dtype, ldc, bias);
  else
    gemm_bf16_widened(trans_a, trans_b, M, N, K, A, B, accumulate, C, c_dtype, ldc, bias);
}

}  // namespace lmforge::kernels::cpu
