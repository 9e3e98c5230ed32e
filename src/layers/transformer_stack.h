// defines: lmforge::layers::TransformerStack (a stack of TransformerLayers on this pipeline stage: forward and
//          backward of one micro-batch over activations its caller owns, with Megatron's full recomputation)
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "layers/recompute.h"
#include "layers/transformer_layer.h"

namespace lmforge::layers {

// Layers run one after the other on the residual stream. What one micro-batch's forward keeps for its backward is a
// Saved the caller owns, so several micro-batches can be in flight (a 1F1B pipeline stage keeps one per micro-batch
// it has forwarded and not yet backwarded) and the same stack can be called twice in one step.
//
// Full recomputation (a model may have several stacks: T5's encoder and decoder each count their layers from 0, as
// Megatron's two ParallelTransformers do): method "uniform" cuts the stack into chunks of num_layers layers and keeps
// only each chunk's input (and a copy of its output, the next chunk's input); "block" recomputes the first
// num_layers layers one by one and keeps the others' activations. The backward runs a chunk's forward again, with
// the same inputs and step (the same dropout masks), just before the backward of its last layer, so the gradients
// are bit for bit those of a forward that kept everything; the chunk's activations are dropped after its first
// layer's backward. So under full recomputation a micro-batch in flight holds only its chunks' boundaries.
class TransformerStack {
 public:
  using Layers = std::vector<std::unique_ptr<TransformerLayer>>;

  // One micro-batch's activations (reused by the next forward given the same Saved: buffers grow, never shrink).
  struct Saved {
    LayerInputs in;                              // views: kept valid by the caller until the backward
    ForwardStep step;
    std::vector<TransformerLayer::Saved> layers;
    std::vector<kernels::Tensor> chunk_inputs;   // recomputed chunks: the input each forward started from
    std::vector<kernels::Buffer> chunk_outputs;  // and a copy of its output (its layers' buffers are freed)
  };

  TransformerStack() = default;
  // `layers`: the stack's layers on this pipeline stage (a recompute num_layers beyond them: one chunk, or every
  // layer recomputed with "block", as Megatron's per-stage transformer chunks its own layers).
  TransformerStack(Layers layers, const Recompute& recompute);

  size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }
  TransformerLayer& operator[](size_t l) { return *layers_[l]; }
  Layers& layers() { return layers_; }

  // x through every layer; returns the stack's output (held in `saved`).
  kernels::Tensor forward(kernels::Tensor x, const LayerInputs& in, const ForwardStep& step, Saved& saved);
  // From d(loss)/d(output) in d to d(loss)/d(input) in d (in place); dmemory += the cross-attentions' gradients of
  // the memory (optional). after_layer(l) runs after layer l's backward (its gradients are complete then).
  void backward(const kernels::Tensor& d, const kernels::Tensor& dmemory, Saved& saved,
                const std::function<void(size_t)>& after_layer = {});

  // Layer forwards run so far, recomputations included (the cost of a schedule, for tests and benchmarks).
  int64_t layer_forwards() const { return layer_forwards_; }

 private:
  struct Chunk {
    int begin, end;  // layers [begin, end)
  };
  kernels::Tensor run_layer(size_t l, const kernels::Tensor& x, Saved& saved);

  Layers layers_;
  std::vector<Chunk> chunks_;
  int64_t layer_forwards_ = 0;
};

}  // namespace lmforge::layers
