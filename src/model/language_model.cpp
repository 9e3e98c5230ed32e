// defines: Stage::check, padded_vocab_size, check_tensor_parallel_fits, add_tied_word_copy, ConfigCheck,
//          LanguageModel (set_compute_dtype, check_ids, upload_ids, decode_next)
#include "model/language_model.h"

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
                   /*split_dim=*/store.table().tp_size() > 1 ? 0 : -1);
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

void ConfigCheck::recompute(const layers::Recompute& r, int layers) const {
  try {
    r.validate(layers);
  } catch (const Error& e) {
    fail(e.what());
  }
}

void LanguageModel::check_ids(const int32_t* ids, size_t n, int vocab, const std::string& context,
                              const char* what) {
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw Error(context + ": " + what + " id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

kernels::Tensor LanguageModel::upload_ids(kernels::Buffer& buf, const int32_t* host, size_t n) {
  buf.resize(backend(), kernels::DType::I32, n);
  backend().copy_to_device(buf.data(), host, n * sizeof(int32_t));
  return buf.view({(int64_t)n});
}

void LanguageModel::append_positions(std::vector<int32_t>& ids, int64_t rows, int T) {
  for (int64_t r = 0; r < rows; r++)
    for (int t = 0; t < T; t++) ids.push_back(t);
}

kernels::Tensor LanguageModel::upload_positions(kernels::Buffer& buf, int64_t rows, int T) {
  std::vector<int32_t> ids;
  ids.reserve((size_t)(rows * T));
  append_positions(ids, rows, T);
  return upload_ids(buf, ids.data(), ids.size());
}

const float* LanguageModel::decode_next(const int32_t* tokens, int B, int pos, int vocab,
                                            const std::string& context, layers::Embedding& embedding,
                                            layers::TransformerStack& layers, layers::LayerNorm& final_norm,
                                            layers::LmHead& head) {
  check_ids(tokens, (size_t)B, vocab, context, "token");
  kernels::Backend& be = backend();
  const int64_t H = embedding.hidden(), V = head.local_vocab();
  const std::vector<int32_t> positions((size_t)B, pos);
  const kernels::Tensor x = embedding.forward(upload_ids(decode_tokens_, tokens, (size_t)B),
                                              upload_ids(decode_positions_, positions.data(), (size_t)B),
                                              kernels::Tensor{});
  for (auto& layer : layers.layers()) layer->decode_step(x, pos);
  decode_hidden_.resize(be, store_.activation_dtype(), (size_t)(B * H));
  final_norm.forward(decode_hidden_.view({B, H}), x);
  decode_logits_.resize(be, kernels::DType::F32, (size_t)(B * V));
  head.logits(decode_logits_.view({B, V}), decode_hidden_.view({B, H}));
  return decode_logits_.f32();
}

void LanguageModel::set_compute_dtype(kernels::DType dtype) {
  store_.set_compute_dtype(dtype);
  workspace_.set_dtype(store_.activation_dtype());
}

}  // namespace lmforge::model
