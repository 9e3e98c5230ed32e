// train_sentencepiece(): libsentencepiece's own trainer (SentencePieceTrainer::Train with spm_train's flags), fed
// the corpus through lmforge's readers by a SentenceIterator, so its pieces are spm_train's for the same lines and
// flags. spm reads a text file's lines without the '\n'; here each training line (corpus.h) loses its '\n' the
// same way. spm keeps every sentence in memory while training (its own design); --spm-option
// input_sentence_size=N samples N of them.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <unordered_map>

#include "tokenizer_train/corpus.h"
#include "tokenizer_train/hf_files.h"
#include "tokenizer_train/train.h"
#include "util/error.h"

namespace lmforge::tokenizer_train {
namespace {

class SentenceCollector final : public LineSink {
 public:
  void add_line(std::string_view line) override {
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    sentences.emplace_back(line);
  }
  std::vector<std::string> sentences;
};

class VectorIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& sentences) : sentences_(sentences) {}
  bool done() const override { return i_ >= sentences_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return sentences_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& sentences_;
  size_t i_ = 0;
};

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

TrainSummary train_sentencepiece(const TokenizerTrainOptions& options) {
  std::unordered_map<std::string, std::string> kwargs;
  // spm_train's own flags first, so that the named lmforge flags below win over a --spm-option that repeats them.
  for (const std::string& option : options.spm_options) {
    const size_t eq = option.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--spm-option " + option + ": expected name=value (an spm_train flag without its dashes)");
    std::string name = option.substr(0, eq);
    if (name == "input" || name == "model_prefix" || name == "model_type" || name == "vocab_size" ||
        name == "num_threads" || name == "random_seed")
      throw Error("--spm-option " + option + ": set by lmforge's own flags (--input, --output-dir, --type, "
                  "--vocab-size, --threads, --random-seed)");
    kwargs[name] = option.substr(eq + 1);
  }
  kwargs["model_type"] = options.type == ModelType::kSentencePieceBpe ? "bpe" : "unigram";
  kwargs["vocab_size"] = std::to_string(options.vocab_size);
  const int threads = options.corpus.threads > 0 ? options.corpus.threads : int(std::thread::hardware_concurrency());
  kwargs["num_threads"] = std::to_string(std::max(1, threads));
  if (options.character_coverage) kwargs["character_coverage"] = format_double(*options.character_coverage);
  if (options.byte_fallback) kwargs["byte_fallback"] = *options.byte_fallback ? "true" : "false";
  if (options.special_tokens && !options.special_tokens->empty()) {
    std::string joined;
    for (const std::string& token : *options.special_tokens) {
      if (token.find(',') != std::string::npos)
        throw Error("--special-tokens " + token + ": SentencePiece lists user_defined_symbols with commas, so a "
                    "token cannot contain one");
      joined += (joined.empty() ? "" : ",") + token;
    }
    kwargs["user_defined_symbols"] = joined;
  }

  OutputFiles files(options.output_dir);
  const std::string prefix = files.temporary_path("tokenizer");
  kwargs["model_prefix"] = prefix;
  TrainSummary summary;
  auto start = std::chrono::steady_clock::now();
  CorpusOptions corpus = options.corpus;
  corpus.ordered = true;  // spm samples and breaks ties by sentence order
  std::vector<std::unique_ptr<LineSink>> sinks;
  summary.corpus = read_corpus(corpus, [] { return std::make_unique<SentenceCollector>(); }, sinks);
  summary.count_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  static const std::vector<std::string> kNone;
  const std::vector<std::string>& sentences =
      sinks.empty() ? kNone : static_cast<SentenceCollector&>(*sinks.front()).sentences;
  std::fprintf(stderr, "read %zu sentences in %.1f s; training with libsentencepiece (its log follows)\n",
               sentences.size(), summary.count_seconds);

  start = std::chrono::steady_clock::now();
  // Registered before training, so that a failure removes whatever spm wrote.
  files.adopt("tokenizer.model", prefix + ".model");
  files.adopt("tokenizer.vocab", prefix + ".vocab");
  VectorIterator iterator(sentences);
  // spm_train's --random_seed is no TrainerSpec field: its main() seeds libsentencepiece's process-wide generator,
  // which sampling, shuffling and unigram's EM draw from. The same call here gives spm_train's run.
  if (options.random_seed) sentencepiece::SetRandomGeneratorSeed(*options.random_seed);
  const sentencepiece::util::Status status = sentencepiece::SentencePieceTrainer::Train(kwargs, &iterator);
  if (!status.ok()) throw Error(std::string("SentencePiece training failed: ") + status.ToString());
  summary.train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.vocab_size = options.vocab_size;
  summary.outputs = files.commit();
  return summary;
}

}  // namespace lmforge::tokenizer_train
