// defines: the CPU Backend (aligned host memory, OpenMP and OpenBLAS thread control), cpu_backend(), and
//          cpu::register_kernels() (the CPU's entry points in the dispatch table, one registration per op file)
#include <cblas.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace lmforge::kernels {
namespace {

// Buffers of kChunk·2 bytes and more are zeroed and copied by all threads in chunks: one thread cannot saturate
// memory bandwidth, and the other would wait. From 2 MB: a training step zeroes many gradient buffers of exactly
// 4 MB ([4096, 256] fp32: ELECTRA-Small's batch at hidden 256), which the earlier bound (more than 4 MB) left to one
// thread (memset on the main thread twice the other's share of a step's samples), and ELECTRA copies its 74 MB of
// generator logits to the host every step.
constexpr size_t kChunk = size_t(1) << 20;
void chunked_copy(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* from = static_cast<const char*>(src);
  const int64_t chunks = (int64_t)((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (bytes >= kChunk * 2)
  for (int64_t i = 0; i < chunks; i++) {
    const size_t begin = (size_t)i * kChunk;
    std::memcpy(d + begin, from + begin, std::min(kChunk, bytes - begin));
  }
}

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  std::string info() const override {
    std::string config = openblas_get_config();
    while (!config.empty() && config.back() == ' ') config.pop_back();
    return std::string("cpu, OpenMP ") + std::to_string(omp_get_max_threads()) + " threads, " + config +
           " (core " + openblas_get_corename() + ", called single-threaded from each OpenMP thread); fp32 GEMM: " +
           cpu::fp32_gemm_info();
  }

  Device device() const override { return Device::CPU; }
  void* alloc(size_t bytes) override {
    // 64-byte alignment = one AVX-512 vector / cache line; the size must be a multiple of the alignment.
    bytes = ((bytes + 63) / 64) * 64;
    if (bytes == 0) bytes = 64;
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void free(void* p) override { std::free(p); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override { chunked_copy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { chunked_copy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { chunked_copy(dst, src, bytes); }
  void fill_zero(void* p, size_t bytes) override {
    char* c = static_cast<char*>(p);
    const int64_t chunks = (int64_t)((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (bytes >= kChunk * 2)
    for (int64_t i = 0; i < chunks; i++) {
      const size_t begin = (size_t)i * kChunk;
      std::memset(c + begin, 0, std::min(kChunk, bytes - begin));
    }
  }
  // Whole pages inside the range go back to the system (private anonymous memory reads as zeros afterwards); the
  // partial pages at either end are zeroed in place (they also hold a neighbour's elements).
  void release_zeroed(void* p, size_t bytes) override {
    if (bytes == 0) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)p, b = a + bytes;
    const uintptr_t pa = (a + page - 1) / page * page, pb = b / page * page;
    if (pa >= pb) {
      std::memset((void*)a, 0, b - a);
      return;
    }
    std::memset((void*)a, 0, pa - a);
    std::memset((void*)pb, 0, b - pb);
    if (madvise((void*)pa, pb - pa, MADV_DONTNEED) != 0) std::memset((void*)pa, 0, pb - pa);
  }
  void synchronize() override {}

  void set_num_threads(int n) override {
    if (n <= 0) return;
    // OpenBLAS itself stays single-threaded: the ops split GEMMs over the OpenMP team (see gemm() in
    // kernels/cpu/gemm/gemm_f32.cpp).
    omp_set_num_threads(n);
  }
  int num_threads() const override { return omp_get_max_threads(); }
  bool wants_widened_bf16_weights() const override { return !bf16_gemm_native(); }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

namespace cpu {
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
}  // namespace cpu

}  // namespace lmforge::kernels
