// defines: the CUDA linear layer (ops.h): GEMMs through cuBLASLt with fp32 accumulation (CUBLAS_COMPUTE_32F: no
//          TF32 for fp32, tensor cores for bf16/f16), the bias through cuBLASLt's bias epilogue (or, where it has no
//          algorithm for it, as the GEMM's C operand; either way added in fp32 before the one rounding of the
//          output), dbias by deterministic column sums; GemmState (plans cached per configuration, reused rounding
//          buffers). Every dtype.
//
// Row-major to cuBLAS's column-major: a row-major X [R,C] is the column-major Xᵀ [C,R] with leading dimension C
// (its row stride), so a row-major product out = inp·op(W) is computed as outᵀ = op(W)ᵀ·inpᵀ with the operands
// swapped. The four products (m, n, k; which operand is transposed) are written out at each call below.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// The largest power of two (up to 256) dividing the address and the leading dimension's bytes: what cuBLASLt's
// algorithm choice must assume (its default assumes 256-byte alignment, and a slice0 view at an odd row is not).
uint32_t alignment(const void* p, int64_t ld, size_t elem) {
  uint64_t a = reinterpret_cast<uintptr_t>(p) | (uint64_t)ld * elem | 256u;
  return (uint32_t)(a & (~a + 1));
}

// RAII for cuBLASLt's descriptors.
struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  Layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld) {
    check_cublas(cublasLtMatrixLayoutCreate(&h, t, (uint64_t)rows, (uint64_t)cols, ld), "matrix layout");
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(h); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};
struct Desc {
  cublasLtMatmulDesc_t h = nullptr;
  Desc() { check_cublas(cublasLtMatmulDescCreate(&h, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor"); }
  ~Desc() { cublasLtMatmulDescDestroy(h); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
};
struct Pref {
  cublasLtMatmulPreference_t h = nullptr;
  Pref() { check_cublas(cublasLtMatmulPreferenceCreate(&h), "matmul preference"); }
  ~Pref() { cublasLtMatmulPreferenceDestroy(h); }
};

// One GEMM configuration's descriptors and the heuristic's answer, made once (a training step repeats the same
// dozen shapes; building descriptors and asking the heuristic costs tens of microseconds of host time per call).
struct Plan {
  Desc desc;
  std::unique_ptr<Layout> a, b, c;
  cublasLtMatmulHeuristicResult_t result{};
  bool found = false;
};

// What decides a plan: transposes, m, n, k, leading dimensions, dtypes, the operands' alignments, the epilogue.
using PlanKey = std::array<int64_t, 14>;

}  // namespace

// linear_cuda.cu's part of the CUDA context (cuda_common.h): plans by key, and device buffers reused across calls
// for operands rounded to the op's dtype (slot per role, grown as needed; stream-ordered, so a buffer is rewritten
// only by work queued after the GEMM that read it).
struct GemmState {
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  struct Buffer {
    void* p = nullptr;
    size_t bytes = 0;
  };
  Buffer slots[4];
  ~GemmState() {
    for (Buffer& b : slots)
      if (b.p) cudaFree(b.p);  // at exit the runtime may be gone: nothing to report
  }
  void* slot(int i, size_t bytes, cudaStream_t s) {
    Buffer& b = slots[i];
    if (b.bytes < bytes) {
      if (b.p) check_cuda(cudaFreeAsync(b.p, s), "cudaFreeAsync (linear operand buffer)");
      b.p = nullptr, b.bytes = 0;
      check_cuda(cudaMallocAsync(&b.p, bytes, s), "cudaMallocAsync (linear operand buffer)");
      b.bytes = bytes;
    }
    return b.p;
  }
};

namespace {

GemmState& gemm_state() {
  CudaContext& ctx = cuda_context();
  if (!ctx.gemm) ctx.gemm = std::make_shared<GemmState>();
  return *ctx.gemm;
}

// The fallback for products cuBLASLt has no algorithm for (it reports none for some small, oddly aligned bf16/f16
// shapes): one thread per element of column-major C[m,n] = op(A)·op(B) + beta·C, an fp32 sum over k in order.
__global__ void gemm_fallback_kernel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, DView A, int64_t lda, DView B,
                                     int64_t ldb, DView C, int64_t ldc, float beta) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < m * n; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e % m, j = e / m;
    float s = 0.0f;
    for (int64_t l = 0; l < k; l++)
      s += A.ld(ta ? i * lda + l : l * lda + i) * B.ld(tb ? l * ldb + j : j * ldb + l);
    C.st(j * ldc + i, beta != 0.0f ? s + beta * C.ld(j * ldc + i) : s);
  }
}

// The plan of one configuration, made and cached on first use. `bias` (CUBLASLT_EPILOGUE_BIAS: a vector of m
// values of C's dtype added to every column in fp32 before the one rounding of D) only decides the epilogue; its
// pointer is set per call.
Plan& plan_for(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* A, int64_t lda, const void* B,
               int64_t ldb, DType ab, const void* C, DType c, int64_t ldc, bool bias) {
  CudaContext& ctx = cuda_context();
  const uint32_t aa = alignment(A, lda, dtype_size(ab)), ab_ = alignment(B, ldb, dtype_size(ab)),
                 ac = alignment(C, ldc, dtype_size(c));
  const PlanKey key{ta, tb, m, n, k, lda, ldb, ldc, (int64_t)ab, (int64_t)c, aa, ab_, ac, bias};
  GemmState& st = gemm_state();
  std::unique_ptr<Plan>& slot = st.plans[key];
  if (slot) return *slot;
  auto plan = std::make_unique<Plan>();
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDesc_t desc = plan->desc.h;
  check_cublas(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "transa");
  check_cublas(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "transb");
  if (bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bt = cuda_type(c);
    check_cublas(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
    check_cublas(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
                 "bias dtype");
  }
  plan->a = std::make_unique<Layout>(cuda_type(ab), ta ? k : m, ta ? m : k, lda);
  plan->b = std::make_unique<Layout>(cuda_type(ab), tb ? n : k, tb ? k : n, ldb);
  plan->c = std::make_unique<Layout>(cuda_type(c), m, n, ldc);
  Pref pref;
  const uint64_t ws = ctx.workspace_bytes;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
               "workspace preference");
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa),
               "alignment A");
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab_, sizeof ab_),
               "alignment B");
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac),
               "alignment C");
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof ac),
               "alignment D");
  int found = 0;
  // NOT_SUPPORTED (also for an epilogue these types do not allow): no algorithm, like found == 0.
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc, plan->a->h, plan->b->h, plan->c->h,
                                                                  plan->c->h, pref.h, 1, &plan->result, &found);
  if (heuristic != CUBLAS_STATUS_NOT_SUPPORTED) check_cublas(heuristic, "algorithm heuristic");
  plan->found = heuristic == CUBLAS_STATUS_SUCCESS && found > 0;
  slot = std::move(plan);
  return *slot;
}

// Column-major C[m,n] = op(A)[m,k]·op(B)[k,n] + beta·C (+ bias[i] on every column with `bias`, a device vector of
// m values of C's dtype, 16-byte aligned), A and B of type ab, C of type c; fp32 accumulation. Returns false, doing
// nothing, when a bias was asked for and cuBLASLt has no algorithm with the bias epilogue (the caller adds it as C).
bool gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* A, int64_t lda, const void* B, int64_t ldb,
          DType ab, void* C, DType c, int64_t ldc, float beta, const void* bias = nullptr) {
  if (m == 0 || n == 0) return true;
  CudaContext& ctx = cuda_context();
  if (bias && (ctx.gemm_fallback || k == 0)) return false;
  if (k == 0) {  // an empty sum: C = beta·C
    if (beta == 0.0f)
      check_cuda(cudaMemset2DAsync(C, (size_t)ldc * dtype_size(c), 0, (size_t)m * dtype_size(c), (size_t)n, ctx.stream),
                 "linear (empty product)");
    return true;
  }
  Plan* plan = ctx.gemm_fallback ? nullptr : &plan_for(ta, tb, m, n, k, A, lda, B, ldb, ab, C, c, ldc, bias != nullptr);
  if (plan == nullptr || !plan->found) {
    if (bias) return false;
    const DView a{const_cast<void*>(A), ab, 0, 0}, b{const_cast<void*>(B), ab, 0, 0}, cc{C, c, 0, 0};
    gemm_fallback_kernel<<<blocks_for(m * n, 128), 128, 0, ctx.stream>>>(ta, tb, m, n, k, a, lda, b, ldb, cc, ldc,
                                                                          beta);
    check_launch("linear (fallback GEMM)");
    return true;
  }
  if (bias)
    check_cublas(cublasLtMatmulDescSetAttribute(plan->desc.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                 "bias pointer");
  const float alpha = 1.0f;
  check_cublas(cublasLtMatmul(ctx.lt, plan->desc.h, &alpha, A, plan->a->h, B, plan->b->h, &beta, C, plan->c->h, C,
                              plan->c->h, &plan->result.algo, ctx.workspace, ctx.workspace_bytes, ctx.stream),
               "matmul");
  return true;
}

// Bytes: 2·n read + 2·n written (bf16), at most the size of the wte table (38.6M values: 0.23 GB, ~77 µs at 3 TB/s).
__global__ void convert_kernel(DView dst, DView src, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    dst.st(i, src.ld(i));
}

// out[r, c] = bias[c]: the C operand of out = inp·W + bias (bias rounded to out's dtype first), where cuBLASLt's
// bias epilogue cannot be used. Bytes: N·OC written (GPT-2's QKV: 16384·2304·2 = 75 MB, 25 µs at 3 TB/s).
__global__ void broadcast_rows_kernel(DView out, DView bias, int64_t n, int64_t C) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out.st(i, bias.ld(i % C));
}

// Slots of GemmState's buffers, by role in one op call (operands alive at the same time take different slots).
enum Slot { kInput = 0, kWeight = 1, kGrad = 2, kBias = 3 };

// A GEMM operand in the op's dtype: the tensor itself, or (an fp32 operand of a bf16/f16 op, as fp32 main weights
// are) a contiguous copy rounded to that dtype, as the CPU rounds it, in the context's buffer of its slot.
struct Operand {
  const void* p;
  int64_t ld;
  Operand(const Tensor& t, DType op_dtype, Slot slot) : p(t.data), ld(t.stride()) {
    if (t.dtype == op_dtype) return;
    if (!t.contiguous()) kernel_error(Op::LINEAR, "strided fp32 operand of a low-precision linear: " + t.describe());
    const int64_t n = t.numel();
    cudaStream_t s = cuda_context().stream;
    void* buf = gemm_state().slot(slot, (size_t)n * dtype_size(op_dtype), s);
    const Tensor dst = make_view(buf, op_dtype, {n}, Device::CUDA);
    if (n > 0) {
      convert_kernel<<<blocks_for(n, 256), 256, 0, s>>>(view_of(dst), view_of(t), n);
      check_launch("linear (operand rounding)");
    }
    p = buf;
    ld = t.dim(-1);
  }
};

DType op_dtype(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->present() && t->dtype != DType::F32) return t->dtype;
  return DType::F32;
}

void linear_forward_cuda(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                         WeightLayout layout) {
  const int64_t N = inp.rows(), IC = inp.dim(-1), OC = out.dim(-1);
  const DType d = op_dtype({&out, &inp, &weight, &bias});
  const Operand x(inp, d, kInput), w(weight, d, kWeight);
  // outᵀ [OC,N] = op(W)ᵀ·inpᵀ: IN_OUT's row-major W [IC,OC] is column-major [OC,IC] (no transpose); OUT_IN's
  // W [OC,IC] is column-major [IC,OC] (transposed). k = IC.
  const bool ta = layout == WeightLayout::OUT_IN;
  if (bias.present() && N * OC > 0) {
    // The bias as cuBLASLt's epilogue: rounded to out's dtype first (a copy when it is of another dtype, or not
    // 16-byte aligned), then added in fp32 to each product before the one rounding — what the C operand with
    // beta = 1 computes, without writing and reading C.
    const void* b = bias.data;
    if (bias.dtype != out.dtype || !bias.contiguous() || reinterpret_cast<uintptr_t>(b) % 16 != 0) {
      cudaStream_t s = cuda_context().stream;
      void* buf = gemm_state().slot(kBias, (size_t)OC * dtype_size(out.dtype), s);
      convert_kernel<<<blocks_for(OC, 256), 256, 0, s>>>(view_of(make_view(buf, out.dtype, {OC}, Device::CUDA)),
                                                         view_of(bias), OC);
      check_launch("linear_forward (bias rounding)");
      b = buf;
    }
    if (gemm(ta, false, OC, N, IC, w.p, w.ld, x.p, x.ld, d, out.data, out.dtype, OC, 0.0f, b)) return;
    broadcast_rows_kernel<<<blocks_for(N * OC, 256), 256, 0, cuda_context().stream>>>(view_of(out), view_of(bias),
                                                                                      N * OC, OC);
    check_launch("linear_forward (bias)");
  }
  gemm(ta, false, OC, N, IC, w.p, w.ld, x.p, x.ld, d, out.data, out.dtype, OC, bias.present() ? 1.0f : 0.0f);
}

void linear_backward_cuda(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                          const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  const int64_t N = inp.rows(), IC = inp.dim(-1), OC = dout.dim(-1);
  const DType d = op_dtype({&dinp, &dweight, &dbias, &dout, &inp, &weight});
  const Operand g(dout, d, kGrad);
  if (dinp.present()) {
    // dinpᵀ [IC,N] += Wᵀ-or-W · doutᵀ: IN_OUT (dinp = dout·Wᵀ) takes W's column-major [OC,IC] transposed;
    // OUT_IN (dinp = dout·W) its column-major [IC,OC] as is. k = OC.
    const Operand w(weight, d, kWeight);
    gemm(layout == WeightLayout::IN_OUT, false, IC, N, OC, w.p, w.ld, g.p, g.ld, d, dinp.data, dinp.dtype, IC, 1.0f);
  }
  if (dweight.present()) {
    const Operand x(inp, d, kInput);
    if (layout == WeightLayout::IN_OUT)  // dW [IC,OC] += inpᵀ·dout:  dWᵀ [OC,IC] = doutᵀ [OC,N] · inp [N,IC]
      gemm(false, true, OC, IC, N, g.p, g.ld, x.p, x.ld, d, dweight.data, dweight.dtype, OC, 1.0f);
    else  // dW [OC,IC] += doutᵀ·inp:  dWᵀ [IC,OC] = inpᵀ [IC,N] · dout [N,OC]
      gemm(false, true, IC, OC, N, x.p, x.ld, g.p, g.ld, d, dweight.data, dweight.dtype, IC, 1.0f);
  }
  if (dbias.present()) column_sums(dbias, dout);
}

}  // namespace

void register_linear(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::LINEAR_FORWARD>(Device::CUDA, d, linear_forward_cuda);
    t.add<Kernel::LINEAR_BACKWARD>(Device::CUDA, d, linear_backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
