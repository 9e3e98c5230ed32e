// defines: lmforge::families::ModelFamily (one model family as the trainer and the commands see it: name and help,
//          the flag groups it takes, options -> model config, its train::Model and train::Task, the shape that decides
//          memory, the pipeline split, its checkpoints' config.json model_type, how it generates), FlagGroup,
//          Generation
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "kernels/backend.h"
#include "text/tokenizer.h"
#include "train/model.h"
#include "train/model_shape.h"
#include "train/train_options.h"

namespace lmforge::families {

// Flag groups of `lmforge train <family>` beyond the flags every family takes. The CLI (cli/train_command.cpp)
// declares each group once; a family lists the groups it takes, so a new family that reuses them needs no CLI code.
enum class FlagGroup : unsigned {
  // Encoder and decoder stacks: --num-layers also spelled --encoder-num-layers, --decoder-num-layers, --seq-length
  // also spelled --encoder-seq-length, --decoder-seq-length (required).
  ENCODER_DECODER = 1u << 0,
  // Megatron's masked-LM data and model flags: --ffn-hidden-size, --mask-prob, --short-seq-prob,
  // --no-bias-gelu-fusion, --openai-gelu, --layernorm-epsilon.
  MASKED_LM = 1u << 1,
  // BERT's own flags: --bert-no-binary-head, --bert-post-layernorm, --bert-config-file (then --num-layers,
  // --hidden-size and --num-attention-heads may come from the file), and fairseq's flags (cli/flags/fairseq_flags.h).
  BERT = 1u << 2,
  // ELECTRA's flags (cli/flags/electra_flags.h): --electra-size presets (then --num-layers, --hidden-size and
  // --num-attention-heads may be omitted), the generator's size, the loss weight, the masking and sampling.
  ELECTRA = 1u << 3,
};

// How `lmforge generate` runs a checkpoint of the family.
enum class Generation {
  NONE,          // the family does not generate text (BERT: an encoder)
  CONTINUATION,  // the prompt is continued token by token (GPT)
  SPAN_FILLING,  // the encoder reads a prompt with sentinels, the decoder writes the spans (T5)
};

// One model family. The entries are stateless singletons listed in families/registry.cpp; the trainer, `lmforge
// train` (a subcommand per entry) and `lmforge generate` reach a family only through this interface, so a new
// family is its folder (families/<name>/) and one line of the registry.
class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  // `lmforge train <name>`; TrainOptions::model_type.
  virtual const char* name() const = 0;
  // The subcommand's description in `lmforge train <name> --help`.
  virtual std::string help() const = 0;
  // --tokenizer-type's default, as Megatron's pretrain_<name>.py passes it in args_defaults.
  virtual const char* default_tokenizer_type() const = 0;
  // The FlagGroup bits the subcommand takes.
  virtual unsigned flag_groups() const { return 0; }
  bool takes(FlagGroup group) const { return (flag_groups() & (unsigned)group) != 0; }
  // Why and how a sample's tokens are masked, for --mask-prob's help (MASKED_LM families).
  virtual std::string masking_help() const { return ""; }

  // The family's own flag rules, run by train::validate_train_options after the common ones (the pipeline sizes are
  // checked by then); may fill defaults. Throws lmforge::Error naming the flag.
  virtual void validate(train::TrainOptions& options) const = 0;
  // A model config file named by a flag (--bert-config-file) into the options, before validation; returns the
  // notice to log ("" when there is none). Families without such a flag refuse it.
  virtual std::string apply_config_file(train::TrainOptions& options) const;
  // Whether --data-path entry `prefix` is a .bin/.idx pair whose token ids the trainer checks against the vocabulary
  // before any index is built (NVIDIA's HDF5 shards are checked by their task as samples are read).
  virtual bool checks_token_ids(const std::string& prefix) const { (void)prefix; return true; }

  // The sizes that decide a run's memory (train::check_memory), from the flags and the tokenizer's vocabulary.
  virtual train::ModelShape shape(const train::TrainOptions& options, int64_t vocab_size) const = 0;
  // The transformer layers of each pipeline stage as the log shows them ("2 2"; T5 "encoder 1 1 | decoder 2").
  virtual std::string pipeline_stage_layers(const train::TrainOptions& options) const = 0;
  // The model on `backend` (the run's --device) and `tensor_parallel`'s ranks (nullptr: the whole model in this
  // process), holding pipeline stage `pipeline_rank` of options.pipeline_model_parallel_size (one stage: all).
  // Its weights are not initialised yet.
  virtual std::unique_ptr<train::Model> make_model(const train::TrainOptions& options, int64_t vocab_size,
                                                   kernels::Backend& backend, dist::Communicator* tensor_parallel,
                                                   int pipeline_rank) const = 0;
  // The task (datasets and splits), asking `samples_per_split` samples of train, validation and test (Megatron's
  // counts: the sample order depends on them).
  virtual std::unique_ptr<train::Task> make_task(const train::TrainOptions& options, const text::Tokenizer& tokenizer,
                                                 const std::array<int64_t, 3>& samples_per_split) const = 0;

  // The "model_type" values of the config.json its checkpoints carry (written by train::Model::config_json and read
  // back by the family's *_config_from_json); "" for a config without the field (a Hugging Face GPT-2's may lack it).
  virtual std::vector<std::string> checkpoint_model_types() const = 0;
  virtual Generation generation() const { return Generation::NONE; }
};

}  // namespace lmforge::families
