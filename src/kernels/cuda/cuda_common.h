// defines: what the CUDA backend's files share on the host: HostStaging (pinned memory for the tables the
//          multi-tensor ops upload), CudaContext (the stream, cuBLASLt handle and workspace every op uses), cuda_context(), check_cuda(), check_launch(), blocks_for(), and each op file's
//          registration function (called by cuda::register_kernels() in backend_cuda.cpp). Private to the kernels
//          module; C++17 (nvcc 11.8 compiles the .cu files that include it).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kernels/ops.h"

namespace lmforge::kernels {
class KernelTable;
}

namespace lmforge::kernels::cuda {

struct GemmState;  // linear_cuda.cu
// Pinned host memory through which small host-to-device copies go: the multi-tensor ops' run tables
// (optim_cuda.cu) and the Backend's copy_to_device up to kMaxBytes (targets, masks, the loss's statistics each
// micro-batch). One cudaMemcpyAsync from a page-locked slot, queued on the stream like a kernel: from pageable
// memory the driver may instead synchronise with the stream to stage the copy, a hidden wait for the GPU per
// upload. A slot is refilled only after the copy that last read it has run (its event), so the host waits only
// when it is a whole ring of uploads ahead of the GPU. Slots grow (and stay) as large as the largest copy seen.
class HostStaging {
 public:
  HostStaging() = default;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  // The slots live as long as the process (the backend is never torn down before exit, when the driver frees them).
  ~HostStaging() = default;
  static constexpr size_t kMaxBytes = size_t(1) << 20;  // larger copies (weights, checkpoints) go direct
  // Queues dst_device[0, bytes) = src[0, bytes) on `stream`; src may be reused as soon as this returns.
  void upload(void* dst_device, const void* src, size_t bytes, cudaStream_t stream);

 private:
  struct Slot {
    void* host = nullptr;
    size_t capacity = 0;
    cudaEvent_t done = nullptr;  // recorded after the copy that last read the slot
  };
  static constexpr int kSlots = 32;
  std::mutex mutex_;
  Slot slots_[kSlots];
  int next_ = 0;
};

// One device, one stream: every op is queued on `stream` in call order, so ops see each other's results without
// host synchronisation; only copies to the host and results returned to the host (sum_squares, count_nonfinite,
// lamb_moments) wait for it.
struct CudaContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;  // cuBLASLt's scratch (32 MiB: Hopper's kernels want it)
  size_t workspace_bytes = 0;
  int sm_count = 0;
  // LMFORGE_CUDA_GEMM=fallback: every linear product through the fallback kernel (linear_cuda.cu) instead of
  // cuBLASLt, so the GPU check can test the path cuBLASLt's refusals take.
  bool gemm_fallback = false;
  // linear_cuda.cu's state, made on its first GEMM: cuBLASLt plans (descriptors and the heuristic's algorithm) by
  // shape, dtypes, transposes, alignments and epilogue, and the reused buffers of operands rounded to bf16/f16.
  std::shared_ptr<GemmState> gemm;
  HostStaging* staging = nullptr;  // owned by the backend
  // Which attention kernels run first (attention_cuda.cu). Unset: the tensor-core kernels (attention_mma_cuda.cu)
  // where they apply, then the WMMA flash kernels (attention_flash_cuda.cu), then the row kernels;
  // LMFORGE_CUDA_ATTENTION=flash starts at the flash kernels, =rows takes the row kernels only, so the GPU check
  // runs every path over the same op cases.
  enum class AttentionKernels { TENSOR_CORES, FLASH, ROWS };
  AttentionKernels attention = AttentionKernels::TENSOR_CORES;
  int max_smem_optin = 0;  // shared memory a block may opt in to (bytes; the flash kernels' limit)
};

// The CUDA backend's context; lmforge::Error naming the reason (no driver, no device) when there is none.
CudaContext& cuda_context();

// lmforge::Error "CUDA <what>: <error string> (<code>)" unless err is cudaSuccess.
void check_cuda(cudaError_t err, const char* what);
void check_cublas(cublasStatus_t status, const char* what);
// After a kernel launch: a bad configuration (or an earlier asynchronous fault) as an lmforge::Error naming the op.
void check_launch(const char* what);

// Blocks of `threads` covering n items, capped at what a grid-stride loop needs to fill the GPU.
inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

// Device memory for one op's scratch, stream-ordered: allocated and freed on the op's stream, so it is reused only
// by work queued after the kernels that use it.
class Scratch {
 public:
  explicit Scratch(size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

// acc[c] += Σ_n x[n,c] over the rows of x [N,C] (any floating dtypes; f32 sums; bias_add_cuda.cu). Deterministic:
// fixed chunks of rows summed in order, then the chunks in order (no atomics).
void column_sums(const Tensor& acc, const Tensor& x);

// The op files' registrations.
void register_embedding(KernelTable& t);
void register_layernorm(KernelTable& t);
void register_linear(KernelTable& t);
void register_bias_add(KernelTable& t);
void register_add(KernelTable& t);
void register_gelu(KernelTable& t);
void register_tanh(KernelTable& t);
void register_dropout(KernelTable& t);
void register_attention(KernelTable& t);
void register_copy(KernelTable& t);
void register_crossentropy(KernelTable& t);
void register_optim(KernelTable& t);

}  // namespace lmforge::kernels::cuda
