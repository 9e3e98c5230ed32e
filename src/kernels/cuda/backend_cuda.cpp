// defines: the CUDA Backend (one visible GPU — the local rank's — one stream, a stream-ordered memory pool,
//          cuBLASLt), cuda::cuda_backend(), cuda_context(), local_rank_device(), the error checks of cuda_common.h,
//          and cuda::register_kernels() (the CUDA entry points in the dispatch table, one registration per op file)
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/cublaslt_library.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_choice.h"
#include "kernels/dispatch.h"
#include "util/error.h"

namespace lmforge::kernels::cuda {

void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  throw Error(std::string("CUDA ") + what + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + " = " +
              std::to_string((int)err) + ")");
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string("cuBLASLt ") + what + ": status " + std::to_string((int)status) +
              " (cublasStatus_t; 7 = invalid value, 15 = not supported, 13 = execution failed)");
}

void check_launch(const char* what) { check_cuda(cudaGetLastError(), what); }

void HostStaging::upload(void* dst_device, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % kSlots;
  if (slot.done == nullptr)
    check_cuda(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming), "cudaEventCreate (upload staging)");
  else
    check_cuda(cudaEventSynchronize(slot.done), "upload staging (wait for the slot's last copy)");
  if (slot.capacity < bytes) {
    if (slot.host != nullptr) check_cuda(cudaFreeHost(slot.host), "cudaFreeHost (upload staging)");
    slot.host = nullptr;
    slot.capacity = 0;
    check_cuda(cudaMallocHost(&slot.host, bytes), "cudaMallocHost (upload staging)");
    slot.capacity = bytes;
  }
  std::memcpy(slot.host, src, bytes);
  check_cuda(cudaMemcpyAsync(dst_device, slot.host, bytes, cudaMemcpyHostToDevice, stream),
             "copy to device (through pinned staging)");
  check_cuda(cudaEventRecord(slot.done, stream), "cudaEventRecord (upload staging)");
}

Scratch::Scratch(size_t bytes) {
  check_cuda(cudaMallocAsync(&p_, bytes == 0 ? 1 : bytes, cuda_context().stream), "cudaMallocAsync (op scratch)");
}
Scratch::~Scratch() { cudaFreeAsync(p_, cuda_context().stream); }

namespace {

// Why no CUDA device can be used, as a sentence for `--device cuda` and the skipped GPU tests.
std::string no_device_reason(cudaError_t err, int count) {
  // CUDA 11's cudaRuntimeGetVersion fails without a driver (13's answers): the version compiled in, then.
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess || runtime == 0) runtime = CUDART_VERSION;
  const std::string built = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  if (err == cudaErrorInsufficientDriver)
    return "no CUDA device or driver found: no NVIDIA driver is loaded, or it is older than the CUDA " + built +
           " runtime lmforge was built with (cudaGetDeviceCount: " + cudaGetErrorString(err) + ")";
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0))
    return "no CUDA device found: the NVIDIA driver sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
  return std::string("no CUDA device usable: cudaGetDeviceCount: ") + cudaGetErrorString(err) + " (" +
         cudaGetErrorName(err) + ")";
}

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      cudaGetLastError();  // clear the sticky-free error so a later call reports afresh
      throw Error(no_device_reason(err, count));
    }
    count_ = count;
    device_ = local_rank_device(count, &device_source_);
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    check_cuda(cudaGetDeviceProperties(&props_, device_), "cudaGetDeviceProperties");
    if (props_.major < 8)
      throw Error(std::string("CUDA device ") + props_.name + " has compute capability " + std::to_string(props_.major) +
                  "." + std::to_string(props_.minor) + "; lmforge's CUDA kernels are built for sm_80 and sm_90");
    ctx_.sm_count = props_.multiProcessorCount;
    ctx_.staging = &staging_;
    check_cuda(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    // cuBLASLt is loaded here, once a GPU is found, not at process start (kernels/cuda/cublaslt_library.h).
    require_cublaslt();
    check_cublas(cublasLtCreate(&ctx_.lt), "cublasLtCreate");
    ctx_.workspace_bytes = size_t(32) << 20;
    check_cuda(cudaMalloc(&ctx_.workspace, ctx_.workspace_bytes), "cudaMalloc of the cuBLASLt workspace");
    // One memory pool per device: the device's default pool, stream-ordered on our stream, keeping freed memory
    // for the next allocation instead of returning it to the driver at each synchronisation (per-step activation
    // buffers are then allocated once). LMFORGE_CUDA_MALLOC=plain uses cudaMalloc/cudaFree per buffer instead,
    // which lets compute-sanitizer's memcheck see each buffer's exact bounds.
    const char* mode = std::getenv("LMFORGE_CUDA_MALLOC");
    plain_malloc_ = mode != nullptr && std::strcmp(mode, "plain") == 0;
    const char* gemm = std::getenv("LMFORGE_CUDA_GEMM");
    ctx_.gemm_fallback = gemm != nullptr && std::strcmp(gemm, "fallback") == 0;
    if (const char* attention = std::getenv("LMFORGE_CUDA_ATTENTION"); attention != nullptr && *attention != 0) {
      using K = CudaContext::AttentionKernels;
      if (std::strcmp(attention, "rows") == 0) ctx_.attention = K::ROWS;
      else if (std::strcmp(attention, "flash") == 0) ctx_.attention = K::FLASH;
      else if (std::strcmp(attention, "mma") == 0) ctx_.attention = K::TENSOR_CORES;
      else
        throw Error(std::string("LMFORGE_CUDA_ATTENTION=") + attention +
                    " is not one of mma (the default: tensor-core kernels first), flash (the WMMA flash kernels "
                    "first) or rows (the row kernels only)");
    }
    check_cuda(cudaDeviceGetAttribute(&ctx_.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_),
               "cudaDeviceGetAttribute (shared memory per block)");
    if (!plain_malloc_) {
      cudaMemPool_t pool;
      check_cuda(cudaDeviceGetDefaultMemPool(&pool, device_), "cudaDeviceGetDefaultMemPool");
      uint64_t keep = UINT64_MAX;
      check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    }
  }
  // The process's backend lives until exit, when the driver may already be shutting down: nothing is released
  // here (the driver frees a process's memory, stream and handles at exit).
  ~CudaBackend() override = default;

  Device device() const override { return Device::CUDA; }
  const char* name() const override { return "cuda"; }
  std::string info() const override {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    return std::string("cuda ") + props_.name + " (device " + std::to_string(device_) + " of " +
           std::to_string(count_) + ", " + device_source_ + "; sm_" + std::to_string(props_.major) +
           std::to_string(props_.minor) + ", " + std::to_string(props_.multiProcessorCount) + " SMs, " +
           std::to_string(props_.totalGlobalMem >> 20) + " MiB), driver " + version(driver) + ", runtime " +
           version(runtime) + ", cuBLASLt " + std::to_string(cublasLtGetVersion()) +
           (plain_malloc_ ? ", cudaMalloc per buffer" : ", stream-ordered pool") +
           (ctx_.gemm_fallback ? ", fallback GEMM kernel (LMFORGE_CUDA_GEMM)" : "") +
           (ctx_.attention == CudaContext::AttentionKernels::ROWS    ? ", row attention kernels (LMFORGE_CUDA_ATTENTION)"
            : ctx_.attention == CudaContext::AttentionKernels::FLASH ? ", WMMA flash attention kernels (LMFORGE_CUDA_ATTENTION)"
                                                                     : "");
  }
  void* alloc(size_t bytes) override {
    bind_thread();
    void* p = nullptr;
    if (bytes == 0) bytes = 1;
    // Both allocators return at least 256-byte-aligned memory (the Backend contract asks for 64).
    if (plain_malloc_) check_cuda(cudaMalloc(&p, bytes), "cudaMalloc");
    else check_cuda(cudaMallocAsync(&p, bytes, ctx_.stream), "cudaMallocAsync");
    if (reinterpret_cast<uintptr_t>(p) % 64 != 0)  // the contract the ops' vector loads rely on
      throw Error("CUDA allocation of " + std::to_string(bytes) + " bytes is not 64-byte aligned");
    return p;
  }
  void free(void* p) override {
    if (p == nullptr) return;
    bind_thread();
    // Stream-ordered: the memory is reused only by work queued after the ops that read it.
    // A buffer freed by a static destructor after the CUDA runtime has shut down at exit: nothing left to free.
    auto freed = [](cudaError_t err, const char* what) {
      if (err != cudaErrorCudartUnloading) check_cuda(err, what);
    };
    if (plain_malloc_) {
      freed(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize before cudaFree");
      freed(cudaFree(p), "cudaFree");
    } else {
      freed(cudaFreeAsync(p, ctx_.stream), "cudaFreeAsync");
    }
  }
  // Queued behind earlier ops on the stream; the caller may reuse the source at once. Small copies (the per
  // micro-batch uploads) go through the pinned staging ring, so they never wait for the GPU (HostStaging); from
  // pageable memory the driver has read the source when cudaMemcpyAsync returns, but may wait for the stream.
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    bind_thread();
    if (bytes <= HostStaging::kMaxBytes) return staging_.upload(dst, src, bytes, ctx_.stream);
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_.stream), "copy to device");
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    bind_thread();
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream), "copy to host");
    check_cuda(cudaStreamSynchronize(ctx_.stream), "copy to host (synchronize)");
  }
  void copy_on_device(void* dst, const void* src, size_t bytes) override {
    bind_thread();
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.stream), "copy on device");
  }
  void fill_zero(void* p, size_t bytes) override {
    bind_thread();
    check_cuda(cudaMemsetAsync(p, 0, bytes, ctx_.stream), "cudaMemsetAsync");
  }
  void synchronize() override {
    bind_thread();
    check_cuda(cudaStreamSynchronize(ctx_.stream), "synchronize");
  }
  // The GPU's parallelism is not a thread count: kept for the interface.
  void set_num_threads(int) override {}
  int num_threads() const override { return 1; }

  CudaContext& context() { return ctx_; }

  // The CUDA runtime's current device is per host thread, and a new thread starts on device 0: a thread that is
  // not the one that built the backend (the optimizers' OpenMP workers call ops) is switched to our device before
  // it queues work on our stream (a stream of another device is an invalid handle there). On device 0 this is one
  // cheap query.
  void bind_thread() const {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != device_)
      check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  }

 private:
  int device_ = 0, count_ = 0;
  std::string device_source_;  // how device_ was chosen (local_rank_device)
  cudaDeviceProp props_{};
  HostStaging staging_;
  CudaContext ctx_;
  bool plain_malloc_ = false;
};

CudaBackend& backend() {
  // Constructed on first use; a constructor that throws (no device) leaves it unconstructed, so every later call
  // reports the same reason.
  static CudaBackend b;
  return b;
}

}  // namespace

Backend& cuda_backend() { return backend(); }
CudaContext& cuda_context() {
  CudaBackend& b = backend();
  b.bind_thread();
  return b.context();
}

void register_kernels(KernelTable& table) {
  register_embedding(table);
  register_layernorm(table);
  register_linear(table);
  register_bias_add(table);
  register_add(table);
  register_gelu(table);
  register_tanh(table);
  register_dropout(table);
  register_attention(table);
  register_copy(table);
  register_crossentropy(table);
  register_optim(table);
}

}  // namespace lmforge::kernels::cuda
