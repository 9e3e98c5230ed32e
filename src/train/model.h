// defines: lmforge::train::Batch, Model (what the trainer needs of any model: its parameters, a forward and backward
//          over one micro-batch, the gradients-ready hook, its Hugging Face config), Task (where batches and losses
//          come from)
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "layers/dropout.h"
#include "param/parameter.h"

namespace lmforge::train {

enum class SplitKind { TRAIN = 0, VALID = 1, TEST = 2 };
const char* split_kind_name(SplitKind split);  // "train", "validation", "test"
const char* split_short_name(SplitKind split);  // "train", "valid", "test" (Megatron's file names)

// One micro-batch of B sequences of T positions (host memory, row-major [B,T]). A task fills the fields its model
// reads; empty vectors mean "not used" (no loss mask: every position counts; no token types; no padding).
struct Batch {
  int B = 0, T = 0;
  // Which samples these are: row b is sample first_sample + b of `split` (tasks whose models key per-sample random
  // draws by it, ELECTRA's masking and sampling, set them).
  SplitKind split = SplitKind::TRAIN;
  int64_t first_sample = 0;
  std::vector<int32_t> tokens;       // model inputs
  std::vector<int32_t> targets;      // what each position predicts
  std::vector<float> loss_mask;      // 1 where the position's loss counts, 0 elsewhere
  std::vector<int32_t> token_types;  // segment ids (BERT)
  std::vector<int32_t> padding;      // 1 for real positions, 0 for padding (attention key mask)
  std::vector<int32_t> labels;       // per-sequence labels (BERT's sentence order), [B]
  // Encoder-decoder models (T5): the decoder side, [B,Td] row-major. tokens and padding are then the ENCODER's
  // [B,T], while targets and loss_mask run over the DECODER's [B,Td] positions.
  int Td = 0;
  std::vector<int32_t> decoder_tokens;   // the decoder's inputs (Megatron's text_dec: [BOS] then the spans)
  std::vector<int32_t> decoder_padding;  // 1 for real decoder positions, 0 for padding (empty: none)
};

// A model as the trainer drives it, whatever its architecture and parallel layout. Parameters and gradients are the
// flat device buffers of this rank's pieces, laid out by table(); forward() then backward() on each micro-batch
// accumulate into grads().
class Model {
 public:
  virtual ~Model() = default;
  virtual const param::ParamTable& table() const = 0;
  // The whole model's table (tensor-parallel size 1): the tensors of a checkpoint, whatever this rank holds.
  virtual param::ParamTable whole_table() const = 0;
  // Initialisation from a seed, independent of the parallel layout (each rank keeps its pieces of the whole
  // model's streams); also zeroes the gradients.
  virtual void init_weights(uint64_t seed) = 0;
  // The flat fp32 parameters and gradients laid out by table(): contiguous f32 views [table().local_numel()] of
  // the model's device memory (the ParameterStore's buffers), read and written only through kernel ops, the
  // Backend's copies and the communicators' tensor entry points.
  virtual kernels::Tensor params() = 0;
  virtual kernels::Tensor grads() = 0;
  virtual void zero_grad() = 0;
  // See model::GPT::set_gradients_ready_hook.
  virtual void set_gradients_ready_hook(std::function<void(size_t from)> hook) = 0;
  // The losses of one micro-batch, one per Task::loss_names() entry (each the micro-batch's mean); `step` decides
  // dropout (training) and its masks.
  virtual std::vector<double> forward(const Batch& batch, const layers::ForwardStep& step) = 0;
  // Accumulates loss_scale · d(Σ losses of the last forward)/dθ into grads().
  virtual void backward(float loss_scale) = 0;
  // Hugging Face config.json of the model (checkpoints).
  virtual std::string config_json() const = 0;
  // Throws lmforge::Error (naming `source`) when a checkpoint's config.json describes a model these weights cannot
  // continue (another vocabulary, other shapes).
  virtual void check_checkpoint_config(const std::string& json, const std::string& source) const = 0;
  // Tensors whose rows are the vocabulary (padded here, unpadded in Hugging Face files): loaded with zero rows
  // appended when a file holds fewer.
  virtual std::vector<std::string> vocabulary_tensors() const = 0;
  // Mixed precision (--bf16 / --fp16): the dtype of the working copy of the weights and of the activations, set
  // before init_weights(); returns false when the model runs in fp32 only (the trainer then refuses the flag).
  virtual bool set_compute_dtype(kernels::DType dtype) { return dtype == kernels::DType::F32; }
  // After the optimizer wrote params(): refresh the low-precision working copy (nothing to do in fp32).
  virtual void params_updated() {}
  // The bf16 working copy of params() as one flat view in the same order (with its fp32 mirror, Tensor::widened,
  // where the model keeps one), which an optimizer may write in its own pass instead of params_updated(); an empty
  // view when there is none (fp32, fp16).
  virtual kernels::Tensor working_params() const { return {}; }
  // One log line: architecture, sizes, parameters on this rank.
  virtual std::string describe() const = 0;
  // Model FLOPs of one training step on B×T tokens (throughput figures).
  virtual double training_flops(int B, int T) const = 0;
  // Called on the writing rank once a checkpoint is in place at `checkpoint_dir`: a model whose checkpoint is not
  // itself one Hugging Face model adds the directories that are (ELECTRA: hf/discriminator, hf/generator).
  virtual void write_hugging_face(const std::string& checkpoint_dir) { (void)checkpoint_dir; }
};

// Where a model's batches come from: its datasets and splits, and the names its losses are logged under (Megatron's
// "lm loss", BERT's "lm loss" and "sop loss", ...).
class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual std::vector<std::string> loss_names() const = 0;
  // The weight of each loss in the objective the step minimises and logs as its loss (empty or missing entries:
  // 1). A logged metric that is not a loss (ELECTRA's discriminator accuracy) has weight 0.
  virtual std::vector<double> objective_weights() const { return {}; }
  virtual bool has_split(SplitKind split) const = 0;
  virtual int64_t split_size(SplitKind split) const = 0;  // samples available
  // Samples [first, first + micro_batch) of a split into `batch` (an Error when the split has fewer).
  virtual void fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) = 0;
  virtual std::string summary() const = 0;  // what the datasets hold (log lines, each ending in \n)
  // Sample `index` of a split as one JSON object (no newline): {"split": "train"|"valid"|"test", "index": i, then the
  // fields under the names Megatron's dataset returns them (GPT: "text", the seq_length + 1 tokens)}.
  virtual std::string sample_json(SplitKind split, int64_t index) = 0;
};

// n floats of a model's device memory at `data` as the flat view params()/grads() return.
inline kernels::Tensor flat_device_view(float* data, size_t n, kernels::Device device) {
  return kernels::make_view(data, {static_cast<int64_t>(n)}, device);
}

// Pieces of Task::sample_json lines: `"name": [v, v, ...]` (with a leading ", ") and the line's opening
// {"split": ..., "index": i.
template <typename T>
void append_json_field(std::string& line, const char* name, const T* values, size_t n) {
  line += ", \"";
  line += name;
  line += "\": [";
  for (size_t i = 0; i < n; i++) {
    if (i) line += ", ";
    line += std::to_string(values[i]);
  }
  line += "]";
}
inline std::string sample_json_head(SplitKind split, int64_t index) {
  return std::string("{\"split\": \"") + split_short_name(split) + "\", \"index\": " + std::to_string(index);
}

}  // namespace lmforge::train
