// defines: gpt_family() — `lmforge train gpt` (Megatron's pretrain_gpt.py): GPTConfig from the options, GPTModel,
//          GPTTask over Megatron's GPT samples, the registry entry
#include <memory>

#include "datasets/gpt_dataset.h"
#include "datasets/hdf5_bert_shards.h"
#include "families/family_common.h"
#include "families/gpt/gpt_model.h"
#include "families/gpt/gpt_task.h"
#include "families/model_family.h"
#include "model/gpt.h"

namespace lmforge::families {
namespace {

model::GPTConfig gpt_config(const train::TrainOptions& o, int64_t vocab_size) {
  model::GPTConfig c;
  fill_transformer_config(o, vocab_size, c);
  c.num_layers = o.num_layers;
  c.seq_length = o.seq_length;
  c.validate();
  return c;
}

class GptFamily final : public ModelFamily {
 public:
  const char* name() const override { return "gpt"; }
  const char* default_tokenizer_type() const override { return "GPT2BPETokenizer"; }  // pretrain_gpt.py
  std::string help() const override {
    return
      "Pretrain a GPT-2-style model on a Megatron indexed dataset, with Megatron's pretrain_gpt.py flags, sample "
      "order (GPTDataset indices, shared .npy cache), learning-rate schedule and log lines.\n\n"
      "Model: pre-LN GPT-2 (tanh GELU, tied embedding/LM head, dropout 0.1 as Megatron unless --hidden-dropout / "
      "--attention-dropout say otherwise), fp32 on the CPU. The vocabulary is "
      "the tokenizer's padded to --make-vocab-size-divisible-by; as in Megatron the padded logits take part in "
      "the softmax, and checkpoints hold the padded matrix (config.json vocab_size = padded size).\n"
      "Step: --global-batch-size / --micro-batch-size micro-batches are accumulated (the gradient is their "
      "mean), clipped to --clip-grad, and the optimizer (--optimizer: AdamW, LAMB or SGD) applies the learning rate "
      "of the schedule before its step (so with warm-up the first step has lr 0, as Megatron). The log line's "
      "learning rate is the next step's, as Megatron prints it. Weight decay applies to matrices only (Megatron's "
      "rule: no decay for biases and other 1-D parameters).\n"
      "Checkpoints (--save): <save>/iter_NNNNNNN/{model.safetensors (Hugging Face GPT-2 names), config.json, "
      "optimizer.safetensors, trainer_state.json} and latest_checkpointed_iteration.txt. --load DIR resumes "
      "model, optimizer, schedule and data position exactly (a resumed run logs the same losses as an "
      "uninterrupted one); with no checkpoint in DIR the run starts from scratch. --finetune --load PATH takes "
      "weights only (a save dir, an iteration dir, a Hugging Face model dir or a .safetensors file such as "
      "GPT-2's model.safetensors; its 50257 vocabulary rows are padded with zero rows) and starts iteration, "
      "optimizer and schedule afresh.\n"
      "Every flag and the dataset's token ids (against the vocabulary) are checked before any index is built.";
  }
  void validate(train::TrainOptions& o) const override {
    validate_single_stack(o);
    for (const std::string& prefix : train::data_prefixes(o.data_path)) datasets::check_megatron_prefix("gpt", prefix);
  }
  train::ModelShape shape(const train::TrainOptions& o, int64_t vocab_size) const override {
    const model::GPTConfig c = gpt_config(o, vocab_size);
    return shape_of<model::GPT>(c, c.num_layers, c.seq_length);
  }
  std::string pipeline_stage_layers(const train::TrainOptions& o) const override { return layer_stage_text(o); }
  std::unique_ptr<train::Model> make_model(const train::TrainOptions& o, int64_t vocab_size, kernels::Backend& backend,
                                           dist::Communicator* tensor_parallel, int pipeline_rank) const override {
    return std::make_unique<train::GPTModel>(gpt_config(o, vocab_size), backend, tensor_parallel,
                                             layer_stage(o, pipeline_rank));
  }
  std::unique_ptr<train::Task> make_task(const train::TrainOptions& o, const text::Tokenizer&,
                                         const std::array<int64_t, 3>& samples_per_split) const override {
    datasets::GptDatasetConfig dc;
    dc.split = o.split;
    dc.seed = o.seed;
    dc.seq_length = o.seq_length;
    dc.cache_path = o.data_cache_path;
    return std::make_unique<train::GPTTask>(
        std::make_unique<datasets::GptSampleSource>(o.data_path, dc, samples_per_split), o.seq_length);
  }
  // gpt_config_json writes "gpt2"; a Hugging Face GPT-2 config.json may have no model_type.
  std::vector<std::string> checkpoint_model_types() const override { return {"gpt2", ""}; }
  Generation generation() const override { return Generation::CONTINUATION; }
};

}  // namespace

const ModelFamily& gpt_family() {
  static const GptFamily family;
  return family;
}

}  // namespace lmforge::families
