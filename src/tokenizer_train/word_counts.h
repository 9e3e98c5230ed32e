// defines: WordSplitOptions (the normalizer + pre-tokenizer a trainer sees words through), WordCountMap, count_words(),
//          bert_normalizer_json():
//          a corpus to its distinct words and their counts (HF's BpeTrainer::feed), memory bounded by the distinct
//          words, every core counting into its own map
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_train/bpe_trainer.h"
#include "tokenizer_train/corpus.h"

namespace lmforge::tokenizer_train {

// How a line becomes words, as HF's pipelines do it.
enum class WordSplit {
  kByteLevel,  // [Lowercase] + ByteLevel(add_prefix_space=false, use_regex=true): GPT-2's regex pieces, byte-mapped
  kBert,       // BertNormalizer(clean_text, handle_chinese_chars, strip_accents, lowercase) + BertPreTokenizer
};

struct WordSplitOptions {
  WordSplit split = WordSplit::kByteLevel;
  bool lowercase = false;
  // kBert's BertNormalizer switches, HF's defaults: accents stripped as lowercase says (strip_accents unset, HF's
  // None), Chinese characters padded, control characters removed.
  std::optional<bool> strip_accents;
  bool handle_chinese_chars = true, clean_text = true;
};

// Distinct byte strings and counts. Keys live in one arena; open addressing with linear probing at load <= 1/2.
class WordCountMap {
 public:
  WordCountMap();
  void add(std::string_view word, uint64_t count = 1);
  void add_all(const WordCountMap& other);
  size_t size() const { return size_; }
  size_t memory_bytes() const;
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.length != kEmpty) f(std::string_view(arena_.data() + s.offset, s.length), s.count);
  }

 private:
  struct Slot {
    uint64_t hash;
    uint64_t offset;
    uint64_t count;
    uint32_t length;
  };
  static constexpr uint32_t kEmpty = ~uint32_t{0};
  void grow();
  std::vector<Slot> slots_;
  std::string arena_;
  size_t size_ = 0, mask_ = 0;
};

struct WordCountResult {
  std::vector<WordCount> words;  // in the trainer's alphabet (ByteLevel: GPT-2's byte-to-unicode characters)
  CorpusSummary corpus;
  uint64_t total_words = 0;      // occurrences
};

// Reads the corpus and counts its words.
WordCountResult count_words(const CorpusOptions& corpus, const WordSplitOptions& split);

// kBert's normalizer as tokenizer.json spells it ({"type":"BertNormalizer", the four switches}): the trainer reads
// its words through it, and the written tokenizer.json carries the same object.
std::string bert_normalizer_json(const WordSplitOptions& split);

}  // namespace lmforge::tokenizer_train
