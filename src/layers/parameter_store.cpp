// defines: ParameterStore (flat buffers, views, streaming initialisation)
#include "layers/parameter_store.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::layers {

ParameterStore::ParameterStore(kernels::Backend& backend, int tp_rank, int tp_size)
    : backend_(backend), table_(tp_rank, tp_size) {}

size_t ParameterStore::add(std::string name, std::vector<int64_t> shape, bool weight_decay, Init init, int split_dim,
                           int split_blocks) {
  if (allocated()) throw std::logic_error("ParameterStore::add after allocate(): " + name);
  inits_.push_back(init);
  return table_.add(std::move(name), std::move(shape), weight_decay, split_dim, split_blocks);
}

void ParameterStore::allocate() {
  values_.resize(backend_, kernels::DType::F32, table_.local_numel());
  grads_.resize(backend_, kernels::DType::F32, table_.local_numel());
  values_.zero();
  grads_.zero();
}

kernels::Tensor ParameterStore::view(const kernels::Buffer& buffer, size_t i) const {
  if (!allocated()) throw std::logic_error("ParameterStore: view before allocate()");
  const param::Parameter& p = table_[i];
  kernels::Tensor t;
  t.data = buffer.f32() + p.offset;
  t.dtype = kernels::DType::F32;
  t.device = backend_.device();
  t.ndim = (int)p.local_shape.size();
  for (size_t d = 0; d < p.local_shape.size(); d++) t.shape[d] = p.local_shape[d];
  return t;
}

kernels::Tensor ParameterStore::value(size_t i) const { return view(values_, i); }

void ParameterStore::set_compute_dtype(kernels::DType dtype) {
  if (dtype == kernels::DType::I32) throw std::logic_error("ParameterStore: an integer compute dtype");
  compute_dtype_ = dtype;
  if (dtype == kernels::DType::F32) {
    working_ = kernels::Buffer();
    widened_ = kernels::Buffer();
    return;
  }
  if (allocated()) sync_compute_copy();
}

kernels::Tensor ParameterStore::compute_value(size_t i) const {
  if (compute_dtype_ == kernels::DType::F32) return value(i);
  kernels::Tensor t = view(values_, i);
  t.data = static_cast<char*>(working_.data()) + table_[i].offset * kernels::dtype_size(compute_dtype_);
  t.dtype = compute_dtype_;
  if (widened_.data() != nullptr) t.widened = widened_.f32() + table_[i].offset;
  return t;
}

kernels::Tensor ParameterStore::working_view() const {
  kernels::Tensor t =
      kernels::make_view(working_.data(), compute_dtype_, {(int64_t)table_.local_numel()}, backend_.device());
  if (widened_.data() != nullptr) t.widened = widened_.f32();
  return t;
}

kernels::Tensor ParameterStore::working_copy() const {
  if (compute_dtype_ != kernels::DType::BF16 || working_.data() == nullptr) return {};
  return working_view();
}

void ParameterStore::sync_compute_copy() {
  if (compute_dtype_ == kernels::DType::F32 || !allocated()) return;
  const size_t n = table_.local_numel();
  working_.resize(backend_, compute_dtype_, n);
  if (compute_dtype_ == kernels::DType::BF16 && backend_.wants_widened_bf16_weights())
    widened_.resize(backend_, kernels::DType::F32, n);
  else
    widened_ = kernels::Buffer();
  // The copy op rounds to nearest even, and writes a bf16 copy's fp32 mirror (the exact widening of the rounded
  // values) in the same pass.
  kernels::copy(working_view(), kernels::make_view(values_.f32(), {(int64_t)n}, backend_.device()));
}
kernels::Tensor ParameterStore::grad(size_t i) const { return view(grads_, i); }

void ParameterStore::zero_grads() { grads_.zero(); }

uint64_t ParameterStore::stream_draws(size_t i) const {
  if (inits_.at(i).kind != Init::NORMAL) return 0;
  const uint64_t n = table_[i].whole_numel();
  return 2 * ((n + 1) / 2);  // two uniforms per pair, a last odd element still draws a pair
}

void ParameterStore::init(uint64_t seed, const std::vector<uint64_t>& discard_before) {
  if (!discard_before.empty() && discard_before.size() != table_.size())
    throw std::logic_error("ParameterStore::init: one discard count per tensor");
  // Box-Muller over mt19937_64 rather than std::normal_distribution, whose algorithm differs between standard
  // libraries: the same seed gives the same model everywhere.
  std::mt19937_64 rng(seed);
  auto uniform = [&]() { return ((rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };  // (0,1)
  std::vector<float> host;
  for (size_t i = 0; i < table_.size(); i++) {
    const param::Parameter& p = table_[i];
    const Init& init = inits_[i];
    if (!discard_before.empty()) rng.discard(discard_before[i]);
    host.assign(p.numel, init.kind == Init::ONES ? 1.0f : 0.0f);
    if (init.kind == Init::NORMAL) {
      // The whole tensor's stream in row-major order; runs come in increasing whole offset, so one pass keeps them.
      std::vector<param::LocalRun> runs;
      param::for_each_local_run(p, table_.tp_rank(), table_.tp_size(),
                                [&](const param::LocalRun& r) { runs.push_back(r); });
      size_t run = 0;
      const size_t n = p.whole_numel();
      auto keep = [&](size_t index, float value) {
        while (run < runs.size() && index >= runs[run].whole_offset + runs[run].length) run++;
        if (run < runs.size() && index >= runs[run].whole_offset)
          host[runs[run].local_offset + (index - runs[run].whole_offset)] = value;
      };
      for (size_t k = 0; k < n; k += 2) {
        const double r = std::sqrt(-2.0 * std::log(uniform())), a = 2.0 * M_PI * uniform();
        keep(k, (float)(init.std * r * std::cos(a)));
        if (k + 1 < n) keep(k + 1, (float)(init.std * r * std::sin(a)));
      }
    }
    backend_.copy_to_device(values_.f32() + p.offset, host.data(), p.numel * sizeof(float));
  }
  zero_grads();
  sync_compute_copy();
}

}  // namespace lmforge::layers
