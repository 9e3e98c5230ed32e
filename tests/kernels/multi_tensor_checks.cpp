// defines: the multi-tensor op checks of multi_tensor_checks.h
#include "multi_tensor_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "op_harness.h"

namespace lmforge::kernels::testing {
namespace {

// Tensor sizes: single elements, odd sizes around the CUDA chunk (65536) and the optimizer's block (16384), an
// empty tensor, a size over four chunks.
const std::vector<size_t> kSizes = {1, 7, 0, 65537, 300001, 3, 16384};

// Host values of a set of tensors: param, grad and two state arrays each.
struct HostState {
  std::vector<std::vector<float>> p, g, m, v;
};

HostState make_state(const std::vector<size_t>& sizes, uint32_t seed) {
  HostState s;
  for (size_t t = 0; t < sizes.size(); t++) {
    const uint32_t k = seed + 10 * (uint32_t)t;
    s.p.push_back(noise(sizes[t], k));
    s.g.push_back(noise(sizes[t], k + 1));
    s.m.push_back(noise(sizes[t], k + 2));
    std::vector<float> v = noise(sizes[t], k + 3);
    for (float& x : v) x = x * x;  // a second moment is never negative
    s.v.push_back(v);
  }
  return s;
}

// The same tensors in a device's memory (buffers of at least one element; views of the tensor's size).
struct DeviceState {
  Backend* be = nullptr;
  std::vector<Buffer> p, g, m, v;
  std::vector<size_t> sizes;

  static Buffer put(Backend& be, const std::vector<float>& host) {
    Buffer b(be, DType::F32, host.empty() ? 1 : host.size());
    if (!host.empty()) be.copy_to_device(b.data(), host.data(), host.size() * sizeof(float));
    return b;
  }
  DeviceState(Device device, const HostState& h) : be(&backend_for(device)) {
    for (size_t t = 0; t < h.p.size(); t++) {
      p.push_back(put(*be, h.p[t]));
      g.push_back(put(*be, h.g[t]));
      m.push_back(put(*be, h.m[t]));
      v.push_back(put(*be, h.v[t]));
      sizes.push_back(h.p[t].size());
    }
  }
  Tensor view(const std::vector<Buffer>& b, size_t t, size_t begin, size_t len) const {
    return make_view(b[t].data(), DType::F32, {(int64_t)std::max<size_t>(sizes[t], 1)}, be->device())
        .slice0((int64_t)begin, (int64_t)len);
  }
  static std::vector<float> get(Backend& be, const Buffer& b, size_t n) {
    std::vector<float> out(n);
    if (n > 0) be.copy_to_host(out.data(), b.data(), n * sizeof(float));
    return out;
  }
  HostState download() const {
    HostState h;
    for (size_t t = 0; t < sizes.size(); t++) {
      h.p.push_back(get(*be, p[t], sizes[t]));
      h.g.push_back(get(*be, g[t], sizes[t]));
      h.m.push_back(get(*be, m[t], sizes[t]));
      h.v.push_back(get(*be, v[t], sizes[t]));
    }
    return h;
  }
};

// A run: elements [begin, begin + len) of tensor t.
struct RunSpec {
  size_t t, begin, len;
};

// Every tensor cut into up to three runs, listed piece by piece (all first pieces, then all second pieces, …), so
// a tensor's runs are not next to each other in the list; empty pieces stay in the list.
std::vector<RunSpec> cut_runs(const std::vector<size_t>& sizes) {
  std::vector<RunSpec> runs;
  for (size_t piece = 0; piece < 3; piece++)
    for (size_t t = 0; t < sizes.size(); t++) {
      const size_t n = sizes[t];
      const size_t a = n < 10 ? (piece == 0 ? 0 : n) : n * piece / 3, b = n < 10 ? n : n * (piece + 1) / 3;
      if (n < 10 && piece > 0) {
        if (piece == 1) runs.push_back({t, n, 0});  // an empty run at the tensor's end
        continue;
      }
      runs.push_back({t, a, b - a});
    }
  return runs;
}

// The runs as multi-tensor items over d; group = the tensor's group (group_of), m and v as asked.
std::vector<MultiTensorItem> items_of(const DeviceState& d, const std::vector<RunSpec>& runs,
                                      const std::vector<uint32_t>& group_of, bool with_m, bool with_v,
                                      const std::vector<bool>* m_present = nullptr) {
  std::vector<MultiTensorItem> items;
  for (const RunSpec& r : runs) {
    MultiTensorItem it;
    it.param = d.view(d.p, r.t, r.begin, r.len);
    it.grad = d.view(d.g, r.t, r.begin, r.len);
    if (with_m && (m_present == nullptr || (*m_present)[r.t])) it.m = d.view(d.m, r.t, r.begin, r.len);
    if (with_v) it.v = d.view(d.v, r.t, r.begin, r.len);
    it.group = group_of[r.t];
    items.push_back(it);
  }
  return items;
}

// Bit for bit, naming the array, the tensor and the first differing element.
void expect_bitwise(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t t = 0; t < got.size(); t++) {
    ASSERT_EQ(got[t].size(), want[t].size()) << what << " tensor " << t;
    if (got[t].empty() || std::memcmp(got[t].data(), want[t].data(), got[t].size() * sizeof(float)) == 0) continue;
    size_t i = 0;
    while (std::memcmp(&got[t][i], &want[t][i], sizeof(float)) == 0) i++;
    ADD_FAILURE() << what << ": tensor " << t << " (" << got[t].size() << " elements) differs first at " << i
                  << ": " << got[t][i] << " vs " << want[t][i];
  }
}

void expect_state_bitwise(const HostState& got, const HostState& want, const std::string& what, bool p = true,
                          bool m = true, bool v = true) {
  if (p) expect_bitwise(got.p, want.p, what + " param");
  if (m) expect_bitwise(got.m, want.m, what + " m");
  if (v) expect_bitwise(got.v, want.v, what + " v");
}

std::string on(Device device) { return std::string(" on ") + device_name(device); }
// (The comparisons with the CPU need its kernels: a kernels-only build for a GPU machine has none.)

// ---- AdamW --------------------------------------------------------------------------------------------------------

std::vector<AdamWScalars> adamw_groups() {
  // Step 3, lr 1e-3: group 0 decays (wd 0.1), group 1 does not.
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, t = 3;
  auto make = [&](double wd) {
    return AdamWScalars{(float)(1.0 - lr * wd), (float)b1, (float)(1.0 - b1), (float)b2, (float)(1.0 - b2),
                        (float)std::sqrt(1.0 - std::pow(b2, t)), 1e-8f, (float)(-(lr / (1.0 - std::pow(b1, t))))};
  };
  return {make(0.1), make(0.0)};
}

HostState adamw_single(Device device, const HostState& h, const std::vector<RunSpec>& runs,
                       const std::vector<uint32_t>& group_of) {
  DeviceState d(device, h);
  const std::vector<AdamWScalars> groups = adamw_groups();
  for (const RunSpec& r : runs)
    if (r.len > 0)
      adamw_update(d.view(d.p, r.t, r.begin, r.len), d.view(d.g, r.t, r.begin, r.len),
                   d.view(d.m, r.t, r.begin, r.len), d.view(d.v, r.t, r.begin, r.len), groups[group_of[r.t]]);
  return d.download();
}

}  // namespace

void check_adamw_multi(Device device) {
  const HostState h = make_state(kSizes, 100);
  const std::vector<RunSpec> runs = cut_runs(kSizes);
  std::vector<uint32_t> group_of;
  for (size_t t = 0; t < kSizes.size(); t++) group_of.push_back((uint32_t)(t % 2));
  const std::vector<AdamWScalars> groups = adamw_groups();
  DeviceState d(device, h);
  const std::vector<MultiTensorItem> items = items_of(d, runs, group_of, true, true);
  adamw_update_multi({items.data(), items.size()}, groups.data(), groups.size());
  const HostState multi = d.download();
  expect_state_bitwise(multi, adamw_single(device, h, runs, group_of), "adamw multi vs single" + on(device));
  if (device != Device::CPU && built_with(Device::CPU))
    expect_state_bitwise(multi, adamw_single(Device::CPU, h, runs, group_of), "adamw multi" + on(device) + " vs cpu");
  // A group outside the list is refused, naming it.
  std::vector<MultiTensorItem> bad = items;
  bad[0].group = 2;
  try {
    adamw_update_multi({bad.data(), bad.size()}, groups.data(), groups.size());
    ADD_FAILURE() << "a run naming group 2 of 2 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("group 2 of 2"), std::string::npos) << e.what();
  }
}

// ---- SGD ----------------------------------------------------------------------------------------------------------

namespace {

// Group 0: decay, later step; 1: no decay, first step (the buffer starts as d); 2: decay, first step.
std::vector<SgdScalars> sgd_groups() {
  return {SgdScalars{true, false, 0.01f, 0.9f, -0.1f}, SgdScalars{false, true, 0.01f, 0.9f, -0.1f},
          SgdScalars{true, true, 0.01f, 0.9f, -0.1f}};
}

// Tensors 0, 3, 6 have no momentum buffer.
std::vector<bool> sgd_buffers() {
  std::vector<bool> b;
  for (size_t t = 0; t < kSizes.size(); t++) b.push_back(t % 3 != 0);
  return b;
}

HostState sgd_single(Device device, const HostState& h, const std::vector<RunSpec>& runs,
                     const std::vector<uint32_t>& group_of) {
  DeviceState d(device, h);
  const std::vector<SgdScalars> groups = sgd_groups();
  const std::vector<bool> buffers = sgd_buffers();
  for (const RunSpec& r : runs)
    if (r.len > 0)
      sgd_update(d.view(d.p, r.t, r.begin, r.len), d.view(d.g, r.t, r.begin, r.len),
                 buffers[r.t] ? d.view(d.m, r.t, r.begin, r.len) : Tensor{}, groups[group_of[r.t]]);
  return d.download();
}

}  // namespace

void check_sgd_multi(Device device) {
  const HostState h = make_state(kSizes, 200);
  const std::vector<RunSpec> runs = cut_runs(kSizes);
  std::vector<uint32_t> group_of;
  for (size_t t = 0; t < kSizes.size(); t++) group_of.push_back((uint32_t)(t % 3));
  const std::vector<SgdScalars> groups = sgd_groups();
  const std::vector<bool> buffers = sgd_buffers();
  DeviceState d(device, h);
  const std::vector<MultiTensorItem> items = items_of(d, runs, group_of, true, false, &buffers);
  sgd_update_multi({items.data(), items.size()}, groups.data(), groups.size());
  const HostState multi = d.download();
  expect_state_bitwise(multi, sgd_single(device, h, runs, group_of), "sgd multi vs single" + on(device), true, true,
                       false);
  if (device != Device::CPU && built_with(Device::CPU))
    expect_state_bitwise(multi, sgd_single(Device::CPU, h, runs, group_of), "sgd multi" + on(device) + " vs cpu",
                         true, true, false);
}

// ---- LAMB ---------------------------------------------------------------------------------------------------------

namespace {

// kSizes plus a tensor whose parameters are all 0 (‖p‖ = 0) and one whose update direction is 0 (g = m = v = 0
// and no decay: u = 0), both with the trust ratio on, where the rate must fall back to lr.
std::vector<size_t> lamb_sizes() {
  std::vector<size_t> s = kSizes;
  s.push_back(100);  // p = 0
  s.push_back(90);   // u = 0
  return s;
}

HostState lamb_state() {
  const std::vector<size_t> sizes = lamb_sizes();
  HostState h = make_state(sizes, 300);
  const size_t zero_p = sizes.size() - 2, zero_u = sizes.size() - 1;
  for (float& x : h.p[zero_p]) x = 0.0f;
  for (auto* a : {&h.g, &h.m, &h.v})
    for (float& x : (*a)[zero_u]) x = 0.0f;
  return h;
}

std::vector<LambTensor> lamb_tensors() {
  std::vector<LambTensor> t;
  const size_t n = lamb_sizes().size();
  for (size_t i = 0; i < n; i++) {
    const bool decayed = i % 4 != 1;  // tensors 1 and 5: no decay (5 with the ratio anyway: use_nvlamb)
    t.push_back({decayed ? 0.01f : 0.0f, decayed || i == 5});
  }
  t[n - 1] = {0.0f, true};  // u = 0 needs no decay
  return t;
}

LambScalars lamb_scalars() {
  const float b1 = 0.9f, b2 = 0.999f;
  const double t = 3;
  return LambScalars{b1, 1.0f - b1, b2, 1.0f - b2, (float)(1.0 - std::pow(double(b1), t)),
                     (float)(1.0 - std::pow(double(b2), t)), 1e-6f};
}

constexpr double kLambLr = 2e-3;

// The single-tensor ops over the runs: moments, each tensor's sums added over its runs in list order from 0,
// rates on the host, apply.
HostState lamb_single(Device device, const HostState& h, const std::vector<RunSpec>& runs,
                      std::vector<LambSums>& sums) {
  DeviceState d(device, h);
  const std::vector<LambTensor> info = lamb_tensors();
  const LambScalars s = lamb_scalars();
  sums.assign(info.size(), LambSums{0.0, 0.0});
  for (const RunSpec& r : runs) {
    if (r.len == 0) continue;
    const LambSums run = lamb_moments(d.view(d.p, r.t, r.begin, r.len), d.view(d.g, r.t, r.begin, r.len),
                                      d.view(d.m, r.t, r.begin, r.len), d.view(d.v, r.t, r.begin, r.len), s,
                                      info[r.t].wd);
    sums[r.t].p_sq += run.p_sq;
    sums[r.t].u_sq += run.u_sq;
  }
  for (const RunSpec& r : runs) {
    if (r.len == 0) continue;
    const float rate = lamb_trust_rate(kLambLr, sums[r.t].p_sq, sums[r.t].u_sq, info[r.t].trust);
    lamb_apply(d.view(d.p, r.t, r.begin, r.len), d.view(d.m, r.t, r.begin, r.len), d.view(d.v, r.t, r.begin, r.len),
               s, info[r.t].wd, rate);
  }
  return d.download();
}

}  // namespace

void check_lamb_multi(Device device) {
  const std::vector<size_t> sizes = lamb_sizes();
  const HostState h = lamb_state();
  const std::vector<RunSpec> runs = cut_runs(sizes);
  std::vector<uint32_t> group_of;
  for (size_t t = 0; t < sizes.size(); t++) group_of.push_back((uint32_t)t);
  const std::vector<LambTensor> info = lamb_tensors();
  const LambScalars s = lamb_scalars();
  std::vector<LambSums> single_sums;
  const HostState single = lamb_single(device, h, runs, single_sums);

  // The two phases as multi-tensor ops, the rates on the host.
  DeviceState d(device, h);
  const std::vector<MultiTensorItem> items = items_of(d, runs, group_of, true, true);
  std::vector<LambSums> sums(info.size(), LambSums{-1.0, -1.0});
  lamb_moments_multi({items.data(), items.size()}, s, info.data(), info.size(), sums.data());
  for (size_t t = 0; t < info.size(); t++) {
    EXPECT_EQ(std::memcmp(&sums[t].p_sq, &single_sums[t].p_sq, sizeof(double)), 0)
        << "tensor " << t << on(device) << ": Σp² " << sums[t].p_sq << " vs " << single_sums[t].p_sq;
    EXPECT_EQ(std::memcmp(&sums[t].u_sq, &single_sums[t].u_sq, sizeof(double)), 0)
        << "tensor " << t << on(device) << ": Σu² " << sums[t].u_sq << " vs " << single_sums[t].u_sq;
  }
  std::vector<float> rates;
  for (size_t t = 0; t < info.size(); t++)
    rates.push_back(lamb_trust_rate(kLambLr, sums[t].p_sq, sums[t].u_sq, info[t].trust));
  lamb_apply_multi({items.data(), items.size()}, s, info.data(), info.size(), rates.data());
  const HostState phases = d.download();
  expect_state_bitwise(phases, single, "lamb multi phases vs single" + on(device));

  // The trust-ratio edge cases took the fallback rate lr; the empty tensor has zero sums.
  const size_t zero_p = sizes.size() - 2, zero_u = sizes.size() - 1;
  EXPECT_EQ(sums[zero_p].p_sq, 0.0);
  EXPECT_GT(sums[zero_p].u_sq, 0.0);
  EXPECT_EQ(sums[zero_u].u_sq, 0.0);
  EXPECT_GT(sums[zero_u].p_sq, 0.0);
  EXPECT_EQ(rates[zero_p], (float)kLambLr);
  EXPECT_EQ(rates[zero_u], (float)kLambLr);
  EXPECT_EQ(sums[2].p_sq, 0.0);
  EXPECT_NE(rates[0], (float)kLambLr);  // a decayed tensor's ratio applies

  // Both phases in one op (on a GPU the rates never leave it): the same bits.
  DeviceState d2(device, h);
  const std::vector<MultiTensorItem> items2 = items_of(d2, runs, group_of, true, true);
  lamb_step_multi({items2.data(), items2.size()}, s, info.data(), info.size(), kLambLr);
  expect_state_bitwise(d2.download(), phases, "lamb_step_multi vs the two phases" + on(device));

  if (device != Device::CPU && built_with(Device::CPU)) {
    // The moments are element-wise (the CPU's bits); the sums' order differs from the CPU's, so Σ and the
    // parameters (through the rate) agree to rounding.
    std::vector<LambSums> cpu_sums;
    const HostState cpu = lamb_single(Device::CPU, h, runs, cpu_sums);
    expect_state_bitwise(phases, cpu, "lamb multi" + on(device) + " vs cpu", false, true, true);
    for (size_t t = 0; t < info.size(); t++) {
      EXPECT_NEAR(sums[t].p_sq, cpu_sums[t].p_sq, 1e-12 * std::max(1.0, cpu_sums[t].p_sq)) << "tensor " << t;
      EXPECT_NEAR(sums[t].u_sq, cpu_sums[t].u_sq, 1e-12 * std::max(1.0, cpu_sums[t].u_sq)) << "tensor " << t;
    }
    for (size_t t = 0; t < info.size(); t++)
      expect_close(phases.p[t], widen(cpu.p[t]), 1e-6, "lamb param tensor " + std::to_string(t) + on(device));
  }
}

// ---- scale and Σx² ------------------------------------------------------------------------------------------------

void check_scale_and_sum_squares_multi(Device device) {
  const HostState h = make_state(kSizes, 400);
  const std::vector<RunSpec> runs = cut_runs(kSizes);
  DeviceState single(device, h), multi(device, h);
  std::vector<Tensor> views;
  std::vector<double> want;
  for (const RunSpec& r : runs) {
    views.push_back(multi.view(multi.g, r.t, r.begin, r.len));
    want.push_back(r.len == 0 ? 0.0
                              : sum_squares(single.view(single.g, r.t, r.begin, r.len), SumOrder::PARALLEL));
  }
  std::vector<double> got(views.size(), -1.0);
  sum_squares_multi({views.data(), views.size()}, got.data());
  for (size_t k = 0; k < views.size(); k++)
    EXPECT_EQ(std::memcmp(&got[k], &want[k], sizeof(double)), 0)
        << "view " << k << " (" << runs[k].len << " elements)" << on(device) << ": " << got[k] << " vs " << want[k];

  for (const RunSpec& r : runs)
    if (r.len > 0) scale(single.view(single.g, r.t, r.begin, r.len), 0.37f);
  scale_multi({views.data(), views.size()}, 0.37f);
  expect_bitwise(multi.download().g, single.download().g, "scale_multi vs scale" + on(device));
}

}  // namespace lmforge::kernels::testing
