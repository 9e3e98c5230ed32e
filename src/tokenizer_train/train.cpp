// run_tokenizer_train(): flag checks per model type, then word counting + the HF BPE trainer (byte-level BPE,
// WordPiece) or libsentencepiece (spm_trainer.cpp), then the files.
#include "tokenizer_train/train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "text/gpt2_bpe.h"
#include "tokenizer_train/bpe_trainer.h"
#include "tokenizer_train/hf_files.h"
#include "tokenizer_train/word_counts.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::tokenizer_train {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void check_options(const TokenizerTrainOptions& options) {
  const bool spm = options.type == ModelType::kSentencePieceBpe || options.type == ModelType::kSentencePieceUnigram;
  const std::string type = model_type_name(options.type);
  auto refuse = [&](bool given, const std::string& flag, const std::string& why) {
    if (given) throw Error(flag + " does not apply to --type " + type + ": " + why);
  };
  if (options.vocab_size == 0) throw Error("--vocab-size must be at least 1");
  if (spm) {
    const std::string why = "SentencePiece has no such option (see --help for its own flags)";
    refuse(options.min_frequency != 0, "--min-frequency", why);
    refuse(options.limit_alphabet.has_value(), "--limit-alphabet", "use --character-coverage");
    refuse(options.lowercase.has_value(), "--lowercase",
           "SentencePiece normalizes by rule (--spm-option normalization_rule_name=nmt_nfkc_cf folds case)");
    refuse(!options.initial_alphabet, "--no-initial-alphabet", "it is a byte-level BPE option");
  } else {
    const std::string why = "it is a SentencePiece option";
    refuse(options.character_coverage.has_value(), "--character-coverage", why);
    refuse(options.random_seed.has_value(), "--random-seed", why + " (HF's trainers are deterministic)");
    refuse(options.byte_fallback.has_value(), "--byte-fallback", why);
    refuse(!options.spm_options.empty(), "--spm-option", why);
    refuse(options.type == ModelType::kWordPiece && !options.initial_alphabet, "--no-initial-alphabet",
           "it is a byte-level BPE option");
  }
  for (const auto& [given, flag] : {std::pair{options.strip_accents.has_value(), "--strip-accents"},
                                    std::pair{options.handle_chinese_chars.has_value(), "--handle-chinese-chars"},
                                    std::pair{options.clean_text.has_value(), "--clean-text"}})
    refuse(given && options.type != ModelType::kWordPiece, flag,
           "it switches WordPiece's BertNormalizer (ByteLevelBPE has --lowercase; SentencePiece normalizes by rule)");
  if (options.type == ModelType::kWordPiece) {
    const auto& specials = options.special_tokens;
    if (specials && std::find(specials->begin(), specials->end(), "[UNK]") == specials->end())
      throw Error("--special-tokens for WordPiece must include [UNK]: the model's unknown token (a word it cannot "
                  "cover becomes [UNK], and BERT tokenizers refuse a vocab.txt without it)");
  }
}

TrainSummary train_hf(const TokenizerTrainOptions& options) {
  const bool byte_level = options.type == ModelType::kByteLevelBpe;
  WordSplitOptions split;
  split.split = byte_level ? WordSplit::kByteLevel : WordSplit::kBert;
  split.lowercase = options.lowercase.value_or(!byte_level);
  split.strip_accents = options.strip_accents;
  split.handle_chinese_chars = options.handle_chinese_chars.value_or(true);
  split.clean_text = options.clean_text.value_or(true);
  BpeTrainerOptions trainer;
  trainer.vocab_size = options.vocab_size;
  trainer.min_frequency = options.min_frequency;
  trainer.limit_alphabet = options.limit_alphabet;
  if (options.special_tokens)
    trainer.special_tokens = *options.special_tokens;
  else if (byte_level)
    trainer.special_tokens = {"<|endoftext|>"};
  else
    trainer.special_tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  if (byte_level && options.initial_alphabet)
    for (int b = 0; b < 256; ++b) trainer.initial_alphabet.push_back(text::gpt2_byte_to_unicode(uint8_t(b)));
  if (!byte_level) trainer.continuing_subword_prefix = "##";

  OutputFiles files(options.output_dir);  // the directory is checked before hours of counting
  TrainSummary summary;
  auto start = std::chrono::steady_clock::now();
  WordCountResult counted = count_words(options.corpus, split);
  summary.corpus = counted.corpus;
  summary.distinct_words = counted.words.size();
  summary.total_words = counted.total_words;
  summary.count_seconds = seconds_since(start);
  std::fprintf(stderr, "counted %s words (%s distinct) in %s files in %.1f s\n",
               format_count(counted.total_words).c_str(), format_count(counted.words.size()).c_str(),
               format_count(counted.corpus.files).c_str(), summary.count_seconds);

  start = std::chrono::steady_clock::now();
  ProgressLine progress(options.corpus.progress_seconds);
  const size_t initial = trainer.special_tokens.size();
  const BpeModel model = train_bpe(counted.words, trainer, [&](size_t vocab, size_t target) {
    if (!progress.due()) return;
    const double seconds = progress.elapsed_seconds();
    const double done = double(vocab > initial ? vocab - initial : 0);
    const double rate = seconds > 0 ? done / seconds : 0;
    std::string line = "vocabulary " + format_count(vocab) + " / " + format_count(target) + ", " +
                       std::to_string(int(rate)) + " tokens/s";
    if (rate > 0 && target > vocab) line += ", ETA at most " + format_duration(double(target - vocab) / rate);
    progress.print(line);
  });
  progress.finish();
  counted.words = {};
  summary.train_seconds = seconds_since(start);
  summary.vocab_size = model.vocab.size();
  summary.merges = model.merges.size();
  if (model.vocab.size() < options.vocab_size)
    std::fprintf(stderr, "note: the vocabulary has %zu entries, fewer than --vocab-size %zu: no pair occurs %s\n",
                 model.vocab.size(), options.vocab_size,
                 options.min_frequency > 1 ? ("--min-frequency " + std::to_string(options.min_frequency) +
                                              " times any more").c_str()
                                           : "more than once any more");
  if (byte_level) {
    files.write("vocab.json", bpe_vocab_json(model));
    files.write("merges.txt", bpe_merges_txt(model));
    files.write("tokenizer.json", bpe_tokenizer_json(model, split.lowercase));
  } else {
    files.write("vocab.txt", wordpiece_vocab_txt(model));
    files.write("tokenizer.json", wordpiece_tokenizer_json(model, split));
  }
  summary.outputs = files.commit();
  return summary;
}

}  // namespace

ModelType parse_model_type(const std::string& name) {
  if (name == "ByteLevelBPE") return ModelType::kByteLevelBpe;
  if (name == "WordPiece") return ModelType::kWordPiece;
  if (name == "SentencePieceBPE") return ModelType::kSentencePieceBpe;
  if (name == "SentencePieceUnigram") return ModelType::kSentencePieceUnigram;
  throw Error("--type " + name + ": unknown (ByteLevelBPE, WordPiece, SentencePieceBPE, SentencePieceUnigram)");
}

const char* model_type_name(ModelType type) {
  switch (type) {
    case ModelType::kByteLevelBpe: return "ByteLevelBPE";
    case ModelType::kWordPiece: return "WordPiece";
    case ModelType::kSentencePieceBpe: return "SentencePieceBPE";
    case ModelType::kSentencePieceUnigram: return "SentencePieceUnigram";
  }
  return "?";
}

TrainSummary run_tokenizer_train(const TokenizerTrainOptions& options) {
  check_options(options);
  if (options.type == ModelType::kSentencePieceBpe || options.type == ModelType::kSentencePieceUnigram)
    return train_sentencepiece(options);
  return train_hf(options);
}

}  // namespace lmforge::tokenizer_train
