// defines: ParamSpan's constructors, Optimizer's slice bookkeeping, named state (device buffers) and the
//          one-process step()
#include "optim/optimizer.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "util/error.h"

namespace lmforge::optim {

ParamSpan::ParamSpan(std::string name_, const kernels::Tensor& param_, const kernels::Tensor& grad_, size_t size_,
                     bool weight_decay_)
    : name(std::move(name_)), param(param_), grad(grad_), size(size_), weight_decay(weight_decay_) {}

ParamSpan::ParamSpan(std::string name_, float* param_, float* grad_, size_t size_, bool weight_decay_)
    : ParamSpan(std::move(name_), kernels::make_view(param_, {(int64_t)size_}),
                kernels::make_view(grad_, {(int64_t)size_}), size_, weight_decay_) {}

Optimizer::Optimizer(std::string_view what, std::vector<ParamSpan> params, std::vector<std::string> state_names,
                     size_t shard_begin, size_t shard_end)
    : params_(std::move(params)), state_names_(std::move(state_names)) {
  const std::string who(what);
  offsets_.reserve(params_.size() + 1);
  offsets_.push_back(0);
  // The state lives where the parameters do; every span's parameters and gradients on that one device.
  const kernels::Device device = params_.empty() ? kernels::Device::CPU : params_.front().param.device;
  for (const ParamSpan& p : params_) {
    if (p.size > 0 && (!p.param.present() || !p.grad.present()))
      throw Error(who + ": parameter '" + p.name + "' has no parameter or gradient storage");
    if (p.size > 0 && (p.param.numel() != (int64_t)p.size || p.grad.numel() != (int64_t)p.size ||
                       p.param.dtype != kernels::DType::F32 || p.grad.dtype != kernels::DType::F32 ||
                       !p.param.contiguous() || !p.grad.contiguous() || p.param.ndim != 1 || p.grad.ndim != 1))
      throw Error(who + ": parameter '" + p.name + "' needs flat f32 views of " + std::to_string(p.size) +
                  " elements, got " + p.param.describe() + " and " + p.grad.describe());
    if (p.size > 0 && (p.param.device != device || p.grad.device != device))
      throw Error(who + ": parameter '" + p.name + "' is on another device than '" + params_.front().name + "'");
    numel_ += p.size;
    offsets_.push_back(numel_);
  }
  backend_ = &kernels::backend_for(device);
  if (shard_end == kAll) shard_end = numel_;
  if (shard_begin > shard_end || shard_end > numel_)
    throw Error(who + ": shard [" + std::to_string(shard_begin) + ", " + std::to_string(shard_end) +
                ") does not lie within the " + std::to_string(numel_) + " parameters");
  shard_begin_ = shard_begin;
  shard_end_ = shard_end;
  for (size_t k = 0; k < state_names_.size(); ++k) {
    states_.emplace_back(*backend_, kernels::DType::F32, shard_end_ - shard_begin_);
    states_.back().zero();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const size_t lo = std::max(offsets_[i], shard_begin_), hi = std::min(offsets_[i + 1], shard_end_);
    for (size_t b = lo; b < hi; b += kBlock)
      items_.push_back({i, b - offsets_[i], b - shard_begin_, std::min(kBlock, hi - b)});
  }
  for (const Item& it : items_) {
    kernels::MultiTensorItem r;
    r.param = item_param(it);
    r.grad = item_grad(it);
    if (states_.size() > 0) r.m = item_state(0, it);
    if (states_.size() > 1) r.v = item_state(1, it);
    r.group = static_cast<uint32_t>(it.param);
    runs_.push_back(r);
  }
}

void Optimizer::write_working_copy_in_runs() {
  for (const ParamSpan& p : params_)
    if (p.size > 0 && (!p.working.present() || p.working.device != kernels::Device::CPU ||
                       p.working.dtype != kernels::DType::BF16 || p.working.numel() != (int64_t)p.size))
      return;
  for (size_t k = 0; k < items_.size(); ++k) {
    const Item& it = items_[k];
    runs_[k].working = params_[it.param].working.slice0((int64_t)it.local, (int64_t)it.len);
  }
  writes_working_copy_ = !items_.empty();
}

bool Optimizer::cuts_a_tensor() const {
  auto inside = [&](size_t at) {
    const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), at);
    return it != offsets_.begin() && it != offsets_.end() && *std::prev(it) != at;
  };
  return shard_begin_ < shard_end_ && (inside(shard_begin_) || inside(shard_end_));
}

void Optimizer::step(double lr, double weight_decay) {
  if (needs_tensor_norms() && cuts_a_tensor())
    throw std::logic_error(std::string(name()) +
                           ": step() on a slice that cuts a tensor would use partial norms; reduce the sums of "
                           "begin_step() across the pieces and call finish_step()");
  whole_step(lr, weight_decay);
}

void Optimizer::whole_step(double lr, double weight_decay) {
  std::vector<double> sums(needs_tensor_norms() ? 2 * params_.size() : 0, 0.0);
  begin_step(lr, weight_decay, sums);
  finish_step(lr, weight_decay, sums);
}

size_t Optimizer::state_index(std::string_view state) const {
  for (size_t k = 0; k < state_names_.size(); ++k)
    if (state_names_[k] == state) return k;
  throw std::out_of_range(std::string(name()) + " has no state '" + std::string(state) + "'");
}

kernels::Tensor Optimizer::state(size_t k) const {
  const kernels::Buffer& b = states_.at(k);
  kernels::Tensor t = kernels::make_view(b.data(), kernels::DType::F32, {(int64_t)b.count()}, backend_->device());
  return t;
}

kernels::Tensor Optimizer::state_of(size_t k, size_t i) const {
  const size_t lo = std::max(offsets_.at(i), shard_begin_), hi = std::min(offsets_.at(i + 1), shard_end_);
  if (lo >= hi) return state(k).slice0(0, 0);
  return state(k).slice0((int64_t)(lo - shard_begin_), (int64_t)(hi - lo));
}

namespace {
std::vector<float> host_copy(kernels::Backend& backend, const kernels::Tensor& t) {
  std::vector<float> out((size_t)t.numel());
  if (!out.empty()) backend.copy_to_host(out.data(), t.data, out.size() * sizeof(float));
  return out;
}
}  // namespace

std::vector<float> Optimizer::state_values(size_t k) const { return host_copy(*backend_, state(k)); }

std::vector<float> Optimizer::state_values_of(size_t k, size_t i) const { return host_copy(*backend_, state_of(k, i)); }

size_t Optimizer::state_bytes() const {
  size_t n = 0;
  for (const auto& s : states_) n += s.bytes();
  return n;
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace lmforge::optim
