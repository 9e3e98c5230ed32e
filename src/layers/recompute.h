// defines: lmforge::layers::Recompute (Megatron's activation-recomputation settings), StackRecomputation (full
//          recomputation of a stack of TransformerLayers: what is kept in the forward, what runs again in the
//          backward)
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "layers/transformer_layer.h"

namespace lmforge::layers {

// Megatron's --recompute-granularity / --recompute-method / --recompute-num-layers. granularity "": none;
// "selective" (--recompute-activations): the attention core of every layer (AttentionSpec::recompute_core); "full":
// whole layers (StackRecomputation). Throws lmforge::Error naming the bad field for a stack of `layers` layers.
struct Recompute {
  std::string granularity;
  std::string method = "uniform";
  int num_layers = 1;
  void validate(int layers) const;
  bool selective() const { return granularity == "selective"; }
};

// Full recomputation over one stack of layers (a model may have several: T5's encoder and decoder each count their
// layers from 0, as Megatron's two ParallelTransformers do). Method "uniform" cuts the stack into chunks of
// num_layers layers and keeps only each chunk's input (and a copy of its output, the next chunk's input); "block"
// recomputes the first num_layers layers one by one and keeps the others' activations. The backward runs a chunk's
// forward again, with the same arguments (the same step: the same dropout masks), just before the backward of its
// last layer, so the gradients are bit for bit those of a forward that kept everything. Without full granularity it
// runs the layers as they are.
class StackRecomputation {
 public:
  using Layers = std::vector<std::unique_ptr<TransformerLayer>>;
  // Runs one layer's forward on its input with the stack's other arguments (padding, memory, sizes, step).
  using Run = std::function<kernels::Tensor(TransformerLayer&, const kernels::Tensor&)>;

  StackRecomputation() = default;
  // `layers`: the stack's layers on this pipeline stage (num_layers beyond them: one chunk, or every layer
  // recomputed with "block").
  StackRecomputation(const Recompute& recompute, int layers);

  // x through every layer; returns the stack's output (valid until the next forward).
  kernels::Tensor forward(Layers& layers, kernels::Tensor x, const Run& run, kernels::Backend& backend);
  // Walks the layers from the last to the first: re-runs a chunk's forward when its last layer comes, calls
  // backward_layer(l), and frees a chunk's activations after its first layer's backward.
  void backward(Layers& layers, const Run& run, const std::function<void(size_t)>& backward_layer);

 private:
  struct Chunk {
    int begin, end;           // layers [begin, end)
    kernels::Tensor input;    // kept from the forward
    kernels::Buffer output;   // a copy of the chunk's output (its layers' buffers are freed)
  };
  std::vector<Chunk> chunks_;
};

}  // namespace lmforge::layers
