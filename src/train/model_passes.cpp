// defines: split_kind_name, split_short_name (train/model.h), ModelPasses
#include "train/model_passes.h"

#include <stdexcept>

namespace lmforge::train {

const char* split_kind_name(SplitKind split) {
  switch (split) {
    case SplitKind::TRAIN: return "train";
    case SplitKind::VALID: return "validation";
    case SplitKind::TEST: return "test";
  }
  return "?";
}

const char* split_short_name(SplitKind split) {
  switch (split) {
    case SplitKind::TRAIN: return "train";
    case SplitKind::VALID: return "valid";
    case SplitKind::TEST: return "test";
  }
  return "?";
}

ModelPasses::ModelPasses(Model& model, PipelineStage* stage, Task& task, int micro_batch, uint64_t seed)
    : model_(model), stage_(stage), task_(task), micro_batch_(micro_batch), seed_(seed),
      loss_count_(task.loss_names().size()) {}

void ModelPasses::begin_step(SplitKind split, int64_t first_sample, int64_t iteration, bool training) {
  split_ = split;
  first_sample_ = first_sample;
  iteration_ = iteration;
  training_ = training;
}

PipelineStage& ModelPasses::pipeline_stage() const {
  if (stage_ == nullptr) throw std::logic_error("ModelPasses: the model is not cut into pipeline stages");
  return *stage_;
}

layers::ForwardStep ModelPasses::step_of(const Slot& slot) const {
  layers::ForwardStep step;
  step.training = training_;
  step.seed = seed_;
  step.iteration = (uint64_t)iteration_;
  step.micro_batch = (uint64_t)slot.g;
  return step;
}

void ModelPasses::load(size_t slot, int64_t g) {
  if (slot >= slots_.size()) slots_.resize(slot + 1);
  Slot& s = slots_[slot];
  s.g = g;
  task_.fill(split_, first_sample_ + g * (int64_t)micro_batch_, micro_batch_, s.batch);
}

std::vector<double> ModelPasses::forward(size_t slot) {
  const Slot& s = slots_.at(slot);
  return model_.forward(s.batch, step_of(s));
}

void ModelPasses::backward(float loss_scale) { model_.backward(loss_scale); }

size_t ModelPasses::input_elements(size_t slot) const { return pipeline_stage().input_elements(slots_.at(slot).batch); }

size_t ModelPasses::output_elements(size_t slot) const {
  return pipeline_stage().output_elements(slots_.at(slot).batch);
}

std::vector<double> ModelPasses::forward_stage(size_t slot, const float* input) {
  const Slot& s = slots_.at(slot);
  return pipeline_stage().forward_stage(s.batch, input, step_of(s), slot);
}

void ModelPasses::backward_stage(size_t slot, const float* output_grad, float loss_scale) {
  pipeline_stage().backward_stage(output_grad, loss_scale, slot);
}

}  // namespace lmforge::train
