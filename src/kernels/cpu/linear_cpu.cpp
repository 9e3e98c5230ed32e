// defines: the CPU linear layer (forward, backward) in fp32, on bf16 (gemm_bf16(): oneDNN's bf16 matmul or fp32
//          products of the widened operands, per CPU) and on f16 storage, its registration, bf16_gemm_native() and
//          bf16_gemm_cpu_path().
//
//   fp32: gemm() (gemm/gemm_f32.cpp) straight on the operands.
//   bf16: bf16 operands, fp32 accumulation in gemm_bf16() (oneDNN's matmul where the CPU has AVX512-BF16 or AMX,
//         else fp32 GEMMs of the exactly widened operands: cpu/lowp.h's bf16_gemm_choice()), outputs and activation
//         gradients in bf16 or fp32, weight and bias gradients accumulated in their own dtype (fp32 for a model's
//         fp32 main gradients). With widened products, a weight's fp32 mirror (Tensor::widened) is multiplied as it
//         is, the output gradient is widened once for both backward products, and an output gradient too large to
//         widen whole (the LM head's) goes through the blocks below, as f16 does (kLinearWideBf16BlockElems).
//   f16:  Debian's oneDNN 2.6 has no f16 matmul, and fp16 GEMMs on GPUs (Megatron's) multiply fp16 inputs with fp32
//         accumulation, so here: f16 operand blocks are converted (F16C) into fp32 scratch reused from call to call,
//         multiplied by the fp32 GEMM (oneDNN's AVX-512 matmul), and every f16 result is rounded ONCE from its fp32
//         value, after the bias and (for gradients, which accumulate) its old value are added in fp32.
#include "kernels/cpu/linear_cpu.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp.h"
#include "kernels/dispatch.h"
#include "util/error.h"

namespace lmforge::kernels::cpu {
namespace {

// fp32 scratch in a GrowingBuffer (cpu_common.h says why it is kept across calls) instead of the generic path's
// temporary per operand: in the profile of an f16 step of config A before this file, 11.5 % of the samples were in
// the kernel (page faults, zeroing), against 4.8 % for fp32.
class Scratch {
 public:
  float* get(size_t n) {
    try {
      return static_cast<float*>(buffer_.get(n * sizeof(float)));
    } catch (const std::bad_alloc&) {
      throw Error("linear (f16): cannot allocate " + std::to_string(n * 4) + " bytes of scratch");
    }
  }

 private:
  GrowingBuffer buffer_;
};

// The calling thread's scratch, one buffer per role (GEMMs are issued from outside parallel regions; thread_local
// keeps callers on different threads, such as pipeline stages, apart). `wide` holds the [N, block] output block of
// a forward or the output-gradient block of a backward, never both at once.
struct Slots {
  Scratch x, w, wide, dinp, dweight;
};
Slots& slots() {
  thread_local Slots s;
  return s;
}

// Conversion and rounding passes below this many elements run on the calling thread. Larger than the elementwise
// kernels' kParallelMin: these passes are a few hundred microseconds of memory traffic at most below it, while on a
// loaded machine the barrier ending a parallel region can wait a scheduler time slice (milliseconds) for a
// descheduled thread. Only the LM head's logits and their gradient (millions of elements) are split.
constexpr size_t kConvertParallelMin = size_t(1) << 20;

// A matrix in fp32: its first element and row stride.
struct F32Mat {
  float* p;
  int64_t ld;
};

// The block [r0, r0+rows) × [c0, c0+cols) of a 2-D operand (row stride ld elements) as fp32: the memory itself for
// F32, the operand's fp32 mirror when it has one (Tensor::widened), else converted into `s` (row stride cols).
F32Mat as_f32(const Tensor& t, int64_t r0, int64_t c0, int64_t rows, int64_t cols, Scratch& s) {
  const size_t es = dtype_size(t.dtype);
  const int64_t ld = t.stride();
  char* at = static_cast<char*>(t.data) + (size_t)(r0 * ld + c0) * es;
  if (t.dtype == DType::F32) return {reinterpret_cast<float*>(at), ld};
  if (t.widened != nullptr) return {const_cast<float*>(t.widened) + r0 * ld + c0, ld};  // read only
  float* dst = s.get((size_t)(rows * cols));
#pragma omp parallel for schedule(static) if ((size_t)(rows * cols) >= kConvertParallelMin)
  for (int64_t r = 0; r < rows; r++) row_to_f32(dst + r * cols, at + (size_t)(r * ld) * es, t.dtype, (size_t)cols);
  return {dst, cols};
}

// Where products into the block [r0, r0+rows) × [c0, c0+cols) of a 2-D result go. An F32 result takes them in
// place (beta 1 adds to it; a forward's bias is written first). Otherwise they go to fp32 scratch and finish()
// rounds scratch + bias + (when accumulating) the old value into the result, once per element.
class Target {
 public:
  Target(const Tensor& t, int64_t r0, int64_t c0, int64_t rows, int64_t cols, bool accumulate, const float* bias,
         Scratch& s)
      : t_(t), r0_(r0), c0_(c0), rows_(rows), cols_(cols), accumulate_(accumulate), bias_(bias) {
    if (t.dtype == DType::F32) {
      mat_ = {static_cast<float*>(t.data) + r0 * t.stride() + c0, t.stride()};
      if (bias != nullptr) {
#pragma omp parallel for schedule(static) if ((size_t)(rows * cols) >= kConvertParallelMin)
        for (int64_t r = 0; r < rows; r++) std::copy_n(bias + c0, cols, mat_.p + r * mat_.ld);
      }
      beta_ = accumulate || bias != nullptr ? 1.0f : 0.0f;
      in_place_ = true;
    } else {
      mat_ = {s.get((size_t)(rows * cols)), cols};
    }
  }
  float* p() const { return mat_.p; }
  int ld() const { return (int)mat_.ld; }
  // beta for the next product: the first into scratch overwrites it, later ones (a reduction split over blocks)
  // add to it.
  float next_beta() {
    const float b = beta_;
    beta_ = 1.0f;
    return b;
  }
  void finish() const {
    if (in_place_) return;
    const size_t es = dtype_size(t_.dtype);
    char* base = static_cast<char*>(t_.data);
    const int64_t ld = t_.stride();
    constexpr int64_t kPiece = 1024;
#pragma omp parallel if ((size_t)(rows_ * cols_) >= kConvertParallelMin)
    {
      alignas(64) float old[kPiece];
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; r++) {
        float* v = mat_.p + r * mat_.ld;
        char* dst = base + (size_t)((r0_ + r) * ld + c0_) * es;
        for (int64_t c = 0; c < cols_; c += kPiece) {
          const int64_t n = std::min(kPiece, cols_ - c);
          if (bias_ != nullptr) {
            const float* b = bias_ + c0_ + c;
#pragma omp simd
            for (int64_t i = 0; i < n; i++) v[c + i] += b[i];
          }
          if (accumulate_) {
            row_to_f32(old, dst + (size_t)c * es, t_.dtype, (size_t)n);
#pragma omp simd
            for (int64_t i = 0; i < n; i++) v[c + i] = old[i] + v[c + i];
          }
          row_from_f32(dst + (size_t)c * es, t_.dtype, v + c, (size_t)n);
        }
      }
    }
  }

 private:
  Tensor t_;
  int64_t r0_, c0_, rows_, cols_;
  bool accumulate_;
  const float* bias_;
  F32Mat mat_{};
  float beta_ = 0.0f;
  bool in_place_ = false;
};

// Output columns per block: all of them unless rows × cols exceeds `limit`, else a multiple of 64
// (whole cache lines of f16 and AVX-512 vectors of fp32).
int64_t block_cols(int64_t rows, int64_t cols, int64_t limit) {
  if (rows * cols <= limit) return cols;
  return std::max<int64_t>(64, limit / std::max<int64_t>(rows, 1) / 64 * 64);
}

// The weight's block for output columns [j0, j0+w): rows of W [OC,IC] (OUT_IN) or columns of W [IC,OC] (IN_OUT).
F32Mat weight_block(const Tensor& weight, WeightLayout layout, int64_t j0, int64_t w, int64_t IC, Scratch& s) {
  return layout == WeightLayout::OUT_IN ? as_f32(weight, j0, 0, w, IC, s) : as_f32(weight, 0, j0, IC, w, s);
}

void linear_forward_blocks(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int N,
                           int IC, int OC, WeightLayout layout, int64_t block_elems) {
  Slots& s = slots();
  std::vector<float> b;
  if (bias.present()) {
    b.resize((size_t)OC);
    row_to_f32(b.data(), bias.data, bias.dtype, (size_t)OC);
  }
  const F32Mat x = as_f32(inp, 0, 0, N, IC, s.x);
  const bool out_in = layout == WeightLayout::OUT_IN;
  const int64_t bw = block_cols(N, OC, block_elems);
  for (int64_t j0 = 0; j0 < OC; j0 += bw) {
    const int w = (int)std::min<int64_t>(bw, OC - j0);
    const F32Mat wb = weight_block(weight, layout, j0, w, IC, s.w);
    Target y(out, 0, j0, N, w, false, bias.present() ? b.data() : nullptr, s.wide);
    // out[:, j0:j0+w] = x·Wbᵀ (Wb [w,IC]) or x·Wb (Wb [IC,w]), + b
    gemm(false, out_in, N, w, IC, x.p, (int)x.ld, wb.p, (int)wb.ld, y.next_beta(), y.p(), y.ld());
    y.finish();
  }
}

// Blocks of dout's columns (OC): each is converted once and used by both products; dinp's product sums over the
// blocks in fp32 scratch and is rounded at the end, dweight's block rows (OUT_IN) or columns (IN_OUT) are disjoint.
void linear_backward_blocks(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                            const Tensor& inp, const Tensor& weight, int N, int IC, int OC, WeightLayout layout,
                            int64_t block_elems) {
  Slots& s = slots();
  const bool out_in = layout == WeightLayout::OUT_IN;
  const F32Mat x = dweight.present() ? as_f32(inp, 0, 0, N, IC, s.x) : F32Mat{nullptr, 0};
  std::optional<Target> dx;
  if (dinp.present() && OC > 0) dx.emplace(dinp, 0, 0, N, IC, true, nullptr, s.dinp);  // OC 0: dinp += 0
  const int64_t bw = block_cols(N, OC, block_elems);
  for (int64_t j0 = 0; j0 < OC; j0 += bw) {
    const int w = (int)std::min<int64_t>(bw, OC - j0);
    const F32Mat dy = as_f32(dout, 0, j0, N, w, s.wide);
    if (dx) {  // dinp[N,IC] += dy[N,w]·Wb (Wb [w,IC]) or dy·Wbᵀ (Wb [IC,w])
      const F32Mat wb = weight_block(weight, layout, j0, w, IC, s.w);
      gemm(false, !out_in, N, IC, w, dy.p, (int)dy.ld, wb.p, (int)wb.ld, dx->next_beta(), dx->p(), dx->ld());
    }
    if (dweight.present()) {
      if (out_in) {  // dW[j0:j0+w, :] [w,IC] += dyᵀ·x
        Target g(dweight, j0, 0, w, IC, true, nullptr, s.dweight);
        gemm(true, false, w, IC, N, dy.p, (int)dy.ld, x.p, (int)x.ld, g.next_beta(), g.p(), g.ld());
        g.finish();
      } else {  // dW[:, j0:j0+w] [IC,w] += xᵀ·dy
        Target g(dweight, 0, j0, IC, w, true, nullptr, s.dweight);
        gemm(true, false, IC, w, N, x.p, (int)x.ld, dy.p, (int)dy.ld, g.next_beta(), g.p(), g.ld());
        g.finish();
      }
    }
  }
  if (dx) dx->finish();
  if (dbias.present()) column_sums_lowp(dbias, dout.reshaped({N, OC}));
}

// ---- fp32 ---------------------------------------------------------------------------------------------------------

void linear_forward_gemm(float* out, const float* inp, const float* weight, const float* bias, int N, int IC, int OC,
                    WeightLayout layout) {
  float beta = 0.0f;
  if (bias != nullptr) {
#pragma omp parallel for schedule(static) if ((size_t)N * OC >= kParallelMin)
    for (int n = 0; n < N; n++) std::memcpy(out + (size_t)n * OC, bias, sizeof(float) * OC);
    beta = 1.0f;
  }
  if (layout == WeightLayout::IN_OUT) {
    gemm(false, false, N, OC, IC, inp, IC, weight, OC, beta, out, OC);
  } else {
    gemm(false, true, N, OC, IC, inp, IC, weight, IC, beta, out, OC);
  }
}

void linear_backward_gemm(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IC, int OC, WeightLayout layout) {
  if (layout == WeightLayout::IN_OUT) {
    if (dinp != nullptr) gemm(false, true, N, IC, OC, dout, OC, weight, OC, 1.0f, dinp, IC);  // [N,IC] += [N,OC]·[IC,OC]ᵀ
    if (dweight != nullptr) gemm(true, false, IC, OC, N, inp, IC, dout, OC, 1.0f, dweight, OC);  // [IC,OC] += [N,IC]ᵀ·[N,OC]
  } else {
    if (dinp != nullptr) gemm(false, false, N, IC, OC, dout, OC, weight, IC, 1.0f, dinp, IC);  // [N,IC] += [N,OC]·[OC,IC]
    if (dweight != nullptr) gemm(true, false, OC, IC, N, dout, OC, inp, IC, 1.0f, dweight, IC);  // [OC,IC] += [N,OC]ᵀ·[N,IC]
  }
  if (dbias != nullptr) column_sums(dbias, dout, N, OC);
}

// ---- bf16 ---------------------------------------------------------------------------------------------------------

// An operand as bf16: a BF16 view as it is, an F32 one rounded into `scratch` (what storing it in bf16 would have
// given). Contiguous operands only (ops.cpp checks linear's). The scratch is the calling thread's, kept across calls
// (one per role, below): a bf16 step rounds the generator head's fp32 logit gradient ([B·N, vocab], 37 MB at
// ELECTRA-Small's batch 32) here every step, and a fresh allocation page-faulted all of it each time.
class AsBF16 {
 public:
  AsBF16(const Tensor& t, GrowingBuffer& scratch) {
    if (t.dtype == DType::BF16) {
      p_ = static_cast<const uint16_t*>(t.data);
      return;
    }
    const size_t n = (size_t)t.numel();
    uint16_t* dst;
    try {
      dst = static_cast<uint16_t*>(scratch.get(std::max<size_t>(n, 1) * sizeof(uint16_t)));
    } catch (const std::bad_alloc&) {
      throw Error("linear (bf16): cannot allocate " + std::to_string(n * 2) + " bytes of scratch");
    }
    const float* src = static_cast<const float*>(t.data);
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin * 4)
    for (size_t i = 0; i < n; i++) dst[i] = f32_to_bf16(src[i]);
    p_ = dst;
  }
  const uint16_t* get() const { return p_; }

 private:
  const uint16_t* p_ = nullptr;
};
// The weight as a product's operand: its bf16 values, with the fp32 mirror its owner keeps (Tensor::widened) for
// the widened path to multiply as it is.
Bf16Operand weight_operand(const Tensor& weight, const AsBF16& w, int ld) {
  return {w.get(), ld, weight.dtype == DType::BF16 ? weight.widened : nullptr};
}

struct Bf16Slots {
  GrowingBuffer x, w, dy, dy_wide;
};

// A contiguous bf16 operand widened whole into `scratch` (lowp.h's to_f32_rows: blocks over the team).
const float* widen_whole(const uint16_t* src, size_t n, GrowingBuffer& scratch) {
  float* dst;
  try {
    dst = static_cast<float*>(scratch.get(std::max<size_t>(n, 1) * sizeof(float)));
  } catch (const std::bad_alloc&) {
    throw Error("linear (bf16): cannot allocate " + std::to_string(n * 4) + " bytes of scratch");
  }
  to_f32_rows(dst, src, DType::BF16, 1, (int64_t)n, (int64_t)n);
  return dst;
}
Bf16Slots& bf16_slots() {
  thread_local Bf16Slots s;
  return s;
}

void linear_forward_bf16_gemm(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int N,
                              int IC, int OC, WeightLayout layout) {
  Bf16Slots& s = bf16_slots();
  const AsBF16 x(inp, s.x), w(weight, s.w);
  const AsF32 b(bias, AsF32::IN);
  // out[N,OC] = inp[N,IC]·W (IN_OUT: W [IC,OC]) or inp·Wᵀ (OUT_IN: W [OC,IC]), + b
  const bool in_out = layout == WeightLayout::IN_OUT;
  gemm_bf16(false, !in_out, N, OC, IC, {x.get(), IC}, weight_operand(weight, w, in_out ? OC : IC), false, out.data,
            out.dtype, OC, b);
}

void linear_backward_bf16_gemm(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                               const Tensor& inp, const Tensor& weight, int N, int IC, int OC, WeightLayout layout) {
  Bf16Slots& s = bf16_slots();
  const AsBF16 dy(dout, s.dy);
  const bool in_out = layout == WeightLayout::IN_OUT;
  // The widened path would widen dout once for each of the two products: it is widened once here for both.
  const float* dy_wide = nullptr;
  if (bf16_gemm_choice().path != Bf16GemmChoice::NATIVE && dinp.present() && dweight.present() &&
      (int64_t)N * OC <= kBf16WidenWholeElems)
    dy_wide = widen_whole(dy.get(), (size_t)N * OC, s.dy_wide);
  const Bf16Operand dy_op{dy.get(), OC, dy_wide};
  if (dinp.present()) {
    // dinp[N,IC] += dout[N,OC]·Wᵀ (W [IC,OC]) or dout·W (W [OC,IC])
    const AsBF16 w(weight, s.w);
    gemm_bf16(false, in_out, N, IC, OC, dy_op, weight_operand(weight, w, in_out ? OC : IC), true, dinp.data,
              dinp.dtype, IC, nullptr);
  }
  if (dweight.present()) {
    const AsBF16 x(inp, s.x);
    if (in_out)  // dW[IC,OC] += inpᵀ·dout
      gemm_bf16(true, false, IC, OC, N, {x.get(), IC}, dy_op, true, dweight.data, dweight.dtype, OC, nullptr);
    else  // dW[OC,IC] += doutᵀ·inp
      gemm_bf16(true, false, OC, IC, N, dy_op, {x.get(), IC}, true, dweight.data, dweight.dtype, IC, nullptr);
  }
  if (dbias.present()) {
    // A bf16 output gradient already widened: the same sums of the same values in the same order (column_sums and
    // column_sums_lowp walk the rows alike) without converting it again, row by row, for the columns' blocks.
    if (dy_wide != nullptr && dout.dtype == DType::BF16 && dbias.dtype == DType::F32 && dbias.contiguous())
      column_sums(dbias.f32(), dy_wide, N, OC);
    else
      column_sums_lowp(dbias, dout.reshaped({N, OC}));
  }
}

// ---- entry points ---------------------------------------------------------------------------------------------------

// N, IC, OC of checked operands (ops.cpp): inp [N,IC], weight [IC,OC] (IN_OUT) or [OC,IC] (OUT_IN).
struct LinearDims {
  int N, IC, OC;
};
LinearDims linear_dims(const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  return {(int)inp.rows(), (int)inp.dim(-1), (int)(layout == WeightLayout::IN_OUT ? weight.dim(1) : weight.dim(0))};
}

// fp32 (and the generic path of any dtype) on operands seen through AsF32.
void linear_forward_f32(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                        WeightLayout layout) {
  const LinearDims d = linear_dims(inp, weight, layout);
  const AsF32 o(out, AsF32::OUT), x(inp, AsF32::IN), w(weight, AsF32::IN), b(bias, AsF32::IN);
  linear_forward_gemm(o, x, w, b, d.N, d.IC, d.OC, layout);
}

void linear_backward_f32(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                         const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  const LinearDims d = linear_dims(inp, weight, layout);
  const AsF32 dx(dinp, AsF32::INOUT), dw(dweight, AsF32::INOUT), db(dbias, AsF32::INOUT), dy(dout, AsF32::IN),
      x(inp, AsF32::IN), w(weight, AsF32::IN);
  linear_backward_gemm(dx, dw, db, dy, x, w, d.N, d.IC, d.OC, layout);
}

void linear_forward_bf16(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                         WeightLayout layout) {
  const LinearDims d = linear_dims(inp, weight, layout);
  linear_forward_bf16_gemm(out, inp, weight, bias, d.N, d.IC, d.OC, layout);
}

void linear_backward_bf16(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                          const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  const LinearDims d = linear_dims(inp, weight, layout);
  // (Only bf16 operands: the blocks would take an fp32 one, such as ELECTRA's generator logit gradient, as it is,
  // where a bf16 layer multiplies it rounded to bf16; AsBF16 below rounds it.)
  if (bf16_gemm_choice().path != Bf16GemmChoice::NATIVE && (int64_t)d.N * d.OC > kBf16WidenWholeElems &&
      dout.dtype == DType::BF16 && inp.dtype == DType::BF16 && weight.dtype == DType::BF16)
    return linear_backward_blocks(dinp, dweight, dbias, dout, inp, weight, d.N, d.IC, d.OC, layout,
                                  kLinearWideBf16BlockElems);
  linear_backward_bf16_gemm(dinp, dweight, dbias, dout, inp, weight, d.N, d.IC, d.OC, layout);
}

void linear_forward_f16(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                        WeightLayout layout) {
  const LinearDims d = linear_dims(inp, weight, layout);
  linear_forward_blocks(out, inp, weight, bias, d.N, d.IC, d.OC, layout, kLinearF16BlockElems);
}

void linear_backward_f16(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                         const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  const LinearDims d = linear_dims(inp, weight, layout);
  linear_backward_blocks(dinp, dweight, dbias, dout, inp, weight, d.N, d.IC, d.OC, layout, kLinearF16BlockElems);
}

}  // namespace

void register_linear(KernelTable& t) {
  t.add<Kernel::LINEAR_FORWARD>(Device::CPU, DType::F32, linear_forward_f32);
  t.add<Kernel::LINEAR_BACKWARD>(Device::CPU, DType::F32, linear_backward_f32);
  t.add<Kernel::LINEAR_FORWARD>(Device::CPU, DType::BF16, linear_forward_bf16);
  t.add<Kernel::LINEAR_BACKWARD>(Device::CPU, DType::BF16, linear_backward_bf16);
  t.add<Kernel::LINEAR_FORWARD>(Device::CPU, DType::F16, linear_forward_f16);
  t.add<Kernel::LINEAR_BACKWARD>(Device::CPU, DType::F16, linear_backward_f16);
}

}  // namespace lmforge::kernels::cpu

namespace lmforge::kernels {

const char* const kWidenedWeightsNote = "the weights widened once a step into an fp32 mirror, 4 more bytes a parameter";
// Why the path runs at about fp32's speed (bench/train/RESULTS.md, GPT configs A and B against lmforge's fp32:
// 0.93-0.99x on a Zen 5 told to act without AVX512-BF16, 0.95-1.10x on an AVX2 EPYC, 2 threads): its products are
// fp32 GEMMs, every other op does fp32's arithmetic plus the conversions, and AdamW writes the bf16 copy and its
// mirror besides the fp32 state; only the memory-bound passes gain from the halved activations.
const char* const kWidenedSpeedNote =
    "on such a CPU --bf16 is fp32 arithmetic plus conversions: expect about fp32's speed (it halves the "
    "activations' memory, not the step's time)";

bool bf16_gemm_native() { return cpu::bf16_gemm_choice().path == cpu::Bf16GemmChoice::NATIVE; }

std::string bf16_gemm_cpu_path() {
  const cpu::Bf16GemmChoice& c = cpu::bf16_gemm_choice();
  if (c.path == cpu::Bf16GemmChoice::NATIVE) return "oneDNN's bf16 matmul (" + c.why + ")";
  return "fp32 products of widened bf16 operands (" + c.why + "); " + kWidenedWeightsNote + "; " + kWidenedSpeedNote;
}

}  // namespace lmforge::kernels
