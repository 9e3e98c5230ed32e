// defines: lmforge::train::StageTensors (which stage owns each tensor of the whole model), and the checkpoint
//          adapters of a pipeline stage: stage_gathering_tensors(), stage_gathering_optimizer(),
//          stage_slicing_tensors(), stage_slicing_optimizer()
#pragma once
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "dist/communicator.h"
#include "optim/optimizer.h"
#include "param/parameter.h"

namespace lmforge::train {

// Where the whole model's tensors live across a pipeline: tensor j of `whole` is local[j] of this stage's table
// (npos: absent) and owned (saved, counted) by stage owner[j], the first stage holding it.
struct StageTensors {
  static constexpr size_t npos = (size_t)-1;
  std::vector<size_t> local;
  std::vector<int> owner;
  int stage = 0;
};
// Collective over `pipeline` (nullptr: one stage). Throws std::logic_error when a tensor is on no stage.
StageTensors map_stage_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                               dist::Communicator* pipeline);

// Save: the checkpoint holds the whole model, listed on every rank of the saving replica in the whole table's order.
// Tensor j is gathered from the tensor-parallel pieces of its owner stage onto that stage's tensor-parallel rank 0
// (sharded_checkpoint.h), which sends it to stage 0 (point to point over `pipeline`), whose rank 0 writes: the
// writer holds one whole tensor at a time, the other stages none.
std::vector<checkpoint::NamedTensor> stage_gathering_tensors(const param::ParamTable& table,
                                                             const param::ParamTable& whole, const StageTensors& map,
                                                             const float* base, dist::Communicator* tp,
                                                             dist::Communicator* pipeline);
checkpoint::OptimizerCheckpoint stage_gathering_optimizer(const optim::Optimizer& local, const param::ParamTable& table,
                                                          const param::ParamTable& whole, const StageTensors& map,
                                                          dist::Communicator* tp, dist::Communicator* pipeline);
// Load: every rank reads the whole model's list (the loader checks the file holds exactly it) and keeps the pieces
// of its stage's tensors; the other tensors are read and dropped.
std::vector<checkpoint::NamedTensor> stage_slicing_tensors(const param::ParamTable& table,
                                                           const param::ParamTable& whole, const StageTensors& map,
                                                           float* base);
checkpoint::OptimizerCheckpoint stage_slicing_optimizer(optim::Optimizer& local, const param::ParamTable& table,
                                                        const param::ParamTable& whole, const StageTensors& map);

}  // namespace lmforge::train
