// defines: lmforge::train::SamplingOptions, sample_token(), GenerateOptions, generate() (prompt → streamed new
//   tokens over the model's key/value cache), load_model(); for T5: encode_t5_prompt(), generate_t5() (span
//   filling over the decoder's key/value cache and the encoder's cached keys/values), load_t5_model(),
//   checkpoint_model_type(), generating_family()
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/gpt.h"
#include "model/t5.h"
#include "text/tokenizer.h"

namespace lmforge::families {
class ModelFamily;
}

namespace lmforge::train {

// How the next token is chosen from logits over the real vocabulary (padded columns are never candidates).
struct SamplingOptions {
  bool greedy = false;       // argmax (lowest id on ties); temperature 0 means the same
  double temperature = 1.0;  // logits / temperature before softmax
  int top_k = 0;             // keep the k largest logits (0: all)
  double top_p = 1.0;        // then keep the smallest set of most likely tokens whose mass reaches top_p (1: all)
};

// Picks a token from logits[0, vocab_size). Deterministic for a given rng state. Ties in top-k/top-p are broken
// by id so that the candidate set does not depend on sort stability.
int32_t sample_token(const float* logits, int vocab_size, const SamplingOptions& options, std::mt19937_64& rng);

struct GenerateOptions {
  SamplingOptions sampling;
  int max_new_tokens = 64;
  uint64_t seed = 1234;
  std::optional<int32_t> stop_id;  // stop after producing this id (e.g. <|endoftext|>); it is still reported
  bool use_kv_cache = true;        // model::GPT::decode_step; false: the full forward over the whole sequence at
                                   // every step (O(n²); both give the same tokens)
};

// Generates up to max_new_tokens after the prompt (≥ 1 token), calling on_token for each as it is produced.
// Error before any work when prompt + max_new_tokens exceeds the model's max_positions or the prompt is empty.
std::vector<int32_t> generate(model::GPT& model, std::span<const int32_t> prompt, const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

// A model for inference from `path`: a save directory (its latest checkpoint), an iteration directory or a Hugging
// Face model directory (model.safetensors + config.json), or a .safetensors file with config.json beside it.
// config_path, when given, names the config.json instead. The model lives on `backend` (the --device of the command).
// Errors name the file at fault.
std::unique_ptr<model::GPT> load_model(const std::string& path, kernels::Backend& backend,
                                       const std::string& config_path = "");

// ---- Megatron's T5 (span filling) ----

// The "model_type" of the config.json that load_model / load_t5_model would read for these arguments ("" when the
// file has none, as a Hugging Face GPT-2 config may). Errors as load_model's.
std::string checkpoint_model_type(const std::string& path, const std::string& config_path = "");

// The family of the checkpoint load_model / load_t5_model would read (its config.json model_type): Error naming the
// model_type and the command that reads it when the family does not generate text (a BERT checkpoint), or is unknown.
const families::ModelFamily& generating_family(const std::string& path, const std::string& config_path = "");

// load_model for a T5 checkpoint (config.json with model_type "lmforge-megatron-t5").
std::unique_ptr<model::T5> load_t5_model(const std::string& path, kernels::Backend& backend,
                                         const std::string& config_path = "");

// A T5 prompt: the text between literal "<extra_id_N>" markers is WordPiece-encoded by `encoder`; each marker
// becomes sentinels[N] (the tokenizer never produces a sentinel from text, as in Megatron, so the prompt names
// them). Error naming the marker when N >= sentinels.size() (--vocab-extra-ids) or it is malformed.
std::vector<int32_t> encode_t5_prompt(std::string_view text, text::TextEncoder& encoder,
                                      std::span<const int32_t> sentinels);

// Span filling: the encoder reads encoder_prompt (≥ 1 token, at most max_positions) once; the decoder starts from
// start_id ([BOS], as T5Dataset's text_dec begins) and produces up to max_new_tokens (≤ max_positions), stopping
// after options.stop_id ([EOS], reported). use_kv_cache: model::T5::decode_step (self-attention cache, the
// encoder's keys/values projected once); false: the full encoder+decoder forward at each step (same tokens).
std::vector<int32_t> generate_t5(model::T5& model, std::span<const int32_t> encoder_prompt, int32_t start_id,
                                 const GenerateOptions& options, const std::function<void(int32_t)>& on_token = {});

}  // namespace lmforge::train
