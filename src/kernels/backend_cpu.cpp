// defines: the CPU Backend (aligned host memory, OpenMP and OpenBLAS thread control) and cpu_backend()
#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "kernels/backend.h"

namespace lmforge::kernels {
namespace {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  std::string info() const override {
    std::string config = openblas_get_config();
    while (!config.empty() && config.back() == ' ') config.pop_back();
    return std::string("cpu fp32, OpenMP ") + std::to_string(omp_get_max_threads()) + " threads, " + config +
           " (core " + openblas_get_corename() + ", called single-threaded from each OpenMP thread)";
  }

  float* alloc(size_t n) override {
    // 64-byte alignment = one AVX-512 vector / cache line; the size must be a multiple of the alignment.
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    if (bytes == 0) bytes = 64;
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<float*>(p);
  }
  void free(float* p) override { std::free(p); }
  void copy_to_device(float* dst, const float* src, size_t n) override { std::memcpy(dst, src, n * sizeof(float)); }
  void copy_to_host(float* dst, const float* src, size_t n) override { std::memcpy(dst, src, n * sizeof(float)); }
  void copy_on_device(float* dst, const float* src, size_t n) override { std::memcpy(dst, src, n * sizeof(float)); }
  void fill_zero(float* p, size_t n) override {
    // Large buffers are zeroed by all threads: one thread cannot saturate memory bandwidth.
#pragma omp parallel for schedule(static) if (n > (1u << 20))
    for (size_t i = 0; i < n; i++) p[i] = 0.0f;
  }
  void synchronize() override {}
  void set_num_threads(int n) override {
    if (n <= 0) return;
    // OpenBLAS itself stays single-threaded: the ops split GEMMs over the OpenMP team (see gemm() in ops_cpu.cpp).
    omp_set_num_threads(n);
  }
  int num_threads() const override { return omp_get_max_threads(); }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace lmforge::kernels
