// defines: Parameter::whole_numel, for_each_local_run, ParamTable
#include "param/parameter.h"

#include <algorithm>

#include "util/error.h"

namespace lmforge::param {

namespace {
size_t product(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= (size_t)d;
  return n;
}
}  // namespace

size_t Parameter::whole_numel() const { return product(shape); }

// Row-major: the whole tensor is `outer` rows of [split length × inner]; along split_dim there are `blocks` blocks of
// `block` entries, of which rank r holds entries [r·piece, (r+1)·piece) of each. So every (outer row, block) gives
// one run of piece·inner elements.
void for_each_local_run(const Parameter& p, int rank, int size, const std::function<void(const LocalRun&)>& fn) {
  if (p.replicated() || size == 1) {
    fn(LocalRun{0, 0, p.whole_numel()});
    return;
  }
  size_t outer = 1, inner = 1;
  for (int d = 0; d < p.split_dim; d++) outer *= (size_t)p.shape[(size_t)d];
  for (size_t d = (size_t)p.split_dim + 1; d < p.shape.size(); d++) inner *= (size_t)p.shape[d];
  const size_t len = (size_t)p.shape[(size_t)p.split_dim];
  const size_t block = len / (size_t)p.split_blocks, piece = block / (size_t)size;
  size_t local = 0;
  for (size_t o = 0; o < outer; o++)
    for (size_t b = 0; b < (size_t)p.split_blocks; b++) {
      const size_t whole = (o * len + b * block + (size_t)rank * piece) * inner;
      fn(LocalRun{whole, local, piece * inner});
      local += piece * inner;
    }
}

ParamTable::ParamTable(int tp_rank, int tp_size) : tp_rank_(tp_rank), tp_size_(tp_size) {
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size)
    throw Error("ParamTable: tensor-parallel rank " + std::to_string(tp_rank) + " of " + std::to_string(tp_size));
}

size_t ParamTable::add(std::string name, std::vector<int64_t> shape, bool weight_decay, int split_dim,
                       int split_blocks) {
  if (contains(name)) throw Error("parameter " + name + " is added twice");
  Parameter p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.weight_decay = weight_decay;
  p.split_dim = split_dim;
  p.split_blocks = split_blocks;
  p.local_shape = p.shape;
  if (split_dim >= 0) {
    if ((size_t)split_dim >= p.shape.size() || split_blocks < 1)
      throw Error("parameter " + p.name + ": split dimension " + std::to_string(split_dim) + " out of range");
    const int64_t len = p.shape[(size_t)split_dim], parts = (int64_t)split_blocks * tp_size_;
    if (len % parts != 0)
      throw Error("parameter " + p.name + ": dimension " + std::to_string(split_dim) + " of length " +
                  std::to_string(len) + " cannot be cut into " + std::to_string(split_blocks) + " block(s) × " +
                  std::to_string(tp_size_) + " tensor-parallel ranks");
    p.local_shape[(size_t)split_dim] = len / tp_size_;
  }
  p.numel = product(p.local_shape);
  p.offset = total_;
  total_ += p.numel;
  params_.push_back(std::move(p));
  return params_.size() - 1;
}

size_t ParamTable::whole_numel() const {
  size_t n = 0;
  for (const Parameter& p : params_) n += p.whole_numel();
  return n;
}

size_t ParamTable::index_of(std::string_view name) const {
  for (size_t i = 0; i < params_.size(); i++)
    if (params_[i].name == name) return i;
  throw Error("the model has no parameter named '" + std::string(name) + "'");
}

const Parameter& ParamTable::find(std::string_view name) const { return params_[index_of(name)]; }

bool ParamTable::contains(std::string_view name) const {
  return std::any_of(params_.begin(), params_.end(), [&](const Parameter& p) { return p.name == name; });
}

void ParamTable::slice(size_t i, const float* whole, float* local) const {
  for_each_local_run(params_[i], tp_rank_, tp_size_, [&](const LocalRun& r) {
    std::copy(whole + r.whole_offset, whole + r.whole_offset + r.length, local + r.local_offset);
  });
}

void ParamTable::place(size_t i, int rank, const float* local, float* whole) const {
  for_each_local_run(params_[i], rank, tp_size_, [&](const LocalRun& r) {
    std::copy(local + r.local_offset, local + r.local_offset + r.length, whole + r.whole_offset);
  });
}

}  // namespace lmforge::param
