// defines: Recompute::validate, StackRecomputation (forward keeping chunk boundaries, backward recomputing chunks)
#include "layers/recompute.h"

#include <algorithm>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::layers {

void Recompute::validate(int layers) const {
  if (!granularity.empty() && granularity != "full" && granularity != "selective")
    throw Error("recompute granularity must be full or selective (got " + granularity + ")");
  if (method != "uniform" && method != "block")
    throw Error("recompute method must be uniform or block (got " + method + ")");
  if (num_layers < 1 || num_layers > layers)
    throw Error("recompute num layers must be in [1, " + std::to_string(layers) + "] (the stack's layers; got " +
                std::to_string(num_layers) + ")");
}

// The settings are the whole model's (validated against its stacks by the model's config); a pipeline stage chunks
// its own layers, as Megatron's per-stage transformer does: uniform chunks of num_layers cut short at the stage's
// end, block recomputation of the stage's first min(num_layers, layers) layers.
StackRecomputation::StackRecomputation(const Recompute& r, int layers) {
  if (r.granularity != "full") return;
  if (r.num_layers < 1) throw Error("recompute num layers must be >= 1 (got " + std::to_string(r.num_layers) + ")");
  const int n = r.num_layers;
  if (r.method == "uniform") {
    for (int a = 0; a < layers; a += n) chunks_.push_back({a, std::min(a + n, layers), {}, {}});
  } else {
    for (int a = 0; a < std::min(n, layers); a++) chunks_.push_back({a, a + 1, {}, {}});
  }
}

kernels::Tensor StackRecomputation::forward(Layers& layers, kernels::Tensor x, const Run& run,
                                            kernels::Backend& backend) {
  size_t c = 0;  // the next recomputed chunk
  for (int l = 0; l < (int)layers.size(); l++) {
    if (c < chunks_.size() && l == chunks_[c].begin) chunks_[c].input = x;
    x = run(*layers[(size_t)l], x);
    if (c < chunks_.size() && l + 1 == chunks_[c].end) {
      // Keep only the chunk's output (the next layer's input); its layers run again in the backward.
      Chunk& k = chunks_[c++];
      const int64_t rows = x.rows(), cols = x.dim(-1);
      k.output.resize(backend, x.dtype, (size_t)(rows * cols));
      kernels::copy(k.output.view({rows, cols}), x);
      for (int i = k.begin; i < k.end; i++) layers[(size_t)i]->release_activations();
      x = k.output.view({rows, cols});
    }
  }
  return x;
}

void StackRecomputation::backward(Layers& layers, const Run& run, const std::function<void(size_t)>& backward_layer) {
  size_t c = chunks_.size();  // recomputed chunks, walked from the last
  for (size_t l = layers.size(); l-- > 0;) {
    if (c > 0 && (int)l + 1 == chunks_[c - 1].end) {
      // The chunk's forward again from its kept input, with the same arguments and step (dropout masks).
      const Chunk& k = chunks_[--c];
      kernels::Tensor x = k.input;
      for (int i = k.begin; i < k.end; i++) x = run(*layers[(size_t)i], x);
    }
    backward_layer(l);
    if (c < chunks_.size() && (int)l == chunks_[c].begin)
      for (int i = chunks_[c].begin; i < chunks_[c].end; i++) layers[(size_t)i]->release_activations();
  }
}

}  // namespace lmforge::layers
