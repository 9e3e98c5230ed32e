// defines: map_stage_tensors, gather_to_root, gathering_tensors, gathering_optimizer, slicing_tensors,
//          slicing_optimizer
#include "checkpoint/model_io.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/backend.h"

namespace lmforge::checkpoint {

StageTensors map_stage_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                               dist::Communicator* pipeline) {
  StageTensors m;
  m.stage = pipeline ? pipeline->rank() : 0;
  const int P = pipeline ? pipeline->size() : 1;
  m.local.assign(whole.size(), StageTensors::npos);
  // holders[j·P + s] = 1 when stage s holds tensor j; summed over the pipeline every stage knows every holder.
  std::vector<double> holders(whole.size() * (size_t)P, 0.0);
  for (size_t j = 0; j < whole.size(); j++)
    if (table.contains(whole[j].name)) {
      m.local[j] = table.index_of(whole[j].name);
      holders[j * (size_t)P + (size_t)m.stage] = 1.0;
    }
  if (pipeline) pipeline->all_reduce_sum(holders.data(), holders.size());
  m.owner.assign(whole.size(), -1);
  for (size_t j = 0; j < whole.size(); j++) {
    for (int s = 0; s < P && m.owner[j] < 0; s++)
      if (holders[j * (size_t)P + (size_t)s] > 0.0) m.owner[j] = s;
    if (m.owner[j] < 0) throw std::logic_error("pipeline: tensor " + whole[j].name + " is on no stage");
  }
  return m;
}

void gather_to_root(const param::ParamTable& table, size_t i, const kernels::Tensor& local, std::span<float> whole,
                    dist::Communicator* tp) {
  const param::Parameter& p = table[i];
  const int T = tp ? tp->size() : 1, rank = tp ? tp->rank() : 0;
  if (rank == 0 && whole.size() != p.whole_numel())
    throw std::logic_error("gather_to_root: " + p.name + " needs a whole-tensor buffer on rank 0");
  if ((size_t)local.numel() != p.numel || local.dtype != kernels::DType::F32)
    throw std::logic_error("gather_to_root: " + p.name + " needs its f32 piece of " + std::to_string(p.numel) +
                           " elements, not " + local.describe());
  kernels::Backend& backend = kernels::backend_for(local.device);
  const size_t bytes = p.numel * sizeof(float);
  if (T == 1 || p.replicated()) {  // every rank holds it whole
    if (rank == 0 && bytes > 0) backend.copy_to_host(whole.data(), local.data, bytes);
    return;
  }
  if (rank != 0) {  // each piece goes straight to rank 0: no rank but 0 holds more than its own piece
    tp->send(local, 0);
    return;
  }
  std::vector<float> piece(p.numel);
  if (bytes > 0) backend.copy_to_host(piece.data(), local.data, bytes);
  table.place(i, 0, piece.data(), whole.data());
  // A piece that is one run of the whole tensor (a row split: the vocabulary-parallel embedding) lands in place;
  // a column split's strided runs arrive in a piece-sized buffer first.
  for (int q = 1; q < T; q++) {
    size_t runs = 0, at = 0;
    param::for_each_local_run(p, q, T, [&](const param::LocalRun& r) {
      runs++;
      at = r.whole_offset;
    });
    if (runs == 1) {
      tp->recv(whole.data() + at, p.numel * sizeof(float), q);
    } else {
      tp->recv(piece.data(), p.numel * sizeof(float), q);
      table.place(i, q, piece.data(), whole.data());
    }
  }
}

namespace {

// Tensor i's piece of the flat device view `base`.
kernels::Tensor piece_of(const param::ParamTable& table, size_t i, const kernels::Tensor& base) {
  return base.slice0((int64_t)table[i].offset, (int64_t)table[i].numel);
}

// The consumer keeping this rank's piece of whole tensor i in `local` (device memory; absent: the stage lacks it):
// sliced on the host, then one copy to the device.
std::function<void(const float*)> consumer(const param::ParamTable& table, size_t i, const kernels::Tensor& local) {
  return [&table, i, local](const float* w) {
    if (!local.present()) return;
    std::vector<float> piece(table[i].numel);
    table.slice(i, w, piece.data());
    if (!piece.empty())
      kernels::backend_for(local.device).copy_to_device(local.data, piece.data(), piece.size() * sizeof(float));
  };
}

// The producer of whole tensor j from this rank's piece `local` (nullptr when the stage lacks it). On the owner
// stage 0 (every tensor without a pipeline) it is gather_to_root straight into the writer's buffer.
std::function<void(float*)> producer(const param::ParamTable& table, const StageTensors& map, size_t j,
                                     const kernels::Tensor& local, size_t n, dist::Communicator* tp,
                                     dist::Communicator* pipeline) {
  return [&table, &map, j, local, n, tp, pipeline](float* dst) {
    const int owner = map.owner[j];
    const bool tp_root = tp == nullptr || tp->rank() == 0;
    if (owner == map.stage) {
      const size_t i = map.local[j];
      if (owner == 0) {  // stage 0: its tensor-parallel rank 0 is the writer
        gather_to_root(table, i, local, dst ? std::span<float>(dst, n) : std::span<float>(), tp);
        return;
      }
      std::vector<float> whole(tp_root ? n : 0);
      gather_to_root(table, i, local, std::span<float>(whole), tp);
      if (tp_root) pipeline->send(whole.data(), n * sizeof(float), 0);
    } else if (map.stage == 0 && tp_root && dst != nullptr) {
      pipeline->recv(dst, n * sizeof(float), owner);
    }
  };
}

}  // namespace

std::vector<NamedTensor> gathering_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                                           const StageTensors& map, const kernels::Tensor& base, dist::Communicator* tp,
                                           dist::Communicator* pipeline) {
  std::vector<NamedTensor> out;
  for (size_t j = 0; j < whole.size(); j++) {
    NamedTensor t{whole[j].name, whole[j].shape, nullptr};
    const kernels::Tensor local =
        map.local[j] == StageTensors::npos ? kernels::Tensor{} : piece_of(table, map.local[j], base);
    t.produce = producer(table, map, j, local, whole[j].numel, tp, pipeline);
    out.push_back(std::move(t));
  }
  return out;
}

OptimizerCheckpoint gathering_optimizer(const optim::Optimizer& local, const param::ParamTable& table,
                                        const param::ParamTable& whole, const StageTensors& map,
                                        dist::Communicator* tp, dist::Communicator* pipeline) {
  OptimizerCheckpoint out;
  out.kind = std::string(local.name());
  out.step = local.steps();
  out.hyperparameters = local.hyperparameters();
  for (size_t j = 0; j < whole.size(); j++)
    for (size_t k = 0; k < local.state_names().size(); k++) {
      NamedTensor t{local.state_names()[k] + "." + whole[j].name, whole[j].shape, nullptr};
      const kernels::Tensor state =
          map.local[j] == StageTensors::npos ? kernels::Tensor{} : local.state_of(k, map.local[j]);
      t.produce = producer(table, map, j, state, whole[j].numel, tp, pipeline);
      out.tensors.push_back(std::move(t));
    }
  return out;
}

std::vector<NamedTensor> slicing_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                                         const StageTensors& map, const kernels::Tensor& base) {
  std::vector<NamedTensor> out;
  for (size_t j = 0; j < whole.size(); j++) {
    NamedTensor t{whole[j].name, whole[j].shape, nullptr};
    const size_t i = map.local[j];
    t.consume = consumer(table, i, i == StageTensors::npos ? kernels::Tensor{} : piece_of(table, i, base));
    out.push_back(std::move(t));
  }
  return out;
}

OptimizerCheckpoint slicing_optimizer(optim::Optimizer& local, const param::ParamTable& table,
                                      const param::ParamTable& whole, const StageTensors& map) {
  OptimizerCheckpoint out;
  out.kind = std::string(local.name());
  for (size_t j = 0; j < whole.size(); j++)
    for (size_t k = 0; k < local.state_names().size(); k++) {
      NamedTensor t{local.state_names()[k] + "." + whole[j].name, whole[j].shape, nullptr};
      const size_t i = map.local[j];
      t.consume = consumer(table, i, i == StageTensors::npos ? kernels::Tensor{} : local.state_of(k, i));
      out.tensors.push_back(std::move(t));
    }
  return out;
}

}  // namespace lmforge::checkpoint
