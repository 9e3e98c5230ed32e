// defines: lmforge::layers::ForwardStep (what a forward pass is: training or not, and which step/micro-batch it is,
//          for dropout), DropoutSite, Dropout (a dropout site of one layer, over the kernels' Philox dropout)
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace lmforge::layers {

// Dropout masks are a pure function of (seed, iteration, global micro-batch, layer, site, element): the same on
// every thread count, parallel layout and resume point. A forward pass without `training` (evaluation, generation)
// applies no dropout, as torch's model.eval().
struct ForwardStep {
  bool training = false;
  uint64_t seed = 0;
  uint64_t iteration = 0;    // the optimizer step this forward belongs to
  uint64_t micro_batch = 0;  // the GLOBAL micro-batch index within the step (the same on any data-parallel layout)
};

// Where in a layer a dropout sits.
enum class DropoutSite : uint32_t { EMBEDDING = 0, ATTENTION_PROBS = 1, ATTENTION_OUT = 2, MLP_OUT = 3,
                                    CROSS_PROBS = 4, CROSS_OUT = 5 };

// The Philox key of one dropout call: p is 0 (no dropout) unless the step is training and the rate is positive.
kernels::DropoutKey dropout_key(const ForwardStep& step, float rate, int layer, DropoutSite site);

// A dropout site. Its mask is a pure function of the step (dropout_key), so it keeps nothing between calls: the
// backward regenerates the mask from the step its forward ran in (the caller keeps that step with the call's
// saved activations).
class Dropout {
 public:
  Dropout(float rate, int layer, DropoutSite site) : rate_(rate), layer_(layer), site_(site) {}
  float rate() const { return rate_; }
  // Whether this step drops anything (else the caller may skip the op and use inp directly).
  bool active(const ForwardStep& step) const { return step.training && rate_ > 0.0f; }
  kernels::DropoutKey key(const ForwardStep& step) const { return dropout_key(step, rate_, layer_, site_); }
  void forward(const kernels::Tensor& out, const kernels::Tensor& inp, const ForwardStep& step) const;
  void backward(const kernels::Tensor& dinp, const kernels::Tensor& dout, const ForwardStep& step) const;

 private:
  float rate_;
  int layer_;
  DropoutSite site_;
};

}  // namespace lmforge::layers
