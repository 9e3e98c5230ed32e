// defines: the CPU embedding lookup and its scatter-add gradient in fp32 and on bf16 / f16 storage, and their
//          registration
#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

// ---- fp32 ---------------------------------------------------------------------------------------------------------

void embedding_forward_rows(float* out, const int32_t* ids, const float* table, int64_t rows, int64_t row_offset,
                            int N, int C, bool accumulate) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= kParallelMin)
  for (int n = 0; n < N; n++) {
    float* o = out + (size_t)n * C;
    const int64_t r = (int64_t)ids[n] - row_offset;
    if (r < 0 || r >= rows) {
      if (!accumulate) std::memset(o, 0, sizeof(float) * (size_t)C);
      continue;
    }
    const float* e = table + (size_t)r * C;
    if (accumulate) {
#pragma omp simd
      for (int c = 0; c < C; c++) o[c] += e[c];
    } else {
      std::memcpy(o, e, sizeof(float) * (size_t)C);
    }
  }
}

void embedding_backward_rows(float* dtable, const float* dout, const int32_t* ids, int64_t rows, int64_t row_offset,
                             int N, int C) {
  // Ids may repeat, so the scatter-add is split over channel blocks: each thread owns columns [c0,c1) of every row
  // and walks n in ascending order, so every element's sum has the same order on any thread count.
  const int block = 64;
  const int nblocks = (C + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= kParallelMin)
  for (int k = 0; k < nblocks; k++) {
    const int c0 = k * block, c1 = c0 + block < C ? c0 + block : C;
    for (int n = 0; n < N; n++) {
      const int64_t r = (int64_t)ids[n] - row_offset;
      if (r < 0 || r >= rows) continue;
      float* dw = dtable + (size_t)r * C;
      const float* d = dout + (size_t)n * C;
#pragma omp simd
      for (int c = c0; c < c1; c++) dw[c] += d[c];
    }
  }
}

void embedding_forward_f32(const Tensor& out, const Tensor& ids, const Tensor& table, int64_t row_offset,
                           bool accumulate) {
  const AsF32 o(out, accumulate ? AsF32::INOUT : AsF32::OUT), tb(table, AsF32::IN);
  embedding_forward_rows(o, id_data(ids), tb, table.dim(0), row_offset, (int)out.rows(), (int)out.dim(-1),
                         accumulate);
}

void embedding_backward_f32(const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t row_offset) {
  const AsF32 dt(dtable, AsF32::INOUT), d(dout, AsF32::IN);
  embedding_backward_rows(dt, d, id_data(ids), dtable.dim(0), row_offset, (int)dout.rows(), (int)dout.dim(-1));
}

// ---- bf16 / f16 storage -------------------------------------------------------------------------------------------

void embedding_forward_lowp(const Tensor& out, const Tensor& ids_, const Tensor& table, int64_t row_offset,
                            bool accumulate) {
  const Ref o(out), tb(table);
  const int32_t* ids = id_data(ids_);
  const int64_t N = out.rows(), C = out.dim(-1), rows = table.dim(0);
  for_rows(N, C, (size_t)(2 * C), [&](int64_t n, float* s) {
    const int64_t r = (int64_t)ids[n] - row_offset;
    const bool inside = r >= 0 && r < rows;
    if (!inside && !accumulate) {
      std::memset(o.at(n, 0), 0, (size_t)C * o.es);
      return;
    }
    if (!inside) return;
    const float* e = tb.load(r, 0, C, s);
    float* y = accumulate ? o.load(n, 0, C, s + C) : o.target(n, 0, s + C);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) y[c] = accumulate ? y[c] + e[c] : e[c];
    o.store(n, 0, C, y);
  });
}

// Scatter-add as the fp32 kernel: threads own channel blocks and walk n ascending (deterministic on any team).
void embedding_backward_lowp(const Tensor& dtable, const Tensor& dout, const Tensor& ids_, int64_t row_offset) {
  const Ref dt(dtable), d(dout);
  const int32_t* ids = id_data(ids_);
  const int64_t N = dout.rows(), C = dout.dim(-1), rows = dtable.dim(0);
  const int64_t block = 64, nblocks = (C + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)(N * C) >= kParallelMin)
  for (int64_t k = 0; k < nblocks; k++) {
    const int64_t c0 = k * block, w = std::min(block, C - c0);
    float gs[64], ws[64];
    for (int64_t n = 0; n < N; n++) {
      const int64_t r = (int64_t)ids[n] - row_offset;
      if (r < 0 || r >= rows) continue;
      const float* g = d.load(n, c0, w, gs);
      float* acc = dt.load(r, c0, w, ws);
#pragma omp simd
      for (int64_t c = 0; c < w; c++) acc[c] += g[c];
      dt.store(r, c0, w, acc);
    }
  }
}

}  // namespace

void register_embedding(KernelTable& t) {
  t.add<Kernel::EMBEDDING_FORWARD>(Device::CPU, DType::F32, embedding_forward_f32);
  t.add<Kernel::EMBEDDING_BACKWARD>(Device::CPU, DType::F32, embedding_backward_f32);
  for (DType lowp : {DType::BF16, DType::F16}) {
    t.add<Kernel::EMBEDDING_FORWARD>(Device::CPU, lowp, embedding_forward_lowp);
    t.add<Kernel::EMBEDDING_BACKWARD>(Device::CPU, lowp, embedding_backward_lowp);
  }
}

}  // namespace lmforge::kernels::cpu
