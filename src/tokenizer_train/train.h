// defines: TokenizerTrainOptions, TrainSummary, run_tokenizer_train(): `lmforge tokenizer train`, a vocabulary from
//          a corpus as Hugging Face's Rust trainers (byte-level BPE, WordPiece) or libsentencepiece (BPE, unigram)
//          make it, written as the files lmforge's and Megatron's tokenizer flags read
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer_train/corpus.h"

namespace lmforge::tokenizer_train {

enum class ModelType { kByteLevelBpe, kWordPiece, kSentencePieceBpe, kSentencePieceUnigram };

// "ByteLevelBPE", "WordPiece", "SentencePieceBPE", "SentencePieceUnigram"; Error for anything else.
ModelType parse_model_type(const std::string& name);
const char* model_type_name(ModelType type);

struct TokenizerTrainOptions {
  ModelType type = ModelType::kByteLevelBpe;
  CorpusOptions corpus;                  // inputs, --json-keys, --input-format, --threads
  std::string output_dir;                // files appear here only when all are complete
  size_t vocab_size = 30000;             // HF's trainers' default
  uint64_t min_frequency = 0;            // HF: a pair rarer than this ends training (HF/BPE/WordPiece only)
  // Unset: <|endoftext|> (ByteLevelBPE), [PAD] [UNK] [CLS] [SEP] [MASK] (WordPiece), none (SentencePiece, whose
  // <unk> <s> </s> always exist). Given (even empty), exactly these, ids 0..k-1 (SentencePiece:
  // user_defined_symbols).
  std::optional<std::vector<std::string>> special_tokens;
  std::optional<size_t> limit_alphabet;  // HF: keep the most frequent characters only
  std::optional<bool> lowercase;         // unset: false (ByteLevelBPE), true (WordPiece)
  // WordPiece's BertNormalizer switches, as HF's BertWordPieceTokenizer(clean_text, handle_chinese_chars,
  // strip_accents, lowercase) takes them: strip_accents unset follows lowercase (HF's None).
  std::optional<bool> strip_accents, handle_chinese_chars, clean_text;
  bool initial_alphabet = true;          // ByteLevelBPE: the 256 byte characters are always in the vocabulary
  // SentencePiece only: spm_train's flags (unset: spm's defaults), and any other spm_train flag as name=value.
  std::optional<double> character_coverage;
  std::optional<uint32_t> random_seed;
  std::optional<bool> byte_fallback;
  std::vector<std::string> spm_options;
};

struct TrainSummary {
  CorpusSummary corpus;
  uint64_t distinct_words = 0, total_words = 0;  // HF trainers only
  size_t vocab_size = 0;                         // entries written
  size_t merges = 0;                             // BPE merges written
  double count_seconds = 0, train_seconds = 0;
  std::vector<std::string> outputs;
};

// Validates the flags against the model type (an option the type does not use is an Error, never ignored),
// reads the corpus, trains and writes. Progress goes to stderr.
TrainSummary run_tokenizer_train(const TokenizerTrainOptions& options);

// SentencePiece half of run_tokenizer_train() (spm_trainer.cpp).
TrainSummary train_sentencepiece(const TokenizerTrainOptions& options);

}  // namespace lmforge::tokenizer_train
