// defines: dropout_key (the Philox stream of a dropout call), Dropout
#include "layers/dropout.h"

namespace lmforge::layers {
namespace {
// splitmix64's finaliser: a bijective mix, so distinct (iteration, micro-batch, layer, site) give distinct streams
// with overwhelming probability and no structure between neighbouring steps.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

kernels::DropoutKey dropout_key(const ForwardStep& step, float rate, int layer, DropoutSite site) {
  kernels::DropoutKey key;
  key.p = step.training ? rate : 0.0f;
  key.seed = step.seed;
  key.stream = mix(mix(mix(step.iteration) ^ step.micro_batch) ^ (((uint64_t)(uint32_t)layer << 8) | (uint64_t)site));
  return key;
}

void Dropout::forward(const kernels::Tensor& out, const kernels::Tensor& inp, const ForwardStep& step) const {
  kernels::dropout_forward(out, inp, key(step));
}

void Dropout::backward(const kernels::Tensor& dinp, const kernels::Tensor& dout, const ForwardStep& step) const {
  kernels::dropout_backward(dinp, dout, key(step));
}

}  // namespace lmforge::layers
