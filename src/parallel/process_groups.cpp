// defines: ParallelLayout, check_parallel_layout, make_process_groups, stage_layer_counts, encoder_decoder_stages
#include "parallel/process_groups.h"

#include <cstdio>

#include "util/error.h"

namespace lmforge::parallel {

ParallelLayout ParallelLayout::of(int world_rank, int world_size, int tensor, int pipeline) {
  if (tensor < 1 || pipeline < 1) throw Error("tensor- and pipeline-parallel sizes must be >= 1");
  if (world_size % (tensor * pipeline) != 0)
    throw Error("the world size " + std::to_string(world_size) + " is not divisible by --tensor-model-parallel-size " +
                std::to_string(tensor) + " × --pipeline-model-parallel-size " + std::to_string(pipeline) +
                " (ranks = tensor × pipeline × data-parallel size)");
  ParallelLayout l;
  l.tensor = tensor;
  l.pipeline = pipeline;
  l.data = world_size / (tensor * pipeline);
  l.tp_rank = world_rank % tensor;
  l.dp_rank = world_rank / tensor % l.data;
  l.pp_rank = world_rank / (tensor * l.data);
  return l;
}

std::string ParallelLayout::describe() const {
  std::string out = "rank map (rank = tp + " + std::to_string(tensor) + "·(dp + " + std::to_string(data) +
                    "·pp)): ";
  for (int pp = 0; pp < pipeline; pp++) {
    out += pp ? "; stage " : "stage ";
    out += std::to_string(pp);
    out += ":";
    for (int dp = 0; dp < data; dp++) {
      out += " [";
      for (int tp = 0; tp < tensor; tp++) {
        if (tp) out += " ";
        out += std::to_string(world_rank(tp, dp, pp));
      }
      out += "]";
    }
  }
  return out + " (brackets: tensor-parallel groups, one per data-parallel replica)\n";
}

void check_parallel_layout(int world_size, int tensor_parallel, int64_t global_batch, int micro_batch,
                           int pipeline_parallel) {
  if (tensor_parallel < 1) throw Error("--tensor-model-parallel-size must be >= 1");
  if (pipeline_parallel < 1) throw Error("--pipeline-model-parallel-size must be >= 1");
  const int model_parallel = tensor_parallel * pipeline_parallel;
  if (world_size % model_parallel != 0) {
    if (pipeline_parallel == 1)
      throw Error("the world size " + std::to_string(world_size) +
                  " is not divisible by --tensor-model-parallel-size " + std::to_string(tensor_parallel) +
                  " (ranks = tensor-parallel size × data-parallel size)");
    throw Error("the world size " + std::to_string(world_size) + " is not divisible by --tensor-model-parallel-size " +
                std::to_string(tensor_parallel) + " × --pipeline-model-parallel-size " +
                std::to_string(pipeline_parallel) + " (ranks = tensor × pipeline × data-parallel size)");
  }
  const int64_t dp = world_size / model_parallel;
  if (micro_batch > 0 && global_batch % ((int64_t)micro_batch * dp) != 0)
    throw Error("--global-batch-size " + std::to_string(global_batch) + " is not divisible by --micro-batch-size " +
                std::to_string(micro_batch) + " × data-parallel size " + std::to_string(dp) + " (world size " +
                std::to_string(world_size) + "): every data-parallel rank must run the same number of micro-batches");
}

ProcessGroups make_process_groups(dist::Communicator& world, int tensor, int pipeline) {
  ProcessGroups g;
  g.layout = ParallelLayout::of(world.rank(), world.size(), tensor, pipeline);
  const ParallelLayout& l = g.layout;
  // Every rank takes part in every split (MPI_Comm_split is collective over the parent), in the same order.
  if (tensor > 1 || pipeline > 1) {
    g.tensor = world.split(l.pp_rank * l.data + l.dp_rank, l.tp_rank);
    g.data = world.split(l.pp_rank * l.tensor + l.tp_rank, l.dp_rank);
  }
  if (pipeline > 1) g.pipeline = world.split(l.dp_rank * l.tensor + l.tp_rank, l.pp_rank);
  if (tensor == 1) g.tensor.reset();  // a group of one: the model runs unsplit
  return g;
}

std::vector<int> stage_layer_counts(int num_layers, int pipeline, int first_layers, int last_layers) {
  if (pipeline < 1) throw Error("--pipeline-model-parallel-size must be >= 1");
  const bool first = first_layers >= 0 && pipeline > 1, last = last_layers >= 0 && pipeline > 1;
  if ((first && first_layers < 1) || (last && last_layers < 1))
    throw Error("--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers must be >= 1");
  std::vector<int> counts((size_t)pipeline, 0);
  const int given = (first ? 1 : 0) + (last ? 1 : 0);
  const int rest = num_layers - (first ? first_layers : 0) - (last ? last_layers : 0);
  const int middle = pipeline - given;
  auto fail = [&](const std::string& why) {
    throw Error("--num-layers " + std::to_string(num_layers) + " cannot be split over --pipeline-model-parallel-size " +
                std::to_string(pipeline) +
                (first ? " with --decoder-first-pipeline-num-layers " + std::to_string(first_layers) : "") +
                (last ? " with --decoder-last-pipeline-num-layers " + std::to_string(last_layers) : "") + ": " + why);
  };
  if (rest < 0) fail("the first and last stages take more layers than the model has");
  if (middle == 0 && rest != 0) fail(std::to_string(rest) + " layers would belong to no stage");
  if (middle > 0 && (rest % middle != 0 || rest / middle < 1))
    fail(std::to_string(rest) + " layers do not split evenly over " + std::to_string(middle) +
         " stages (each stage needs at least one layer)");
  for (int s = 0; s < pipeline; s++) counts[(size_t)s] = middle > 0 ? rest / middle : 0;
  if (first) counts.front() = first_layers;
  if (last) counts.back() = last_layers;
  return counts;
}

int EncoderDecoderStages::first_layer(int stage) const {
  int first = 0;
  for (int s = stage < split_rank ? 0 : split_rank; s < stage; s++) first += layers[(size_t)s];
  return first;
}

EncoderDecoderStages encoder_decoder_stages(int encoder_layers, int decoder_layers, int pipeline, int split_rank) {
  EncoderDecoderStages out;
  if (pipeline < 1) throw Error("--pipeline-model-parallel-size must be >= 1");
  if (pipeline == 1) {
    if (split_rank > 0) throw Error("--pipeline-model-parallel-split-rank needs --pipeline-model-parallel-size > 1");
    return out;
  }
  const int S = split_rank < 0 ? pipeline / 2 : split_rank;
  if (S < 1 || S > pipeline - 1)
    throw Error("--pipeline-model-parallel-split-rank " + std::to_string(S) + " must be in [1, " +
                std::to_string(pipeline - 1) + "] for --pipeline-model-parallel-size " + std::to_string(pipeline) +
                " (at least one encoder and one decoder stage)");
  auto split = [&](int layers, int stages, const char* stack, const char* flag) {
    if (layers % stages != 0)
      throw Error(std::string(flag) + " " + std::to_string(layers) + ": the " + stack + "'s layers do not split "
                  "evenly over its " + std::to_string(stages) + " pipeline stages (--pipeline-model-parallel-size " +
                  std::to_string(pipeline) + ", --pipeline-model-parallel-split-rank " + std::to_string(S) + ")");
    out.layers.insert(out.layers.end(), (size_t)stages, layers / stages);
  };
  out.split_rank = S;
  split(encoder_layers, S, "encoder", "--encoder-num-layers");
  split(decoder_layers, pipeline - S, "decoder", "--decoder-num-layers");
  return out;
}

}  // namespace lmforge::parallel
