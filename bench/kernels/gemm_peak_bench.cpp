// defines: bench_gemm_peak — the fp32 and bf16 GEMM peaks of this CPU on 2 threads (OMP_NUM_THREADS): the best
//          GFLOP/s (and GFLOP per CPU-second) over large training-like shapes and over every path lmforge could use —
//          its own kernels::linear_forward, OpenBLAS's cblas_sgemm and oneDNN's matmul in fp32 and bf16 (bf16 only
//          where oneDNN has more than its reference kernel for it). The denominators of the training benchmarks'
//          fraction-of-peak figures (bench/train/common.sh, which also adds the PyTorch peer's own GEMM peaks).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"

using namespace lmforge;

namespace {

struct Rate {
  double gflops = 0.0;      // best call's flops / wall seconds
  double gflops_cpu = 0.0;  // flops per CPU second of the process over >= 0.3 s of calls (user + system, all threads)
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Wall: the best of `reps` timed calls of `call` (one untimed call first: oneDNN's JIT, OpenBLAS's buffers, first
// touch). CPU: the process's CPU time over the timed calls, repeated until they span kCpuSpan seconds, per call.
// Why not the best call's CPU time, as the wall time: the clock of the process adds another thread's CPU time only
// when that thread's own accounting is updated (a scheduler tick, a sleep), so a call of a few milliseconds could
// read as one thread's time while two ran — on one VM a 2-thread bf16 product read 992 GFLOP per CPU-second at
// 994 GFLOP/s wall. Over ~0.3 s the unaccounted remainder is a tick per thread at most.
constexpr double kCpuSpan = 0.3;
Rate time_calls(double flops, int reps, const std::function<void()>& call) {
  call();
  double best_wall = 1e30;
  int calls = 0;
  const auto start = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const auto t1 = std::chrono::steady_clock::now();
    best_wall = std::min(best_wall, std::chrono::duration<double>(t1 - t0).count());
    calls++;
    if (calls >= reps && std::chrono::duration<double>(t1 - start).count() >= kCpuSpan) break;
  }
  const double cpu = cpu_seconds() - c0;
  return {flops / best_wall / 1e9, flops * calls / cpu / 1e9};
}

// lmforge's linear layer: out[N,OC] = inp[N,IC]·W[IC,OC] in `dtype` (whatever path the dispatch table picked).
Rate lmforge_linear(kernels::DType dtype, int N, int IC, int OC, int reps) {
  kernels::Backend& be = kernels::cpu_backend();
  kernels::Buffer x(be, dtype, (size_t)N * IC), w(be, dtype, (size_t)IC * OC), y(be, dtype, (size_t)N * OC);
  // Small non-zero values (bit patterns of ~0.01 in either dtype): zeros could take shortcuts.
  std::vector<float> host((size_t)std::max(N * IC, IC * OC), 0.01f);
  kernels::Buffer f(be, kernels::DType::F32, host.size());
  be.copy_to_device(f.data(), host.data(), host.size() * sizeof(float));
  kernels::copy(x.view({(int64_t)N * IC}), f.view({(int64_t)N * IC}));
  kernels::copy(w.view({(int64_t)IC * OC}), f.view({(int64_t)IC * OC}));
  return time_calls(2.0 * N * IC * OC, reps, [&] {
    kernels::linear_forward(y.view({N, OC}), x.view({N, IC}), w.view({IC, OC}), kernels::Tensor{},
                            kernels::WeightLayout::IN_OUT);
  });
}

// OpenBLAS's sgemm as linked (the system's libopenblas, its core as OPENBLAS_CORETYPE or its own detection picks),
// on OMP_NUM_THREADS of its own threads: lmforge's CPU backend sets OpenBLAS to one thread (it splits products over
// its OpenMP team itself), so the count is raised for this call and put back after.
Rate openblas_sgemm(int N, int IC, int OC, int reps) {
  std::vector<float> a((size_t)N * IC, 0.01f), b((size_t)IC * OC, 0.01f), c((size_t)N * OC);
  const int saved = openblas_get_num_threads();
  const char* env = std::getenv("OMP_NUM_THREADS");
  openblas_set_num_threads(env && std::atoi(env) > 0 ? std::atoi(env) : 2);
  struct Restore {
    int n;
    ~Restore() { openblas_set_num_threads(n); }
  } restore{saved};
  return time_calls(2.0 * N * IC * OC, reps, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, IC, 1.0f, a.data(), IC, b.data(), OC, 0.0f,
                c.data(), OC);
  });
}

// oneDNN's matmul with operands and result in `t` (fp32 accumulation). Returns {} and sets `impl` to the kernel
// oneDNN chose; a "ref" kernel (no JIT code for this ISA) is not timed: it is no path anyone would run.
Rate onednn_matmul(dnnl::memory::data_type t, int N, int IC, int OC, int reps, std::string& impl) {
  static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::desc a_md({N, IC}, t, tag::ab), b_md({IC, OC}, t, tag::ab), c_md({N, OC}, t, tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), eng);
  } catch (const dnnl::error&) {
    impl = "none";
    return {};
  }
  impl = pd.impl_info_str();
  if (impl.find("ref") != std::string::npos) return {};
  dnnl::memory a(a_md, eng), b(b_md, eng), c(c_md, eng);
  // 0x3C24 is ~0.01 in bf16; for fp32 fill with 0.01f. Zeros could take shortcuts.
  if (t == dnnl::memory::data_type::f32) {
    std::fill_n((float*)a.get_data_handle(), (size_t)N * IC, 0.01f);
    std::fill_n((float*)b.get_data_handle(), (size_t)IC * OC, 0.01f);
  } else {
    std::fill_n((uint16_t*)a.get_data_handle(), (size_t)N * IC, (uint16_t)0x3C24);
    std::fill_n((uint16_t*)b.get_data_handle(), (size_t)IC * OC, (uint16_t)0x3C24);
  }
  dnnl::matmul mm(pd);
  return time_calls(2.0 * N * IC * OC, reps, [&] {
    mm.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    s.wait();
  });
}

struct Peak {
  Rate best;
  std::string where;  // the path and shape of the best wall figure
};

void keep(Peak& p, const Rate& r, const std::string& where) {
  if (r.gflops > p.best.gflops) p.best.gflops = r.gflops, p.where = where;
  p.best.gflops_cpu = std::max(p.best.gflops_cpu, r.gflops_cpu);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 10;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: bench_gemm_peak [--reps N]   (threads: OMP_NUM_THREADS)\n"
                   "  prints, per path and shape, GFLOP/s (best call's wall time) and GFLOP per CPU-second (over >= 0.3 s of calls), then\n"
                   "  'peak f32: G GFLOP/s, C GFLOP/cpu-s (path, shape)' and the same for bf16\n");
      return 2;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "bench_gemm_peak: --reps must be >= 1\n");
    return 2;
  }
  std::printf("backend: %s; bf16 GEMM: %s; OpenBLAS: %s, core %s\n", kernels::cpu_backend().info().c_str(),
              kernels::bf16_gemm_cpu_path().c_str(), openblas_get_config(), openblas_get_corename());
  // GPT-2 124M's MLP projection at B·T = 512 and 1024, and the LM head's shape of config A.
  const int shapes[][3] = {{1024, 768, 3072}, {512, 768, 3072}, {1024, 256, 50304}};
  Peak f32, bf16;
  auto report = [&](Peak& p, const char* path, const char* dtype, const int* s, const Rate& r) {
    char where[160];
    std::snprintf(where, sizeof where, "%s [%d x %d]·[%d x %d]", path, s[0], s[1], s[1], s[2]);
    std::printf("gemm %s %s: %.0f GFLOP/s, %.0f GFLOP/cpu-s\n", dtype, where, r.gflops, r.gflops_cpu);
    keep(p, r, where);
  };
  for (const auto& s : shapes) {
    report(f32, "lmforge linear", "f32", s, lmforge_linear(kernels::DType::F32, s[0], s[1], s[2], reps));
    report(f32, "openblas sgemm", "f32", s, openblas_sgemm(s[0], s[1], s[2], reps));
    std::string impl;
    const Rate r = onednn_matmul(dnnl::memory::data_type::f32, s[0], s[1], s[2], reps, impl);
    if (r.gflops > 0) report(f32, ("onednn matmul (" + impl + ")").c_str(), "f32", s, r);
    else std::printf("gemm f32 onednn matmul: not timed (oneDNN's kernel here: %s)\n", impl.c_str());
  }
  for (const auto& s : shapes) {
    report(bf16, "lmforge linear", "bf16", s, lmforge_linear(kernels::DType::BF16, s[0], s[1], s[2], reps));
    std::string impl;
    const Rate r = onednn_matmul(dnnl::memory::data_type::bf16, s[0], s[1], s[2], reps, impl);
    if (r.gflops > 0) report(bf16, ("onednn matmul (" + impl + ")").c_str(), "bf16", s, r);
    else std::printf("gemm bf16 onednn matmul: not timed (oneDNN's kernel here: %s)\n", impl.c_str());
  }
  std::printf("peak f32: %.0f GFLOP/s, %.0f GFLOP/cpu-s (%s)\n", f32.best.gflops, f32.best.gflops_cpu, f32.where.c_str());
  std::printf("peak bf16: %.0f GFLOP/s, %.0f GFLOP/cpu-s (%s)\n", bf16.best.gflops, bf16.best.gflops_cpu,
              bf16.where.c_str());
  return 0;
}
