// defines: lmforge::train::ModelShape, model_shape(), make_model(), make_task(), check_memory() — what the trainer
//          asks of the model family a run trains (`lmforge train gpt|bert|t5`): the model on this rank's
//          tensor-parallel group, the task that feeds it, and a memory estimate made before anything is allocated
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "model/gpt.h"
#include "text/tokenizer.h"
#include "train/model.h"
#include "train/train_options.h"

namespace lmforge::train {

// The sizes that decide a run's memory, known from the flags and the tokenizer alone.
struct ModelShape {
  int64_t whole_parameters = 0;  // all tensors of the whole model (tensor-parallel size 1)
  int64_t padded_vocab = 0;      // rows of the embedding / columns of the logits
  int64_t layers = 0;            // attention layers whose probabilities a forward keeps (encoder + decoder)
  int64_t heads = 0;
  int64_t positions = 0;         // the longest sequence a layer attends over
};

ModelShape model_shape(const TrainOptions& options, int64_t vocab_size);

// --bert-config-file: the model sizes of a Google/NVIDIA bert_config.json (or an lmforge/HF BERT config.json) into
// the options (num_layers, hidden_size, num_attention_heads, ffn_hidden_size, max_position_embeddings, dropouts,
// init_method_std); a flag given with another value is an Error naming both. Returns the notice to log ("" when
// there is no file).
std::string apply_model_config_file(TrainOptions& options);

// A lower bound of the memory a run needs on each rank (parameters, gradients and optimizer state, the attention
// probabilities of every layer and the logits of one micro-batch), checked against the machine's memory so that an
// absurd --seq-length or --micro-batch-size is an error saying how much it would take, not a std::bad_alloc later.
void check_memory(const ModelShape& shape, const TrainOptions& options);

// The model of options.model_type with a vocabulary of vocab_size tokens (the tokenizer's, padded by the model), on
// `tensor_parallel`'s ranks (nullptr: the whole model in this process). Its weights are not initialised yet.
// `pipeline_rank`: this rank's stage of options.pipeline_model_parallel_size (pipeline_stage_layers() says which
// layers each stage holds); with one stage the whole model.
std::unique_ptr<Model> make_model(const TrainOptions& options, int64_t vocab_size,
                                  dist::Communicator* tensor_parallel, int pipeline_rank = 0);

// The transformer layers of each pipeline stage, as the log shows them: "2 2" (GPT, BERT: the layers of stage 0,
// 1, ...), "encoder 1 1 | decoder 2" (T5: the stages before and from --pipeline-model-parallel-split-rank).
// Throws lmforge::Error naming the flags when the layers do not split over the stages.
std::string pipeline_stage_layers(const TrainOptions& options);

// The task (datasets and splits) of options.model_type, asking `samples_per_split` samples of train, validation and
// test (Megatron's counts: the sample order depends on them).
std::unique_ptr<Task> make_task(const TrainOptions& options, const text::Tokenizer& tokenizer,
                                const std::array<int64_t, 3>& samples_per_split);

}  // namespace lmforge::train
