// defines: Recompute::validate, TransformerStack (forward keeping chunk boundaries, backward recomputing chunks)
#include "layers/transformer_stack.h"

#include <algorithm>

#include "kernels/ops.h"
#include "layers/workspace.h"
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

TransformerStack::TransformerStack(Layers layers, const Recompute& r) : layers_(std::move(layers)) {
  if (r.granularity != "full") return;
  if (r.num_layers < 1) throw Error("recompute num layers must be >= 1 (got " + std::to_string(r.num_layers) + ")");
  const int n = r.num_layers, count = (int)layers_.size();
  if (r.method == "uniform") {
    for (int a = 0; a < count; a += n) chunks_.push_back({a, std::min(a + n, count)});
  } else {
    for (int a = 0; a < std::min(n, count); a++) chunks_.push_back({a, a + 1});
  }
}

kernels::Tensor TransformerStack::run_layer(size_t l, const kernels::Tensor& x, Saved& saved) {
  layer_forwards_++;
  return layers_[l]->forward(x, saved.in, saved.step, saved.layers[l]);
}

kernels::Tensor TransformerStack::forward(kernels::Tensor x, const LayerInputs& in, const ForwardStep& step,
                                          Saved& saved) {
  saved.in = in;
  saved.step = step;
  saved.layers.resize(layers_.size());
  saved.chunk_inputs.resize(chunks_.size());
  saved.chunk_outputs.resize(chunks_.size());
  size_t c = 0;  // the next recomputed chunk
  for (int l = 0; l < (int)layers_.size(); l++) {
    if (c < chunks_.size() && l == chunks_[c].begin) saved.chunk_inputs[c] = x;
    x = run_layer((size_t)l, x, saved);
    if (c < chunks_.size() && l + 1 == chunks_[c].end) {
      // Keep only the chunk's output (the next layer's input); its layers run again in the backward.
      const Chunk& k = chunks_[c];
      const kernels::Tensor out =
          sized(layers_[(size_t)l]->backend(), saved.chunk_outputs[c], x.dtype, x.rows(), x.dim(-1));
      kernels::copy(out, x);
      for (int i = k.begin; i < k.end; i++) saved.layers[(size_t)i] = TransformerLayer::Saved{};
      x = out;
      c++;
    }
  }
  return x;
}

void TransformerStack::backward(const kernels::Tensor& d, const kernels::Tensor& dmemory, Saved& saved,
                                const std::function<void(size_t)>& after_layer) {
  if (saved.layers.size() != layers_.size()) throw std::logic_error("TransformerStack: a backward without its forward");
  // The layers' buffers stay in `saved` for the next forward in the same slot (allocated once for the largest
  // shape), except a recomputed chunk's, which are freed as soon as its backward is done (the memory bound asked for).
  size_t c = chunks_.size();  // recomputed chunks, walked from the last
  for (size_t l = layers_.size(); l-- > 0;) {
    if (c > 0 && (int)l + 1 == chunks_[c - 1].end) {
      // The chunk's forward again from its kept input, with the same inputs and step (dropout masks).
      const Chunk& k = chunks_[--c];
      kernels::Tensor x = saved.chunk_inputs[c];
      for (int i = k.begin; i < k.end; i++) x = run_layer((size_t)i, x, saved);
    }
    layers_[l]->backward(d, dmemory, saved.layers[l]);
    if (after_layer) after_layer(l);
    if (c < chunks_.size() && (int)l == chunks_[c].begin)
      for (int i = chunks_[c].begin; i < chunks_[c].end; i++) saved.layers[(size_t)i] = TransformerLayer::Saved{};
  }
}

}  // namespace lmforge::layers
