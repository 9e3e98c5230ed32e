// defines: gather_to_root, gathering_tensors, slicing_tensors, gathering_optimizer, slicing_optimizer
#include "train/sharded_checkpoint.h"

#include <stdexcept>
#include <vector>

namespace lmforge::train {

void gather_to_root(const param::ParamTable& table, size_t i, const float* local, std::span<float> whole,
                    dist::Communicator* tp) {
  const param::Parameter& p = table[i];
  const int T = tp ? tp->size() : 1, rank = tp ? tp->rank() : 0;
  if (rank == 0 && whole.size() != p.whole_numel())
    throw std::logic_error("gather_to_root: " + p.name + " needs a whole-tensor buffer on rank 0");
  if (T == 1 || p.replicated()) {  // every rank holds it whole
    if (rank == 0) std::copy(local, local + p.numel, whole.data());
    return;
  }
  if (rank != 0) {  // each piece goes straight to rank 0: no rank but 0 holds more than its own piece
    tp->send(local, p.numel * sizeof(float), 0);
    return;
  }
  table.place(i, 0, local, whole.data());
  // A piece that is one run of the whole tensor (a row split: the vocabulary-parallel embedding) lands in place;
  // a column split's strided runs arrive in a piece-sized buffer first.
  std::vector<float> piece;
  for (int q = 1; q < T; q++) {
    size_t runs = 0, at = 0;
    param::for_each_local_run(p, q, T, [&](const param::LocalRun& r) {
      runs++;
      at = r.whole_offset;
    });
    if (runs == 1) {
      tp->recv(whole.data() + at, p.numel * sizeof(float), q);
    } else {
      piece.resize(p.numel);
      tp->recv(piece.data(), p.numel * sizeof(float), q);
      table.place(i, q, piece.data(), whole.data());
    }
  }
}

std::vector<checkpoint::NamedTensor> gathering_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                                                       const float* base, dist::Communicator* tp) {
  std::vector<checkpoint::NamedTensor> out;
  for (size_t i = 0; i < table.size(); i++) {
    checkpoint::NamedTensor t{whole[i].name, whole[i].shape, nullptr};
    t.produce = [&table, i, local = base + table[i].offset, n = whole[i].numel, tp](float* dst) {
      gather_to_root(table, i, local, dst ? std::span<float>(dst, n) : std::span<float>(), tp);
    };
    out.push_back(std::move(t));
  }
  return out;
}

checkpoint::OptimizerCheckpoint gathering_optimizer(const optim::Optimizer& local, const param::ParamTable& table,
                                                    const param::ParamTable& whole, dist::Communicator* tp) {
  checkpoint::OptimizerCheckpoint out;
  out.kind = std::string(local.name());
  out.step = local.steps();
  out.hyperparameters = local.hyperparameters();
  for (size_t i = 0; i < table.size(); i++)
    for (size_t k = 0; k < local.state_names().size(); k++) {
      checkpoint::NamedTensor t{local.state_names()[k] + "." + whole[i].name, whole[i].shape, nullptr};
      t.produce = [&table, i, state = local.state_of(k, i).data(), n = whole[i].numel, tp](float* dst) {
        gather_to_root(table, i, state, dst ? std::span<float>(dst, n) : std::span<float>(), tp);
      };
      out.tensors.push_back(std::move(t));
    }
  return out;
}

std::vector<checkpoint::NamedTensor> slicing_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                                                     float* base) {
  std::vector<checkpoint::NamedTensor> out;
  for (size_t i = 0; i < table.size(); i++) {
    checkpoint::NamedTensor t{whole[i].name, whole[i].shape, nullptr};
    t.consume = [&table, i, local = base + table[i].offset](const float* w) { table.slice(i, w, local); };
    out.push_back(std::move(t));
  }
  return out;
}

checkpoint::OptimizerCheckpoint slicing_optimizer(optim::Optimizer& local, const param::ParamTable& table,
                                                  const param::ParamTable& whole) {
  checkpoint::OptimizerCheckpoint out;
  out.kind = std::string(local.name());
  for (size_t i = 0; i < table.size(); i++)
    for (size_t k = 0; k < local.state_names().size(); k++) {
      checkpoint::NamedTensor t{local.state_names()[k] + "." + whole[i].name, whole[i].shape, nullptr};
      t.consume = [&table, i, state = local.state_of(k, i).data()](const float* w) { table.slice(i, w, state); };
      out.tensors.push_back(std::move(t));
    }
  return out;
}

}  // namespace lmforge::train
