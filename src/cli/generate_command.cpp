// defines: add_generate_command(): `lmforge generate`, text from a trained GPT checkpoint (a continuation) or a T5
//          checkpoint (span filling), streamed as produced
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/tokenizer_flags.h"
#include "datasets/masked_lm.h"
#include "families/registry.h"
#include "kernels/backend.h"
#include "train/generate.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

struct GenerateCommandOptions {
  std::string load;
  std::string config;
  text::TokenizerOptions tokenizer;
  std::string prompt;
  train::GenerateOptions generate;
  bool ignore_eos = false;
  bool print_ids = false;
  int threads = 0;
  kernels::Device device = kernels::Device::CPU;  // --device (cli/device_flag.h)
};

// Length of the prefix of `text` that later tokens cannot change: byte-level BPE tokens may end inside a UTF-8
// character, which decodes to U+FFFD until its remaining bytes arrive, so trailing U+FFFDs are held back.
size_t stable_prefix(const std::string& text) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  size_t n = text.size();
  while (n >= 3 && text.compare(n - 3, 3, kReplacement) == 0) n -= 3;
  return n;
}

void print_ids(const char* what, const std::vector<int32_t>& ids) {
  std::fprintf(stderr, "%s:", what);
  for (const int32_t id : ids) std::fprintf(stderr, " %d", id);
  std::fputc('\n', stderr);
}

// Streams `produced` as text: each call writes what the ids decoded so far add to the text already written. The
// prompt's ids are decoded with them: tokenizers that join tokens with a space (NullTokenizer, WordLevel) or glue
// word pieces decode a continuation differently alone ("1 2 3" then "144" must read "1 2 3 144").
class TextStream {
 public:
  TextStream(const text::Tokenizer& tokenizer, const std::vector<int32_t>& prompt)
      : tokenizer_(tokenizer), ids_(prompt), prompt_ids_(prompt.size()), printed_(tokenizer.decode(prompt).size()) {}
  void emit(const std::vector<int32_t>& produced, bool final) {
    ids_.resize(prompt_ids_);
    ids_.insert(ids_.end(), produced.begin(), produced.end());
    const std::string text = tokenizer_.decode(ids_);
    const size_t upto = final ? text.size() : stable_prefix(text);
    if (upto > printed_) {
      std::fwrite(text.data() + printed_, 1, upto - printed_, stdout);
      std::fflush(stdout);
      printed_ = upto;
    }
  }

 private:
  const text::Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;  // the prompt's, then the produced ones
  size_t prompt_ids_;
  size_t printed_;            // bytes of the decoded text written (the prompt's are written as the user gave them)
};

// Span filling with a T5 checkpoint: the prompt (with literal <extra_id_N> sentinels) goes to the encoder; the
// decoder starts at [BOS] and stops at [EOS]. The prompt is written on one line, the decoder's output on the next.
void run_t5(const GenerateCommandOptions& o, const text::Tokenizer& tokenizer, kernels::Backend& backend) {
  if (o.tokenizer.type != "BertWordPieceLowerCase" && o.tokenizer.type != "BertWordPieceCase")
    throw Error("a T5 checkpoint generates with the tokenizer it trained with: --tokenizer-type "
                "BertWordPieceLowerCase or BertWordPieceCase (with --vocab-extra-ids), not " + o.tokenizer.type);
  // [BOS], [EOS] and the sentinels' ids as Megatron's tokenizer and T5Dataset assign them.
  const datasets::MaskedLmVocab vocab = datasets::load_bert_vocab(o.tokenizer.vocab_file, o.tokenizer.vocab_extra_ids);
  std::unique_ptr<model::T5> model = train::load_t5_model(o.load, backend, o.config);
  if ((size_t)model->config().vocab_size != vocab.size())
    throw Error("the T5 checkpoint's vocabulary (" + std::to_string(model->config().vocab_size) +
                " ids) differs from the tokenizer's with --vocab-extra-ids " +
                std::to_string(o.tokenizer.vocab_extra_ids) + " (" + std::to_string(vocab.size()) +
                " ids): give the --vocab-file and --vocab-extra-ids it was trained with");
  const std::vector<int32_t> prompt = train::encode_t5_prompt(o.prompt, *tokenizer.make_encoder(), vocab.sentinels);
  if (prompt.empty()) throw Error("--prompt is empty: a T5 prompt is text with <extra_id_N> sentinels to fill");
  train::GenerateOptions options = o.generate;
  if (!o.ignore_eos) options.stop_id = vocab.eos;
  if (o.print_ids) print_ids("prompt ids", prompt);
  std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::vector<int32_t> produced;
  TextStream stream(tokenizer, {});  // the decoder's output alone, on a line of its own
  const auto t0 = std::chrono::steady_clock::now();
  train::generate_t5(*model, prompt, vocab.bos, options, [&](int32_t id) {
    produced.push_back(id);
    stream.emit(produced, false);
  });
  stream.emit(produced, true);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.print_ids) print_ids("generated ids", produced);
  std::fprintf(stderr, "generated %zu decoder tokens for a %zu-token encoder prompt in %.2f s (%.1f tokens/s, %s)\n",
               produced.size(), prompt.size(), s, produced.size() / (s > 0 ? s : 1e-9),
               options.use_kv_cache ? "KV cache" : "no cache");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Continue a prompt with a trained GPT: greedy (--greedy or --temperature 0) or sampled (--temperature, "
      "--top-k, --top-p, --seed). The prompt and then each new token's text are written to stdout as they are "
      "produced; a summary goes to stderr. Generation stops after --max-new-tokens or at <|endoftext|> "
      "(unless --ignore-eos). Inference keeps a key/value cache per layer (--no-kv-cache re-runs the whole "
      "sequence each step; both give the same tokens).\n"
      "A T5 checkpoint (config.json model_type lmforge-megatron-t5) fills spans instead: the prompt is text with "
      "the sentinels written literally, e.g. 'the <extra_id_0> sat on the <extra_id_1> .' (WordPiece never makes a "
      "sentinel from text, so each <extra_id_N> in the prompt is mapped to its id; give the --tokenizer-type, "
      "--vocab-file and --vocab-extra-ids of training). The encoder reads the prompt once (its keys/values cached "
      "for cross-attention); the decoder starts at [BOS] and writes '<extra_id_0> span <extra_id_1> span ... [EOS]' "
      "on the line after the prompt, stopping at [EOS] (unless --ignore-eos) or after --max-new-tokens.");
  cmd->add_option("--load", o->load,
                  "A --save directory (its latest checkpoint), an iteration directory, a Hugging Face GPT-2 model "
                  "directory, or a model.safetensors file with config.json beside it")
      ->required();
  cmd->add_option("--config", o->config, "config.json to use instead of the one beside the weights");
  add_tokenizer_flags(cmd, o->tokenizer);
  cmd->add_option("--prompt", o->prompt,
                  "Text to continue (empty: start from <|endoftext|>); T5: the text with <extra_id_N> sentinels");
  cmd->add_option("--max-new-tokens", o->generate.max_new_tokens, "Tokens to generate")->capture_default_str();
  cmd->add_flag("--greedy", o->generate.sampling.greedy, "Always take the most likely token");
  cmd->add_option("--temperature", o->generate.sampling.temperature, "Softmax temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", o->generate.sampling.top_k, "Sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", o->generate.sampling.top_p, "Nucleus sampling: smallest set with this mass (1: all)")
      ->capture_default_str();
  cmd->add_option("--seed", o->generate.seed, "Sampling seed")->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at <|endoftext|> (T5: [EOS])");
  cmd->add_flag("--print-ids", o->print_ids,
                "Also write the prompt's token ids and the generated ids to stderr (lines 'prompt ids: ...' and "
                "'generated ids: ...')");
  cmd->add_flag("--no-kv-cache", [o](int64_t) { o->generate.use_kv_cache = false; },
                "Recompute the whole sequence at every step (slow; for checking the cache)");
  cmd->add_option("--threads", o->threads, "Compute threads (0: OpenMP's default)")->capture_default_str();
  add_device_flag(cmd, o->device);

  cmd->callback([o] {
    // Everything that can be wrong with the flags or files is checked before the model runs.
    const auto tokenizer = text::make_tokenizer(o->tokenizer);
    kernels::Backend& backend = kernels::backend_for(o->device);
    if (o->threads > 0) backend.set_num_threads(o->threads);
    // The checkpoint's family (its config.json model_type) says how it generates.
    const families::ModelFamily& family = train::generating_family(o->load, o->config);
    if (family.generation() == families::Generation::SPAN_FILLING) return run_t5(*o, *tokenizer, backend);
    std::unique_ptr<model::GPT> model = train::load_model(o->load, backend, o->config);
    if ((size_t)model->config().vocab_size < tokenizer->vocab_size())
      throw Error("the model's vocabulary (" + std::to_string(model->config().vocab_size) +
                  ") is smaller than the tokenizer's (" + std::to_string(tokenizer->vocab_size()) + ")");
    std::vector<int32_t> prompt;
    tokenizer->make_encoder()->encode(o->prompt, prompt);
    if (prompt.empty()) {
      if (!tokenizer->eod_id()) throw Error("--prompt is empty and the tokenizer has no end-of-document token");
      prompt.push_back(*tokenizer->eod_id());
    }
    train::GenerateOptions options = o->generate;
    if (!o->ignore_eos) options.stop_id = tokenizer->eod_id();
    if (o->print_ids) print_ids("prompt ids", prompt);

    std::fwrite(o->prompt.data(), 1, o->prompt.size(), stdout);
    std::fflush(stdout);
    std::vector<int32_t> produced;
    TextStream stream(*tokenizer, prompt);
    const auto t0 = std::chrono::steady_clock::now();
    train::generate(*model, prompt, options, [&](int32_t id) {
      produced.push_back(id);
      stream.emit(produced, false);
    });
    stream.emit(produced, true);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o->print_ids) print_ids("generated ids", produced);
    std::fprintf(stderr, "generated %zu tokens after a %zu-token prompt in %.2f s (%.1f tokens/s, %s)\n",
                 produced.size(), prompt.size(), s, produced.size() / (s > 0 ? s : 1e-9),
                 options.use_kv_cache ? "KV cache" : "no cache");
  });
}

}  // namespace lmforge::cli
