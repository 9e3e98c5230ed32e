// defines: lmforge::train::SamplingOptions, sample_token(), GenerateOptions, generate() (prompt → streamed new
//   tokens over the model's key/value cache), load_model()
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "model/gpt.h"

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
// config_path, when given, names the config.json instead. Errors name the file at fault.
std::unique_ptr<model::GPT> load_model(const std::string& path, const std::string& config_path = "");

}  // namespace lmforge::train
