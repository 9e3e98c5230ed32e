// defines: Stage::check, padded_vocab_size, check_tensor_parallel_fits, add_tied_word_copy, tied_head_spec, ConfigCheck,
//          ModelParameters::set_compute_dtype
#include "model/model_common.h"

#include <climits>
#include <cmath>

#include "util/error.h"

namespace lmforge::model {

int padded_vocab_size(int vocab_size, int divisible_by) {
  const int64_t m = divisible_by;
  return (int)((vocab_size + m - 1) / m * m);
}

void check_tensor_parallel_fits(int T, int padded_vocab, int heads, int ffn) {
  if (padded_vocab % T != 0)
    throw Error("--tensor-model-parallel-size " + std::to_string(T) + " does not divide the padded vocabulary " +
                std::to_string(padded_vocab) + " (use --make-vocab-size-divisible-by a multiple of it)");
  if (heads % T != 0 || ffn % T != 0)
    throw Error("--tensor-model-parallel-size " + std::to_string(T) + " does not divide --num-attention-heads " +
                std::to_string(heads) + " and --ffn-hidden-size " + std::to_string(ffn) +
                " (each rank takes whole heads and an equal share of the MLP)");
}

size_t add_tied_word_copy(layers::ParameterStore& store, const layers::EmbeddingSpec& e) {
  return store.add(e.word_name + ".weight", {e.padded_vocab, e.hidden}, true, layers::Init::normal(e.init_std),
                   /*split_dim=*/0);
}

layers::LinearSpec tied_head_spec(const std::string& name, const std::string& bias_name, int64_t hidden,
                                  int64_t padded_vocab, size_t word) {
  layers::LinearSpec head;
  head.name = name;
  head.bias_name = bias_name;
  head.in = hidden;
  head.out = padded_vocab;
  head.layout = kernels::WeightLayout::OUT_IN;
  head.parallelism = layers::Parallelism::COLUMN;
  head.tied_weight = (int64_t)word;
  return head;
}

void Stage::check(const char* model, int total_layers) const {
  const int end = end_layer(total_layers);
  if (first_layer < 0 || end > total_layers || first_layer >= end)
    throw Error(std::string(model) + " stage: layers [" + std::to_string(first_layer) + ", " + std::to_string(end) +
                ") of " + std::to_string(total_layers));
}

void ConfigCheck::fail(const std::string& msg) const { throw Error("invalid " + model_ + " config: " + msg); }

void ConfigCheck::positive(std::initializer_list<std::pair<const char*, int64_t>> fields) const {
  for (const auto& [what, v] : fields)
    if (v < 1) fail(std::string(what) + " must be >= 1 (got " + std::to_string(v) + ")");
}

void ConfigCheck::ffn_hidden(int ffn_hidden) const {
  if (ffn_hidden < 0) fail("ffn_hidden must be >= 0 (0: 4·hidden; got " + std::to_string(ffn_hidden) + ")");
}

void ConfigCheck::heads_divide(int hidden, int heads) const {
  if (hidden % heads != 0)
    fail("hidden size " + std::to_string(hidden) + " is not divisible by the number of attention heads " +
         std::to_string(heads));
}

void ConfigCheck::numbers(int vocab_size, int divisible_by, float layernorm_eps, float init_std) const {
  if ((int64_t)vocab_size + divisible_by > INT32_MAX) fail("vocab_size too large");
  if (!(layernorm_eps > 0.0f)) fail("layernorm_eps must be positive");
  if (!(init_std > 0.0f) || !std::isfinite(init_std)) fail("init_std must be a positive number");
}

void ConfigCheck::dropouts(float hidden_dropout, float attention_dropout) const {
  if (!(hidden_dropout >= 0.0f && hidden_dropout < 1.0f))
    fail("hidden dropout must be in [0, 1) (got " + std::to_string(hidden_dropout) + ")");
  if (!(attention_dropout >= 0.0f && attention_dropout < 1.0f))
    fail("attention dropout must be in [0, 1) (got " + std::to_string(attention_dropout) + ")");
}

void ModelParameters::set_compute_dtype(kernels::DType dtype) {
  store_.set_compute_dtype(dtype);
  workspace_.set_dtype(store_.activation_dtype());
}

}  // namespace lmforge::model
