// defines: column_partials() + column_finish(): deterministic column sums over rows, Σ_n term(n, c), in two passes —
//          fixed chunks of rows summed in order into f32 scratch [chunks, C], then the chunks in order — for bias and
//          LayerNorm parameter gradients (no float atomics: the same inputs give the same bits on every run, on any
//          GPU, since the chunking depends on N alone); column_partials_pair(), the typed fast path of the first pass
#pragma once
#include <cstdint>

namespace lmforge::kernels::cuda {

// Rows per chunk: enough chunks to fill the GPU for N in the thousands, few enough that the second pass is short.
inline int64_t column_chunk_rows(int64_t N) { return N <= 64 ? N : (N + 127) / 128 < 64 ? 64 : (N + 127) / 128; }
inline int64_t column_chunks(int64_t N) {
  const int64_t r = column_chunk_rows(N);
  return r == 0 ? 1 : (N + r - 1) / r;
}

// grid (ceil(C/128), chunks), 128 threads: scratch[k·C + c] = Σ_{n in chunk k} term(n, c), n ascending. Consecutive
// threads take consecutive columns, so each row is read coalesced.
template <int kTerms, class Term>
__global__ void column_partials(float* scratch, int64_t N, int64_t C, int64_t chunk_rows, Term term) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, k = blockIdx.y;
  if (c >= C) return;
  float s[kTerms] = {};
  const int64_t end = (k + 1) * chunk_rows < N ? (k + 1) * chunk_rows : N;
  for (int64_t n = k * chunk_rows; n < end; n++) term(n, c, s);
  for (int t = 0; t < kTerms; t++) scratch[((int64_t)t * gridDim.y + k) * C + c] = s[t];
}

// The same partial sums as column_partials (each column's rows of a chunk in ascending n, bit for bit), two
// adjacent columns per thread (c, c+1; C even) through typed 4- or 8-byte loads (Term::pair(n, c, s) adds row n's
// terms of both columns to s[0][·] and s[1][·]), with rows unrolled so that several loads are in flight per
// thread. grid (ceil(C/256), chunks), 128 threads. Bytes: the operands once; for GPT-2's [16384, 768] bf16 LayerNorm
// (dout and inp) 50 MB, ~17 µs at 3 TB/s; a [16384, 3072] bias gradient 100 MB, ~34 µs.
template <int kTerms, class Term>
__global__ void column_partials_pair(float* scratch, int64_t N, int64_t C, int64_t chunk_rows, Term term) {
  const int64_t c = 2 * (blockIdx.x * (int64_t)blockDim.x + threadIdx.x), k = blockIdx.y;
  if (c >= C) return;
  float s[2][kTerms] = {};
  const int64_t end = (k + 1) * chunk_rows < N ? (k + 1) * chunk_rows : N;
#pragma unroll 8
  for (int64_t n = k * chunk_rows; n < end; n++) term.pair(n, c, s);
  for (int t = 0; t < kTerms; t++) {
    scratch[((int64_t)t * gridDim.y + k) * C + c] = s[0][t];
    scratch[((int64_t)t * gridDim.y + k) * C + c + 1] = s[1][t];
  }
}

// acc_t[c] += Σ_k scratch_t[k, c] in ascending k; `add(t, c, sum)` does the accumulation into the operand's dtype.
template <int kTerms, class Add>
__global__ void column_finish(const float* scratch, int64_t chunks, int64_t C, Add add) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int t = 0; t < kTerms; t++) {
    float s = 0.0f;
    for (int64_t k = 0; k < chunks; k++) s += scratch[((int64_t)t * chunks + k) * C + c];
    add(t, c, s);
  }
}

}  // namespace lmforge::kernels::cuda
