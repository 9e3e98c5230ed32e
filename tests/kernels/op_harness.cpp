// defines: the op-case harness of op_harness.h
#include "op_harness.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/ops.h"

namespace lmforge::kernels::testing {

std::string cuda_unavailable() {
  try {
    backend_for(Device::CUDA);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::vector<Target> targets() {
  std::vector<Target> all;
  std::vector<Device> devices;
  // The CPU's kernels are absent from a kernels-only build (only the CUDA backend there).
  if (op_supported(Op::ADD, Device::CPU, DType::F32)) devices = {Device::CPU, Device::GUARDED};
  if (cuda_unavailable().empty()) devices.push_back(Device::CUDA);
  for (Device d : devices)
    for (DType t : {DType::F32, DType::BF16, DType::F16}) all.push_back({d, t});
  return all;
}

uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// binary16 through the compiler's _Float16 (GCC >= 12 on x86-64), or the CPU's F16C conversion where the compiler
// has no _Float16 on this target (clang 14, the sanitizer build): round to nearest even, overflow to inf —
// independent of the kernels' own conversion.
uint16_t to_f16(float x) {
#if defined(__FLT16_MAX__)
  const _Float16 h = (_Float16)x;
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
#else
  return _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
#endif
}
float from_f16(uint16_t u) {
#if defined(__FLT16_MAX__)
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return (float)h;
#else
  return _cvtsh_ss(u);
#endif
}

size_t count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= (size_t)d;
  return n;
}

std::vector<float> noise(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

namespace {
Tensor view_of(const Buffer& b, const std::vector<int64_t>& shape, Device device) {
  Tensor t = make_view(b.data(), b.dtype(), {1}, device);
  t.ndim = (int)shape.size();
  for (size_t i = 0; i < shape.size(); i++) t.shape[i] = shape[i];
  return t;
}
}  // namespace

Buffer upload(Backend& be, DType dtype, const std::vector<float>& host) {
  Buffer b(be, dtype, host.size());
  if (dtype == DType::F32) {
    be.copy_to_device(b.data(), host.data(), host.size() * 4);
  } else {
    std::vector<uint16_t> h(host.size());
    for (size_t i = 0; i < h.size(); i++) h[i] = dtype == DType::F16 ? to_f16(host[i]) : to_bf16(host[i]);
    be.copy_to_device(b.data(), h.data(), h.size() * 2);
  }
  return b;
}

std::vector<float> download(Backend& be, const Buffer& b) {
  std::vector<float> host(b.count());
  if (b.dtype() == DType::F32) {
    be.copy_to_host(host.data(), b.data(), host.size() * 4);
  } else {
    std::vector<uint16_t> h(host.size());
    be.copy_to_host(h.data(), b.data(), h.size() * 2);
    for (size_t i = 0; i < h.size(); i++) host[i] = b.dtype() == DType::F16 ? from_f16(h[i]) : from_bf16(h[i]);
  }
  return host;
}

Result execute(const OpCase& c, const Target& target, const std::vector<std::vector<float>>& in_values,
               const std::vector<std::vector<float>>* dout, const std::vector<std::vector<float>>* prefill) {
  Backend& be = backend_for(target.device);
  std::vector<Buffer> in, din, ids, saved, out, dt;
  OpRun run;
  for (size_t i = 0; i < c.in.size(); i++) {
    in.push_back(upload(be, target.dtype, in_values[i]));
    run.in.push_back(view_of(in.back(), c.in[i].shape, target.device));
  }
  for (const auto& id : c.ids) {
    ids.emplace_back(be, DType::I32, id.values.size());
    be.copy_to_device(ids.back().data(), id.values.data(), id.values.size() * 4);
    run.ids.push_back(view_of(ids.back(), id.shape, target.device));
  }
  for (const auto& shape : c.saved) {
    saved.emplace_back(be, DType::F32, count(shape));
    saved.back().zero();
    run.saved.push_back(view_of(saved.back(), shape, target.device));
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& spec : c.out) {
    // Poisoned: an element the forward does not write stays NaN and fails every comparison.
    out.push_back(upload(be, spec.f32 ? DType::F32 : target.dtype, std::vector<float>(count(spec.shape), nan)));
    run.out.push_back(view_of(out.back(), spec.shape, target.device));
  }
  c.forward(run);
  Result r;
  for (const Buffer& b : out) r.out.push_back(download(be, b));
  if (dout == nullptr || !c.backward) return r;
  for (size_t j = 0; j < c.out.size(); j++) {
    dt.push_back(upload(be, c.out[j].f32 ? DType::F32 : target.dtype, (*dout)[j]));
    run.dout.push_back(view_of(dt.back(), c.out[j].shape, target.device));
  }
  for (size_t i = 0; i < c.in.size(); i++) {
    if (!c.in[i].grad) {
      din.emplace_back();
      run.din.push_back(Tensor{});
      continue;
    }
    din.push_back(upload(be, target.dtype, (*prefill)[i]));
    run.din.push_back(view_of(din.back(), c.in[i].shape, target.device));
  }
  c.backward(run);
  for (size_t i = 0; i < c.in.size(); i++) r.din.push_back(c.in[i].grad ? download(be, din[i]) : std::vector<float>());
  return r;
}

std::vector<std::vector<float>> values_of(const OpCase& c) {
  std::vector<std::vector<float>> v;
  for (const FloatOperand& o : c.in) v.push_back(o.values);
  return v;
}
std::vector<std::vector<int32_t>> ids_of(const OpCase& c) {
  std::vector<std::vector<int32_t>> v;
  for (const auto& o : c.ids) v.push_back(o.values);
  return v;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::BF16: return 3e-2;
    case DType::F16: return 4e-3;
    default: return 2e-5;
  }
}
double least_difference(DType dtype) { return dtype == DType::BF16 ? 3e-4 : 3e-5; }

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-30, worst = 0;
  size_t at = 0;
  bool nan = false;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); i++) {
    const double d = std::fabs(got[i] - want[i]);
    if (d != d && !nan) nan = true, worst = d, at = i;  // a NaN (an unwritten, poisoned element) is the worst
    if (!nan && d > worst) worst = d, at = i;
  }
  EXPECT_TRUE(!nan && worst <= rel * std::max(1.0, scale))
      << what << ": element " << at << " is " << got[at] << ", expected " << want[at] << " (max |value| " << scale
      << ", tolerance " << rel << ")";
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace lmforge::kernels::testing
