// defines: lmforge::layers::Recompute (Megatron's activation-recomputation settings; TransformerStack applies them)
#pragma once
#include <string>

namespace lmforge::layers {

// Megatron's --recompute-granularity / --recompute-method / --recompute-num-layers. granularity "": none;
// "selective" (--recompute-activations): the attention core of every layer (AttentionSpec::recompute_core); "full":
// whole layers (TransformerStack). Throws lmforge::Error naming the bad field for a stack of `layers` layers.
struct Recompute {
  std::string granularity;
  std::string method = "uniform";
  int num_layers = 1;
  void validate(int layers) const;
  bool selective() const { return granularity == "selective"; }
};

}  // namespace lmforge::layers
