// defines: lmforge::train::PipelineStage (what a pipeline schedule needs of a model cut into stages: forward from an
//          input activation, backward to its gradient, and the tensors shared between stages)
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "layers/dropout.h"
#include "train/model.h"

namespace lmforge::train {

// One stage of a model split into consecutive layers (Megatron's pre_process / post_process stages). A train::Model
// that supports pipeline parallelism also implements this interface (the trainer asks with dynamic_cast); its
// Model::table() then holds this stage's tensors only, under the whole model's names.
class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  virtual bool first_stage() const = 0;  // reads the batch's tokens
  virtual bool last_stage() const = 0;   // computes the losses
  // Floats of the activation one stage hands the next for a micro-batch (B·T·hidden for a decoder).
  virtual size_t activation_elements(const Batch& batch) const = 0;
  // Floats this stage receives from the previous stage and sends to the next for a micro-batch (their gradients
  // travel back in the same sizes): activation_elements unless a model passes more than one tensor between stages
  // (T5's decoder stages pass the decoder's hidden states and the encoder's output).
  virtual size_t input_elements(const Batch& batch) const { return activation_elements(batch); }
  virtual size_t output_elements(const Batch& batch) const { return activation_elements(batch); }
  // Forward of one micro-batch: the first stage reads `batch`, the others `input` (input_elements floats; the
  // last stage also reads the batch's targets). The last stage returns the losses (as Model::forward); the others
  // return an empty vector and leave their output at stage_output() until the next forward. The micro-batch's
  // activations stay in activation slot `slot` until backward_stage of the same slot (a 1F1B stage has several
  // micro-batches in flight; each forward runs once).
  virtual std::vector<double> forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step,
                                            size_t slot) = 0;
  // The output as an fp32 device tensor of output_elements floats (moved to the next stage through the backend).
  virtual kernels::Tensor stage_output() const = 0;
  // Backward of the micro-batch whose forward used `slot`: the last stage from its losses (output_grad unused), the
  // others from d(loss)/d(output); accumulates loss_scale · d/dθ into grads(). Afterwards input_grad() (not on the
  // first stage) holds d(loss)/d(input) until the next forward or backward.
  virtual void backward_stage(const float* output_grad, float loss_scale, size_t slot) = 0;
  virtual kernels::Tensor input_grad() const = 0;
  // Tensors this stage holds that another stage holds too (the tied word embedding on the first and the last
  // stage; T5's word and position tables on the first stage and the decoder's first, the word table on the last
  // too): their gradients are summed between the holders each step, and they are saved and counted in the
  // gradient norm on the first stage holding them only.
  virtual std::vector<std::string> shared_tensors() const = 0;
};

}  // namespace lmforge::train
