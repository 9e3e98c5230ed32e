// defines: Optimizer's slice bookkeeping, named state and the one-process step()
#include "optim/optimizer.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "util/error.h"

namespace lmforge::optim {

Optimizer::Optimizer(std::string_view what, std::vector<ParamSpan> params, std::vector<std::string> state_names,
                     size_t shard_begin, size_t shard_end)
    : params_(std::move(params)), state_names_(std::move(state_names)) {
  const std::string who(what);
  offsets_.reserve(params_.size() + 1);
  offsets_.push_back(0);
  for (const ParamSpan& p : params_) {
    if (p.size > 0 && (p.param == nullptr || p.grad == nullptr))
      throw Error(who + ": parameter '" + p.name + "' has no parameter or gradient storage");
    numel_ += p.size;
    offsets_.push_back(numel_);
  }
  if (shard_end == kAll) shard_end = numel_;
  if (shard_begin > shard_end || shard_end > numel_)
    throw Error(who + ": shard [" + std::to_string(shard_begin) + ", " + std::to_string(shard_end) +
                ") does not lie within the " + std::to_string(numel_) + " parameters");
  shard_begin_ = shard_begin;
  shard_end_ = shard_end;
  states_.assign(state_names_.size(), std::vector<float>(shard_end_ - shard_begin_, 0.0f));
  for (size_t i = 0; i < params_.size(); ++i) {
    const size_t lo = std::max(offsets_[i], shard_begin_), hi = std::min(offsets_[i + 1], shard_end_);
    for (size_t b = lo; b < hi; b += kBlock)
      items_.push_back({i, b - offsets_[i], b - shard_begin_, std::min(kBlock, hi - b)});
  }
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
  std::vector<double> sums(needs_tensor_norms() ? 2 * params_.size() : 0, 0.0);
  begin_step(lr, weight_decay, sums);
  finish_step(lr, weight_decay, sums);
}

size_t Optimizer::state_index(std::string_view state) const {
  for (size_t k = 0; k < state_names_.size(); ++k)
    if (state_names_[k] == state) return k;
  throw std::out_of_range(std::string(name()) + " has no state '" + std::string(state) + "'");
}

std::span<float> Optimizer::state_of(size_t k, size_t i) {
  const size_t lo = std::max(offsets_.at(i), shard_begin_), hi = std::min(offsets_.at(i + 1), shard_end_);
  if (lo >= hi) return {};
  return std::span<float>(states_.at(k).data() + (lo - shard_begin_), hi - lo);
}

std::span<const float> Optimizer::state_of(size_t k, size_t i) const {
  return const_cast<Optimizer*>(this)->state_of(k, i);
}

size_t Optimizer::state_bytes() const {
  size_t n = 0;
  for (const auto& s : states_) n += s.size() * sizeof(float);
  return n;
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace lmforge::optim
