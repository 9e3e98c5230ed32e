// defines: lmforge::checkpoint::StageTensors, map_stage_tensors() (which pipeline stage owns each tensor of the whole
//          model; the identity map with one stage), gather_to_root() (a whole tensor assembled from its tensor-parallel
//          pieces on one rank), and the one stage-aware adapter between a rank's pieces and a checkpoint's whole
//          tensors: gathering_tensors(), gathering_optimizer(), slicing_tensors(), slicing_optimizer()
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "dist/communicator.h"
#include "kernels/tensor.h"
#include "optim/optimizer.h"
#include "param/parameter.h"

namespace lmforge::checkpoint {

// Checkpoints hold whole tensors under their Hugging Face names, so that any layout (T × P × D) loads any other.
// A rank holds the pieces of `table` (its tensor-parallel share of its pipeline stage's tensors; the whole model
// with one rank) in `base`, a flat f32 view of device memory that is only ever read and written through its
// Backend's copies and the communicators' tensor entry points; `whole` is the whole model's table (the file's names, shapes and order). These adapters
// hand the checkpoint module one tensor at a time, so no rank ever holds more than one whole tensor beside its
// pieces. Like Megatron's sharded_state_dict with replica_id, one mechanism serves every layout: without a pipeline
// the stage map is the identity and every tensor's owner is this stage.

// Where the whole model's tensors live across a pipeline: tensor j of `whole` is local[j] of this stage's table
// (npos: absent) and owned (saved, counted in the gradient norm) by stage owner[j], the first stage holding it.
struct StageTensors {
  static constexpr size_t npos = (size_t)-1;
  std::vector<size_t> local;
  std::vector<int> owner;
  int stage = 0;
};
// Collective over `pipeline` (nullptr: one stage, every owner 0). Throws std::logic_error when a tensor is on no
// stage.
StageTensors map_stage_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                               dist::Communicator* pipeline);

// Collective over the tensor-parallel group `tp` (nullptr or one rank: a copy). Afterwards `whole` (on the group's
// rank 0 only: whole_numel() floats; may be empty elsewhere) holds tensor i of `table` assembled from every rank's
// piece `local` (table[i].numel floats). Each non-zero rank sends its piece to rank 0 (point to point), so no rank
// but rank 0 ever holds more than its own piece, and rank 0 one whole tensor (plus one piece for a column split).
// `local` is the piece on the device (table[i].numel floats); `whole` host memory.
void gather_to_root(const param::ParamTable& table, size_t i, const kernels::Tensor& local, std::span<float> whole,
                    dist::Communicator* tp);

// Save: the checkpoint holds the whole model, listed on every rank of the saving replica in the whole table's
// order. Tensor j is gathered from the tensor-parallel pieces of its owner stage onto that stage's tensor-parallel
// rank 0 (gather_to_root), which sends it to stage 0 (point to point over `pipeline`), whose rank 0 writes: the
// writer holds one whole tensor at a time, the other stages none. Every rank of the replica must run the save, the
// writer with write access, the others with SaveRequest::writer false.
std::vector<NamedTensor> gathering_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                                           const StageTensors& map, const kernels::Tensor& base, dist::Communicator* tp,
                                           dist::Communicator* pipeline);
// The optimizer's state (whole over data parallelism: parallel::DistributedOptimizer::gathered()) the same way.
OptimizerCheckpoint gathering_optimizer(const optim::Optimizer& local, const param::ParamTable& table,
                                        const param::ParamTable& whole, const StageTensors& map,
                                        dist::Communicator* tp, dist::Communicator* pipeline);
// Load: every rank reads the whole model's list (the loader checks the file holds exactly it) and keeps the pieces
// of its stage's tensors; the other tensors are read and dropped.
std::vector<NamedTensor> slicing_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                                         const StageTensors& map, const kernels::Tensor& base);
OptimizerCheckpoint slicing_optimizer(optim::Optimizer& local, const param::ParamTable& table,
                                      const param::ParamTable& whole, const StageTensors& map);

}  // namespace lmforge::checkpoint
