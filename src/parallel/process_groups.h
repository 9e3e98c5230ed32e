// defines: lmforge::parallel::ParallelLayout (Megatron's rank map of T × P × D ranks), check_parallel_layout() (the
//          batch rules of a layout), ProcessGroups (the tensor-, data- and pipeline-parallel communicators of one
//          rank), make_process_groups(), stage_layer_counts(), encoder_decoder_stages()
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace lmforge::parallel {

// Megatron's layout (megatron/core/parallel_state.py, order "tp-dp-pp"): tensor-parallel ranks are adjacent, then
// data-parallel replicas, then pipeline stages:
//
//   world rank = tp + T · (dp + D · pp)
//
// so a tensor-parallel group (the most traffic: activations every layer) sits on neighbouring ranks (one node),
// a data-parallel group strides by T, and a pipeline runs across blocks of T·D ranks. Example T = 2, P = 2, D = 2:
//
//   rank:  0  1  2  3  4  5  6  7
//   tp:    0  1  0  1  0  1  0  1
//   dp:    0  0  1  1  0  0  1  1
//   pp:    0  0  0  0  1  1  1  1
//
// tensor groups {0,1} {2,3} {4,5} {6,7}; data groups {0,2} {1,3} {4,6} {5,7}; pipelines {0,4} {1,5} {2,6} {3,7};
// the tied word embedding is summed between ranks 0↔4, 1↔5, 2↔6, 3↔7 (the first and last stage of each pipeline).
struct ParallelLayout {
  int tensor = 1, pipeline = 1, data = 1;  // T, P, D
  int tp_rank = 0, dp_rank = 0, pp_rank = 0;

  // Throws lmforge::Error when T·P does not divide the world size.
  static ParallelLayout of(int world_rank, int world_size, int tensor, int pipeline);
  int world_rank(int tp, int dp, int pp) const { return tp + tensor * (dp + data * pp); }
  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pipeline - 1; }
  // The rank map as log lines ("rank r: tp t, dp d, pp p" rows, grouped per stage).
  std::string describe() const;
};

// Megatron's batch rules for D = world / (T·P) data-parallel ranks: the global batch is a whole number of
// (micro batch × D) rounds. Throws lmforge::Error naming the flags and the world size.
void check_parallel_layout(int world_size, int tensor_parallel, int64_t global_batch, int micro_batch,
                           int pipeline_parallel = 1);

// This rank's groups; a size-1 dimension gets no group (nullptr), so single-process arithmetic stays as it was.
struct ProcessGroups {
  ParallelLayout layout;
  std::unique_ptr<dist::Communicator> tensor;    // same dp, pp (ordered by tp)
  std::unique_ptr<dist::Communicator> data;      // same tp, pp (ordered by dp); null when D = 1 and T·P = 1
  std::unique_ptr<dist::Communicator> pipeline;  // same tp, dp (ordered by pp: the stage number)
};

// Collective over `world` (every rank calls it with the same sizes). The data group exists whenever T·P > 1 (it is
// the world itself otherwise, and the caller uses `world`).
ProcessGroups make_process_groups(dist::Communicator& world, int tensor, int pipeline);

// Transformer layers per stage: num_layers split evenly over P stages, except that the first and/or last stage take
// first_layers / last_layers (Megatron's --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers;
// < 0: not given) and the other stages split the rest evenly. Throws lmforge::Error naming the flags when the
// layers do not divide.
std::vector<int> stage_layer_counts(int num_layers, int pipeline, int first_layers, int last_layers);

// An encoder-decoder model over P stages as Megatron splits it (--pipeline-model-parallel-split-rank S): stages
// [0, S) hold the encoder's layers, [S, P) the decoder's, each stack split evenly (Megatron's get_num_layers).
struct EncoderDecoderStages {
  int split_rank = 0;                   // S
  std::vector<int> layers;              // per stage: encoder layers on [0, S), decoder layers on [S, P)
  int first_layer(int stage) const;     // of its stack
};
// split_rank < 0: P / 2 (Megatron has no default). With P = 1 the one stage holds both stacks (split_rank 0 and
// layers empty). Throws lmforge::Error naming the flags when S is outside [1, P − 1] or a stack does not divide.
EncoderDecoderStages encoder_decoder_stages(int encoder_layers, int decoder_layers, int pipeline, int split_rank);

}  // namespace lmforge::parallel
