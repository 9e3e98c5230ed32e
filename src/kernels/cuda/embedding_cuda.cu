// defines: the CUDA embedding lookup (vocabulary piece, accumulate or overwrite) and its backward, a scatter-add
//          summed in ascending n for every element (the CPU's order: exact and deterministic) by row ownership after
//          a stable counting sort of the positions by row. Every dtype.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/cuda/vec.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

// out[n,c] = table[ids[n] − offset, c] inside the piece, else 0; with accumulate += (rows outside unchanged).
__global__ void embedding_forward_kernel(DView out, const int32_t* ids, DView table, int64_t N, int64_t C, int64_t R,
                                         int64_t offset, bool accumulate) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * C; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = i / C, c = i % C, row = (int64_t)ids[n] - offset;
    const bool inside = row >= 0 && row < R;
    if (accumulate) {
      if (inside) out.st(n, c, out.ld(n, c) + table.ld(row, c));
    } else {
      out.st(n, c, inside ? table.ld(row, c) : 0.0f);
    }
  }
}

// The forward's fast path (out and table of one dtype, rows 16-byte aligned, C a multiple of 8): 8 columns per
// thread through 16-byte accesses, the same value per element. Bytes for GPT-2's wte lookup (16384 × 768 bf16):
// 25 MB gathered + 25 MB written (50 MB more read with accumulate), ~17-34 µs at 3 TB/s.
template <class T>
__global__ void embedding_forward_vec(T* out, int64_t out_stride, const int32_t* ids, const T* table,
                                      int64_t table_stride, int64_t N, int64_t C, int64_t R, int64_t offset,
                                      bool accumulate) {
  const int64_t per_row = C / kVec;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * per_row;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = i / per_row, c = (i - n * per_row) * kVec, row = (int64_t)ids[n] - offset;
    const bool inside = row >= 0 && row < R;
    float v[kVec];
    T* o = out + n * out_stride + c;
    if (inside) load8(table + row * table_stride + c, v);
    if (accumulate) {
      if (!inside) continue;
      float a[kVec];
      load8(o, a);
#pragma unroll
      for (int j = 0; j < kVec; j++) v[j] = a[j] + v[j];
    } else if (!inside) {
#pragma unroll
      for (int j = 0; j < kVec; j++) v[j] = 0.0f;
    }
    store8(o, v);
  }
}

// ---- backward: dtable[ids[n] − offset, c] += dout[n, c], each element's additions in ascending n ------------------
// Sort-free row ownership, deterministic without float atomics: the positions n are ordered by (row, n) with a stable
// counting sort (integer atomics only count, so every result is the same on every run), then one warp per
// (row, 256 columns) adds its row's dout rows in ascending n. kChunks pieces of the n axis make the sort's ranks
// parallel: chunk b's warp walks its positions in order, 32 at a time.
// Bytes for GPT-2's wte gradient (16384 positions × 768, bf16 dout, fp32 dtable): dout 25 MB read, the touched
// dtable rows read and written (≤ 2·50 MB), ~20-60 µs at 3 TB/s; the sort moves ~1 MB.
constexpr int kChunks = 64;

// key[n] = the row of position n inside the piece, or R (outside: sorted last, skipped); counts[b][key] += 1.
__global__ void embedding_keys_kernel(uint32_t* key, uint32_t* counts, const int32_t* ids, int64_t N, int64_t R,
                                      int64_t offset, int64_t chunk_len) {
  for (int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; n < N; n += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = (int64_t)ids[n] - offset;
    const uint32_t k = row >= 0 && row < R ? (uint32_t)row : (uint32_t)R;
    key[n] = k;
    atomicAdd(&counts[(n / chunk_len) * (R + 1) + k], 1u);
  }
}

// Per key k (one thread): counts[b][k] ← Σ_{b' < b} counts[b'][k] (exclusive), total[k] = Σ_b counts[b][k].
__global__ void embedding_chunk_prefix_kernel(uint32_t* counts, uint32_t* total, int64_t keys, int64_t chunks) {
  const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (k >= keys) return;
  uint32_t s = 0;
  for (int64_t b = 0; b < chunks; b++) {
    const uint32_t c = counts[b * keys + k];
    counts[b * keys + k] = s;
    s += c;
  }
  total[k] = s;
}

// start[k] = Σ_{k' < k} total[k'] (one block of 1024: each thread a run of keys, then a scan of the runs' sums).
__global__ void embedding_key_scan_kernel(uint32_t* start, const uint32_t* total, int64_t keys) {
  __shared__ uint32_t sums[1024];
  const int64_t run = (keys + blockDim.x - 1) / blockDim.x, first = threadIdx.x * run;
  const int64_t last = first + run < keys ? first + run : keys;
  uint32_t s = 0;
  for (int64_t k = first; k < last; k++) s += total[k];
  sums[threadIdx.x] = s;
  __syncthreads();
  for (unsigned o = 1; o < blockDim.x; o <<= 1) {  // inclusive Hillis-Steele scan
    const uint32_t add = threadIdx.x >= o ? sums[threadIdx.x - o] : 0u;
    __syncthreads();
    sums[threadIdx.x] += add;
    __syncthreads();
  }
  s = threadIdx.x == 0 ? 0u : sums[threadIdx.x - 1];
  for (int64_t k = first; k < last; k++) {
    start[k] = s;
    s += total[k];
  }
}

// One warp per chunk: its positions in ascending n, 32 at a time; a position's slot is its key's start, plus the
// key's count in earlier chunks and earlier groups of this chunk (counts[b][k], advanced as the warp goes), plus
// its rank among the group's lanes with the same key. sorted[slot] = n: stable, so each key's positions ascend.
__global__ void embedding_place_kernel(uint32_t* sorted, uint32_t* counts, const uint32_t* start, const uint32_t* key,
                                       int64_t N, int64_t keys, int64_t chunk_len, int64_t chunks) {
  const int lane = threadIdx.x % 32;
  const int64_t b = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  if (b >= chunks) return;
  const int64_t end = (b + 1) * chunk_len < N ? (b + 1) * chunk_len : N;
  for (int64_t g = b * chunk_len; g < end; g += 32) {
    const int64_t n = g + lane;
    const bool valid = n < end;
    const uint32_t k = valid ? key[n] : 0xffffffffu;
    const unsigned peers = __match_any_sync(0xffffffffu, k);
    const unsigned lower = peers & ((1u << lane) - 1u);
    uint32_t base = 0;
    if (valid) base = counts[b * keys + k];
    __syncwarp();
    if (valid) {
      sorted[start[k] + base + __popc(lower)] = (uint32_t)n;
      if ((peers >> lane) == 1u) counts[b * keys + k] = base + __popc(peers);  // the highest lane of its key
    }
    __syncwarp();
  }
}

// One warp per (sorted position i, 256 columns): where i starts its key's run (and the key is a row of the piece),
// the warp adds dout[n, ·] for the run's n in ascending order into the row, rounding to dtable's dtype after every
// addition as the one-element-at-a-time update does. Typed fast path: D dtable, S dout, rows 16-byte aligned,
// C a multiple of 8; lane l owns 8 columns.
template <class D, class S>
__global__ void embedding_accumulate_vec(D* dtable, int64_t t_stride, const S* dout, int64_t d_stride,
                                         const uint32_t* sorted, const uint32_t* key, int64_t N, int64_t C, int64_t R) {
  const int lane = threadIdx.x % 32;
  const int64_t i = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  const int64_t c = (int64_t)blockIdx.y * 32 * kVec + lane * kVec;
  if (i >= N) return;
  const uint32_t k = key[sorted[i]];
  if ((int64_t)k >= R || (i > 0 && key[sorted[i - 1]] == k) || c >= C) return;
  D* row = dtable + (int64_t)k * t_stride + c;
  float acc[kVec];
  load8(row, acc);
  for (int64_t j = i; j < N; j++) {
    const uint32_t n = sorted[j];
    if (key[n] != k) break;
    float d[kVec];
    load8(dout + (int64_t)n * d_stride + c, d);
#pragma unroll
    for (int e = 0; e < kVec; e++) acc[e] = to_f(from_f<D>(acc[e] + d[e]));
  }
  store8(row, acc);
}

// The generic path of the same: DView element by element, lane l the columns l, l + 32, … of the warp's 256.
__global__ void embedding_accumulate_kernel(DView dtable, DView dout, const uint32_t* sorted, const uint32_t* key,
                                            int64_t N, int64_t C, int64_t R) {
  const int lane = threadIdx.x % 32;
  const int64_t i = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  if (i >= N) return;
  const uint32_t k = key[sorted[i]];
  if ((int64_t)k >= R || (i > 0 && key[sorted[i - 1]] == k)) return;
  for (int64_t c = (int64_t)blockIdx.y * 32 * kVec + lane; c < C && c < (int64_t)(blockIdx.y + 1) * 32 * kVec; c += 32)
    for (int64_t j = i; j < N && key[sorted[j]] == k; j++)
      dtable.st(k, c, dtable.ld(k, c) + dout.ld(sorted[j], c));
}

void embedding_forward_cuda(const Tensor& out, const Tensor& ids, const Tensor& table, int64_t row_offset,
                            bool accumulate) {
  const int64_t N = ids.numel(), C = table.dim(1), R = table.dim(0);
  if (N * C == 0) return;
  const CudaContext& ctx = cuda_context();
  const int32_t* id = static_cast<const int32_t*>(ids.data);
  if (C % kVec == 0 && out.dtype == table.dtype && vec_rows_ok(out) && vec_rows_ok(table)) {
    with_dtype(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      embedding_forward_vec<T><<<vec_grid(N * (C / kVec), 256, ctx.sm_count), 256, 0, ctx.stream>>>(
          static_cast<T*>(out.data), out.stride(), id, static_cast<const T*>(table.data), table.stride(), N, C, R,
          row_offset, accumulate);
    });
  } else {
    embedding_forward_kernel<<<blocks_for(N * C, 256), 256, 0, ctx.stream>>>(view_of(out), id, view_of(table), N, C,
                                                                             R, row_offset, accumulate);
  }
  check_launch("embedding_forward");
}

void embedding_backward_cuda(const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t row_offset) {
  const int64_t N = ids.numel(), C = dtable.dim(1), R = dtable.dim(0);
  if (N * C == 0) return;
  if (N > (int64_t)UINT32_MAX / 2 || R >= (int64_t)UINT32_MAX / 2)
    kernel_error(Op::EMBEDDING, "more than 2^31 positions or rows in one embedding backward");
  const CudaContext& ctx = cuda_context();
  cudaStream_t s = ctx.stream;
  const int64_t keys = R + 1, chunk_len = (N + kChunks - 1) / kChunks, chunks = (N + chunk_len - 1) / chunk_len;
  // scratch: key[N], sorted[N], counts[chunks][keys], total[keys], start[keys]
  Scratch scratch((size_t)(2 * N + chunks * keys + 2 * keys) * sizeof(uint32_t));
  uint32_t* key = static_cast<uint32_t*>(scratch.get());
  uint32_t* sorted = key + N;
  uint32_t* counts = sorted + N;
  uint32_t* total = counts + chunks * keys;
  uint32_t* start = total + keys;
  check_cuda(cudaMemsetAsync(counts, 0, (size_t)(chunks * keys) * sizeof(uint32_t), s), "embedding_backward (counts)");
  const int32_t* id = static_cast<const int32_t*>(ids.data);
  embedding_keys_kernel<<<blocks_for(N, 256), 256, 0, s>>>(key, counts, id, N, R, row_offset, chunk_len);
  embedding_chunk_prefix_kernel<<<(unsigned)((keys + 255) / 256), 256, 0, s>>>(counts, total, keys, chunks);
  embedding_key_scan_kernel<<<1, 1024, 0, s>>>(start, total, keys);
  embedding_place_kernel<<<(unsigned)((chunks + 7) / 8), 256, 0, s>>>(sorted, counts, start, key, N, keys, chunk_len,
                                                                       chunks);
  const dim3 grid((unsigned)((N + 7) / 8), (unsigned)((C + 32 * kVec - 1) / (32 * kVec)));
  if (C % kVec == 0 && vec_rows_ok(dtable) && vec_rows_ok(dout)) {
    with_dtype(dtable.dtype, [&](auto dtag) {
      with_dtype(dout.dtype, [&](auto stag) {
        using D = decltype(dtag);
        using S = decltype(stag);
        embedding_accumulate_vec<D, S><<<grid, 256, 0, s>>>(static_cast<D*>(dtable.data), dtable.stride(),
                                                            static_cast<const S*>(dout.data), dout.stride(), sorted,
                                                            key, N, C, R);
      });
    });
  } else {
    embedding_accumulate_kernel<<<grid, 256, 0, s>>>(view_of(dtable), view_of(dout), sorted, key, N, C, R);
  }
  check_launch("embedding_backward");
}

}  // namespace

void register_embedding(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::EMBEDDING_FORWARD>(Device::CUDA, d, embedding_forward_cuda);
    t.add<Kernel::EMBEDDING_BACKWARD>(Device::CUDA, d, embedding_backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
