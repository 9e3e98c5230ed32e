// defines: the CUDA optimizer steps and gradient passes over flat f32 buffers (ops.h): AdamW, LAMB's two phases,
//          SGD, scale, sum of squares, non-finite count, f16 storage rounding, and the multi-tensor forms of AdamW,
//          SGD, LAMB (moments, apply, and both with the trust ratios formed on the device), scale and Σx² — each one
//          launch over every run. The element-wise steps use the CPU's operation order with explicitly rounded
//          operations (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn, __fmaf_rn where ops.h writes fma): nvcc
//          contracts a·b + c otherwise, the CPU file is compiled without contraction, and this way each update is
//          the CPU's bit for bit; the single-tensor and multi-tensor kernels call the same element functions.
//          Sums (Σp², Σu², Σx²) are in double in a fixed order (below): deterministic, not the CPU's order.
//
// Multi-tensor launches. A run of n elements is cut into chunks of kChunk elements; block b of the grid takes
// chunk b of the whole list, finding its run by a binary search over the runs' first chunk numbers. What the
// blocks read — the runs (pointers, length, first chunk, group), the per-group scalars, LAMB's tensors and rates —
// is laid out on the host as one table and uploaded with ONE asynchronous copy through the backend's pinned
// staging ring (HostStaging), into stream-ordered scratch freed behind the launch. (apex's multi_tensor_apply
// passes its table as kernel parameters instead, 4 KB of them, so a list of thousands of runs takes dozens of
// launches; here it takes one, for any count, at the price of one small host-to-device copy per launch.)
//
// The order of a sum: each chunk's partial is Σ over the block's threads, thread t summing elements t, t + 256, …
// of the chunk in order, combined by block_sum's fixed tree; a run's sum is 0 + partial₀ + partial₁ + … in chunk
// order (one thread); LAMB's tensor sum is 0 + run₀ + run₁ + … over the tensor's runs in list order. The
// single-tensor lamb_moments and sum_squares are the multi forms over one run, so the two agree bit for bit.
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kSumBlocks = 256;  // partial sums of count_nonfinite (fixed: results do not depend on the GPU)
constexpr int64_t kChunk = 65536;     // elements per block of a multi-tensor launch (and per partial of a sum)

#define LMFORGE_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ---- the per-element steps (shared by the single- and multi-tensor kernels) ------------------------------------

// p' = p·decay;  m = fma(g, 1−β1, m·β1);  v = v·β2 + ((1−β2)·g)·g;  p = p' + (−step·m) / (√v / bc2 + eps)
__device__ __forceinline__ void adamw_element(float* p, const float* g, float* m, float* v, int64_t i,
                                              const AdamWScalars& s) {
  const float gi = g[i];
  const float pi = __fmul_rn(p[i], s.decay);
  const float mi = __fmaf_rn(gi, s.one_minus_beta1, __fmul_rn(m[i], s.beta1));
  const float vi = __fadd_rn(__fmul_rn(v[i], s.beta2), __fmul_rn(__fmul_rn(s.one_minus_beta2, gi), gi));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias_correction2_sqrt), s.eps);
  m[i] = mi;
  v[i] = vi;
  p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(s.neg_step_size, mi), denom));
}

// u = (m / bc1) / (√(v / bc2) + eps) + wd·p
__device__ __forceinline__ float lamb_direction(float m, float v, float p, float wd, const LambScalars& s) {
  const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(v, s.bias_correction2)), s.eps);
  return __fadd_rn(__fdiv_rn(__fdiv_rn(m, s.bias_correction1), denom), __fmul_rn(wd, p));
}

// m = β1·m + β3·g;  v = β2·v + ((1−β2)·g)·g;  adds p² and u² (p before the update) to pp and uu.
__device__ __forceinline__ void lamb_moments_element(const float* p, const float* g, float* m, float* v, int64_t j,
                                                     const LambScalars& s, float wd, double& pp, double& uu) {
  const float mj = __fadd_rn(__fmul_rn(s.beta1, m[j]), __fmul_rn(s.beta3, g[j]));
  const float vj = __fadd_rn(__fmul_rn(s.beta2, v[j]), __fmul_rn(__fmul_rn(s.one_minus_beta2, g[j]), g[j]));
  m[j] = mj;
  v[j] = vj;
  const float u = lamb_direction(mj, vj, p[j], wd, s);
  pp += (double)p[j] * p[j];
  uu += (double)u * u;
}

__device__ __forceinline__ void lamb_apply_element(float* p, const float* m, const float* v, int64_t j,
                                                   const LambScalars& s, float wd, float rate) {
  p[j] = __fsub_rn(p[j], __fmul_rn(rate, lamb_direction(m[j], v[j], p[j], wd, s)));
}

// d = decay ? fma(p, wd, g) : g;  b = first ? d : b·μ + d;  p = fma(b, −lr, p)
__device__ __forceinline__ void sgd_element(float* p, const float* g, float* b, int64_t j, const SgdScalars& s) {
  const float d = s.decay ? __fmaf_rn(p[j], s.weight_decay, g[j]) : g[j];
  float step = d;
  if (b != nullptr) {
    step = s.first ? d : __fadd_rn(__fmul_rn(b[j], s.momentum), d);
    b[j] = step;
  }
  p[j] = __fmaf_rn(step, s.neg_lr, p[j]);
}

// ---- single-tensor kernels ------------------------------------------------------------------------------------------

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamWScalars s) {
  LMFORGE_GRID_STRIDE(i, n) adamw_element(p, g, m, v, i, s);
}

__global__ void lamb_apply_kernel(float* p, const float* m, const float* v, int64_t n, LambScalars s, float wd,
                                  float rate) {
  LMFORGE_GRID_STRIDE(j, n) lamb_apply_element(p, m, v, j, s, wd, rate);
}

__global__ void sgd_kernel(float* p, const float* g, float* b, int64_t n, SgdScalars s) {
  LMFORGE_GRID_STRIDE(j, n) sgd_element(p, g, b, j, s);
}

__global__ void scale_kernel(float* x, int64_t n, float factor) { LMFORGE_GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], factor); }

__global__ void count_nonfinite_kernel(const float* x, int64_t n, unsigned long long* partial) {
  __shared__ double scratch[32];
  double c = 0.0;  // exact in double up to 2^53 elements
  LMFORGE_GRID_STRIDE(i, n) c += isfinite(x[i]) ? 0.0 : 1.0;
  c = block_sum(c, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = (unsigned long long)c;
}

// x = f32(f16(x)), round to nearest even, |x| >= 65520 → ±inf (as the CPU's conversion).
__global__ void round_f16_kernel(float* x, int64_t n) { LMFORGE_GRID_STRIDE(i, n) x[i] = __half2float(__float2half_rn(x[i])); }

// ---- multi-tensor kernels ---------------------------------------------------------------------------------------

// One run on the device (a MultiTensorItem, or a view of scale / Σx² in p).
struct Run {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t n;
  int64_t first_chunk;  // chunks of the runs before this one
  uint32_t group;
};

__host__ __device__ inline int64_t chunks_of(int64_t n) { return (n + kChunk - 1) / kChunk; }

// The run of this block (runs are non-empty, so first_chunk increases strictly) and its chunk's element range.
struct Chunk {
  Run r;
  int64_t lo, hi;
};
__device__ __forceinline__ Chunk chunk_of_block(const Run* runs, int count) {
  __shared__ int found;
  if (threadIdx.x == 0) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (runs[mid].first_chunk <= (int64_t)blockIdx.x) lo = mid;
      else hi = mid - 1;
    }
    found = lo;
  }
  __syncthreads();
  Chunk c{runs[found], 0, 0};
  c.lo = ((int64_t)blockIdx.x - c.r.first_chunk) * kChunk;
  c.hi = c.lo + kChunk < c.r.n ? c.lo + kChunk : c.r.n;
  return c;
}

__global__ void adamw_multi_kernel(const Run* runs, int count, const AdamWScalars* groups) {
  const Chunk c = chunk_of_block(runs, count);
  const AdamWScalars s = groups[c.r.group];
  for (int64_t i = c.lo + threadIdx.x; i < c.hi; i += blockDim.x) adamw_element(c.r.p, c.r.g, c.r.m, c.r.v, i, s);
}

__global__ void sgd_multi_kernel(const Run* runs, int count, const SgdScalars* groups) {
  const Chunk c = chunk_of_block(runs, count);
  const SgdScalars s = groups[c.r.group];
  for (int64_t i = c.lo + threadIdx.x; i < c.hi; i += blockDim.x) sgd_element(c.r.p, c.r.g, c.r.m, i, s);
}

// partial[b] = (Σp², Σu²) of block b's chunk.
__global__ void lamb_moments_multi_kernel(const Run* runs, int count, LambScalars s, const LambTensor* tensors,
                                          double2* partial) {
  __shared__ double scratch[32];
  const Chunk c = chunk_of_block(runs, count);
  const float wd = tensors[c.r.group].wd;
  double pp = 0.0, uu = 0.0;
  for (int64_t i = c.lo + threadIdx.x; i < c.hi; i += blockDim.x)
    lamb_moments_element(c.r.p, c.r.g, c.r.m, c.r.v, i, s, wd, pp, uu);
  pp = block_sum(pp, scratch);
  uu = block_sum(uu, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = make_double2(pp, uu);
}

// One warp per tensor: its runs' sums (each 0 + its chunks' partials in order) added in list order from 0, and
// when rates is given the tensor's step size from them (ops.h's lamb_trust_rate, the host's definition). The lanes
// form 32 run sums at a time in parallel; every lane then adds them in list order through shuffles, so the sum is
// the sequential one (a tensor of GPT-2's size has thousands of runs: one thread walking them would be slow).
__global__ void lamb_sums_kernel(const Run* runs, const int* tensor_first, const int* tensor_runs, int tensors,
                                 const double2* partial, double2* sums, const LambTensor* info, double lr,
                                 float* rates) {
  const int t = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
  if (t >= tensors) return;  // the whole warp (t is the same for its lanes)
  double pp = 0.0, uu = 0.0;
  const int begin = tensor_first[t], end = tensor_first[t + 1];
  for (int base = begin; base < end; base += 32) {
    double rp = 0.0, ru = 0.0;
    if (base + lane < end) {
      const Run& r = runs[tensor_runs[base + lane]];
      for (int64_t c = 0; c < chunks_of(r.n); c++) rp += partial[r.first_chunk + c].x, ru += partial[r.first_chunk + c].y;
    }
    const int n = end - base < 32 ? end - base : 32;
    for (int k = 0; k < n; k++) {
      pp += __shfl_sync(0xffffffffu, rp, k);
      uu += __shfl_sync(0xffffffffu, ru, k);
    }
  }
  if (lane != 0) return;
  sums[t] = make_double2(pp, uu);
  if (rates != nullptr) rates[t] = lamb_trust_rate(lr, pp, uu, info[t].trust);
}

__global__ void lamb_apply_multi_kernel(const Run* runs, int count, LambScalars s, const LambTensor* tensors,
                                        const float* rates) {
  const Chunk c = chunk_of_block(runs, count);
  const float wd = tensors[c.r.group].wd, rate = rates[c.r.group];
  for (int64_t i = c.lo + threadIdx.x; i < c.hi; i += blockDim.x) lamb_apply_element(c.r.p, c.r.m, c.r.v, i, s, wd, rate);
}

__global__ void scale_multi_kernel(const Run* runs, int count, float factor) {
  const Chunk c = chunk_of_block(runs, count);
  for (int64_t i = c.lo + threadIdx.x; i < c.hi; i += blockDim.x) c.r.p[i] = __fmul_rn(c.r.p[i], factor);
}

__global__ void sum_squares_multi_kernel(const Run* runs, int count, double* partial) {
  __shared__ double scratch[32];
  const Chunk c = chunk_of_block(runs, count);
  double s = 0.0;
  for (int64_t i = c.lo + threadIdx.x; i < c.hi; i += blockDim.x) s += (double)c.r.p[i] * (double)c.r.p[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One thread per run: 0 + its chunks' partials in order.
__global__ void run_sums_kernel(const Run* runs, int count, const double* partial, double* out) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= count) return;
  double s = 0.0;
  for (int64_t c = 0; c < chunks_of(runs[k].n); c++) s += partial[runs[k].first_chunk + c];
  out[k] = s;
}

// ---- host side ----------------------------------------------------------------------------------------------------

float* f32(const Tensor& t) { return static_cast<float*>(t.data); }
unsigned grid(int64_t n) { return blocks_for(n, kThreads); }

// The non-empty runs of a list (item indices kept), with their chunk numbers.
struct Runs {
  std::vector<Run> runs;
  std::vector<size_t> item;  // list index of each run
  int64_t chunks = 0;
  void add(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, uint32_t group, size_t k) {
    const int64_t n = p.numel();
    if (n == 0) return;
    runs.push_back(Run{f32(p), g.present() ? f32(g) : nullptr, m.present() ? f32(m) : nullptr,
                       v.present() ? f32(v) : nullptr, n, chunks, group});
    item.push_back(k);
    chunks += chunks_of(n);
  }
  int count() const { return (int)runs.size(); }
};

Runs runs_of(MultiTensorList list) {
  Runs r;
  for (size_t k = 0; k < list.count; k++) {
    const MultiTensorItem& it = list.items[k];
    r.add(it.param, it.grad, it.m, it.v, it.group, k);
  }
  return r;
}

Runs runs_of(TensorList list) {
  Runs r;
  for (size_t k = 0; k < list.count; k++) r.add(list.items[k], Tensor{}, Tensor{}, Tensor{}, 0, k);
  return r;
}

// The host image of what one launch reads (sections 16-byte aligned), uploaded in one copy into scratch that is
// freed on the stream behind the launch.
class Table {
 public:
  template <class T>
  size_t add(const T* data, size_t count) {
    const size_t at = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(at + count * sizeof(T));
    if (count > 0) std::memcpy(bytes_.data() + at, data, count * sizeof(T));
    return at;
  }
  void upload() {
    CudaContext& ctx = cuda_context();
    device_ = std::make_unique<Scratch>(bytes_.size());
    ctx.staging->upload(device_->get(), bytes_.data(), bytes_.size(), ctx.stream);
  }
  template <class T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<unsigned char*>(device_->get()) + offset);
  }

 private:
  std::vector<unsigned char> bytes_;
  std::unique_ptr<Scratch> device_;
};

// Copies count values of T from device memory to the host (the one synchronisation of a multi-tensor sum).
template <class T>
void read_back(T* out, const void* device, size_t count, const char* what) {
  CudaContext& ctx = cuda_context();
  check_cuda(cudaMemcpyAsync(out, device, count * sizeof(T), cudaMemcpyDeviceToHost, ctx.stream), what);
  check_cuda(cudaStreamSynchronize(ctx.stream), what);
}

// Blocks of kThreads for one thread per item.
unsigned blocks_of(int64_t n) { return (unsigned)((n + kThreads - 1) / kThreads); }

void adamw_multi_cuda(MultiTensorList list, const AdamWScalars* groups, size_t group_count) {
  const Runs r = runs_of(list);
  if (r.runs.empty()) return;
  Table table;
  const size_t runs_at = table.add(r.runs.data(), r.runs.size()), groups_at = table.add(groups, group_count);
  table.upload();
  adamw_multi_kernel<<<(unsigned)r.chunks, kThreads, 0, cuda_context().stream>>>(
      table.at<Run>(runs_at), r.count(), table.at<AdamWScalars>(groups_at));
  check_launch("adamw_update_multi");
}

void sgd_multi_cuda(MultiTensorList list, const SgdScalars* groups, size_t group_count) {
  const Runs r = runs_of(list);
  if (r.runs.empty()) return;
  Table table;
  const size_t runs_at = table.add(r.runs.data(), r.runs.size()), groups_at = table.add(groups, group_count);
  table.upload();
  sgd_multi_kernel<<<(unsigned)r.chunks, kThreads, 0, cuda_context().stream>>>(table.at<Run>(runs_at), r.count(),
                                                                               table.at<SgdScalars>(groups_at));
  check_launch("sgd_update_multi");
}

// Phase 1 of LAMB over ph.r: the moments, and each tensor's sums (and, with rates_out, its rate) in device memory.
struct LambPhase1 {
  Runs r;
  Table table;
  size_t runs_at = 0, tensors_at = 0;
  std::unique_ptr<Scratch> sums;  // double2 per tensor
};

void lamb_phase1(LambPhase1& ph, const LambScalars& s, const LambTensor* tensors, size_t count,
                 double lr, float* rates_out) {
  // The runs of each tensor in list order (CSR).
  std::vector<int> first(count + 1, 0), order(ph.r.runs.size());
  for (const Run& run : ph.r.runs) first[run.group + 1]++;
  for (size_t t = 0; t < count; t++) first[t + 1] += first[t];
  std::vector<int> fill(first.begin(), first.end() - 1);
  for (size_t k = 0; k < ph.r.runs.size(); k++) order[(size_t)fill[ph.r.runs[k].group]++] = (int)k;
  ph.runs_at = ph.table.add(ph.r.runs.data(), ph.r.runs.size());
  ph.tensors_at = ph.table.add(tensors, count);
  const size_t first_at = ph.table.add(first.data(), first.size()), order_at = ph.table.add(order.data(), order.size());
  ph.table.upload();
  CudaContext& ctx = cuda_context();
  Scratch partial((size_t)ph.r.chunks * sizeof(double2));
  lamb_moments_multi_kernel<<<(unsigned)ph.r.chunks, kThreads, 0, ctx.stream>>>(
      ph.table.at<Run>(ph.runs_at), ph.r.count(), s, ph.table.at<LambTensor>(ph.tensors_at),
      static_cast<double2*>(partial.get()));
  check_launch("lamb_moments_multi");
  ph.sums = std::make_unique<Scratch>(count * sizeof(double2));
  lamb_sums_kernel<<<blocks_of((int64_t)count * 32), kThreads, 0, ctx.stream>>>(
      ph.table.at<Run>(ph.runs_at), ph.table.at<int>(first_at), ph.table.at<int>(order_at), (int)count,
      static_cast<const double2*>(partial.get()), static_cast<double2*>(ph.sums->get()),
      ph.table.at<LambTensor>(ph.tensors_at), lr, rates_out);
  check_launch("lamb_moments_multi (tensor sums)");
}

void lamb_moments_multi_cuda(MultiTensorList list, const LambScalars& s, const LambTensor* tensors, size_t count,
                             LambSums* sums) {
  LambPhase1 ph{runs_of(list), {}, 0, 0, nullptr};
  if (ph.r.runs.empty() || count == 0) {
    for (size_t t = 0; t < count; t++) sums[t] = LambSums{0.0, 0.0};
    return;
  }
  lamb_phase1(ph, s, tensors, count, 0.0, nullptr);
  std::vector<double2> host(count);
  read_back(host.data(), ph.sums->get(), count, "lamb_moments_multi (copy of the sums)");
  for (size_t t = 0; t < count; t++) sums[t] = LambSums{host[t].x, host[t].y};
}

void lamb_apply_multi_cuda(MultiTensorList list, const LambScalars& s, const LambTensor* tensors, size_t count,
                           const float* rates) {
  const Runs r = runs_of(list);
  if (r.runs.empty()) return;
  Table table;
  const size_t runs_at = table.add(r.runs.data(), r.runs.size()), tensors_at = table.add(tensors, count),
               rates_at = table.add(rates, count);
  table.upload();
  lamb_apply_multi_kernel<<<(unsigned)r.chunks, kThreads, 0, cuda_context().stream>>>(
      table.at<Run>(runs_at), r.count(), s, table.at<LambTensor>(tensors_at), table.at<float>(rates_at));
  check_launch("lamb_apply_multi");
}

// Phase 1, the rates on the device, phase 2: three launches, no host read.
void lamb_step_multi_cuda(MultiTensorList list, const LambScalars& s, const LambTensor* tensors, size_t count,
                          double lr) {
  LambPhase1 ph{runs_of(list), {}, 0, 0, nullptr};
  if (ph.r.runs.empty()) return;
  CudaContext& ctx = cuda_context();
  Scratch rates(count * sizeof(float));
  lamb_phase1(ph, s, tensors, count, lr, static_cast<float*>(rates.get()));
  lamb_apply_multi_kernel<<<(unsigned)ph.r.chunks, kThreads, 0, ctx.stream>>>(
      ph.table.at<Run>(ph.runs_at), ph.r.count(), s, ph.table.at<LambTensor>(ph.tensors_at),
      static_cast<const float*>(rates.get()));
  check_launch("lamb_step_multi (apply)");
}

void scale_multi_cuda(TensorList list, float factor) {
  const Runs r = runs_of(list);
  if (r.runs.empty()) return;
  Table table;
  const size_t runs_at = table.add(r.runs.data(), r.runs.size());
  table.upload();
  scale_multi_kernel<<<(unsigned)r.chunks, kThreads, 0, cuda_context().stream>>>(table.at<Run>(runs_at), r.count(),
                                                                                 factor);
  check_launch("scale_multi");
}

void sum_squares_multi_cuda(TensorList list, double* out) {
  for (size_t k = 0; k < list.count; k++) out[k] = 0.0;
  const Runs r = runs_of(list);
  if (r.runs.empty()) return;
  Table table;
  const size_t runs_at = table.add(r.runs.data(), r.runs.size());
  table.upload();
  CudaContext& ctx = cuda_context();
  Scratch partial((size_t)r.chunks * sizeof(double)), sums(r.runs.size() * sizeof(double));
  sum_squares_multi_kernel<<<(unsigned)r.chunks, kThreads, 0, ctx.stream>>>(table.at<Run>(runs_at), r.count(),
                                                                           static_cast<double*>(partial.get()));
  check_launch("sum_squares_multi");
  run_sums_kernel<<<blocks_of(r.count()), kThreads, 0, ctx.stream>>>(
      table.at<Run>(runs_at), r.count(), static_cast<const double*>(partial.get()), static_cast<double*>(sums.get()));
  check_launch("sum_squares_multi (view sums)");
  std::vector<double> host(r.runs.size());
  read_back(host.data(), sums.get(), host.size(), "sum_squares_multi (copy of the sums)");
  for (size_t j = 0; j < host.size(); j++) out[r.item[j]] = host[j];
}

// ---- single-tensor entry points --------------------------------------------------------------------------------

void adamw_cuda(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWScalars& s) {
  const int64_t n = param.numel();
  adamw_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(f32(param), f32(grad), f32(m), f32(v), n, s);
  check_launch("adamw_update");
}

// The multi form over one run (the same sums bit for bit).
LambSums lamb_moments_cuda(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                           const LambScalars& s, float wd) {
  const MultiTensorItem item{param, grad, m, v, 0};
  const LambTensor tensor{wd, false};
  LambSums sums{0.0, 0.0};
  lamb_moments_multi_cuda(MultiTensorList{&item, 1}, s, &tensor, 1, &sums);
  return sums;
}

void lamb_apply_cuda(const Tensor& param, const Tensor& m, const Tensor& v, const LambScalars& s, float wd,
                     float rate) {
  const int64_t n = param.numel();
  lamb_apply_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(f32(param), f32(m), f32(v), n, s, wd, rate);
  check_launch("lamb_apply");
}

void sgd_cuda(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s) {
  const int64_t n = param.numel();
  sgd_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(
      f32(param), f32(grad), momentum_buffer.present() ? f32(momentum_buffer) : nullptr, n, s);
  check_launch("sgd_update");
}

void scale_cuda(const Tensor& x, float factor) {
  const int64_t n = x.numel();
  scale_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(f32(x), n, factor);
  check_launch("scale");
}

// Both orders of ops.h are the multi form's fixed order here (the GPU has no thread count to depend on), then
// start + that sum (PARALLEL's shape); they differ from the CPU's orders by double rounding only (~1e-16 relative).
double sum_squares_cuda(const Tensor& x, SumOrder, double start) {
  double s = 0.0;
  sum_squares_multi_cuda(TensorList{&x, 1}, &s);
  return start + s;
}

int64_t count_nonfinite_cuda(const Tensor& x) {
  Scratch partial(kSumBlocks * sizeof(unsigned long long));
  count_nonfinite_kernel<<<kSumBlocks, kThreads, 0, cuda_context().stream>>>(
      f32(x), x.numel(), static_cast<unsigned long long*>(partial.get()));
  check_launch("count_nonfinite");
  unsigned long long host[kSumBlocks];
  read_back(host, partial.get(), kSumBlocks, "count_nonfinite (copy of the partial counts)");
  int64_t c = 0;
  for (unsigned b = 0; b < kSumBlocks; b++) c += (int64_t)host[b];
  return c;
}

void round_f16_cuda(const Tensor& x) {
  const int64_t n = x.numel();
  round_f16_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(f32(x), n);
  check_launch("round_to_f16_storage");
}

#undef LMFORGE_GRID_STRIDE

}  // namespace

void register_optim(KernelTable& t) {
  t.add<Kernel::ADAMW_UPDATE>(Device::CUDA, DType::F32, adamw_cuda);
  t.add<Kernel::LAMB_MOMENTS>(Device::CUDA, DType::F32, lamb_moments_cuda);
  t.add<Kernel::LAMB_APPLY>(Device::CUDA, DType::F32, lamb_apply_cuda);
  t.add<Kernel::SGD_UPDATE>(Device::CUDA, DType::F32, sgd_cuda);
  t.add<Kernel::SCALE>(Device::CUDA, DType::F32, scale_cuda);
  t.add<Kernel::SUM_SQUARES>(Device::CUDA, DType::F32, sum_squares_cuda);
  t.add<Kernel::COUNT_NONFINITE>(Device::CUDA, DType::F32, count_nonfinite_cuda);
  t.add<Kernel::ROUND_TO_F16_STORAGE>(Device::CUDA, DType::F32, round_f16_cuda);
  t.add<Kernel::ADAMW_UPDATE_MULTI>(Device::CUDA, DType::F32, adamw_multi_cuda);
  t.add<Kernel::SGD_UPDATE_MULTI>(Device::CUDA, DType::F32, sgd_multi_cuda);
  t.add<Kernel::LAMB_MOMENTS_MULTI>(Device::CUDA, DType::F32, lamb_moments_multi_cuda);
  t.add<Kernel::LAMB_APPLY_MULTI>(Device::CUDA, DType::F32, lamb_apply_multi_cuda);
  t.add<Kernel::LAMB_STEP_MULTI>(Device::CUDA, DType::F32, lamb_step_multi_cuda);
  t.add<Kernel::SCALE_MULTI>(Device::CUDA, DType::F32, scale_multi_cuda);
  t.add<Kernel::SUM_SQUARES_MULTI>(Device::CUDA, DType::F32, sum_squares_multi_cuda);
}

}  // namespace lmforge::kernels::cuda
