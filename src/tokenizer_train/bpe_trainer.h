// defines: BpeTrainerOptions, BpeModel, train_bpe(): Hugging Face's BPE trainer (tokenizers' models/bpe/trainer.rs,
//          BpeTrainer::do_train) re-stated over counted words, merge for merge; WordPiece training is this with a
//          "##" continuing-subword prefix (WordPieceTrainer keeps the BPE vocabulary and drops the merges)
//
// What is reproduced, because the output depends on it (../shared/docs/tokenizer-training-notes.md, section 2):
// - ids: special tokens first (duplicates skipped), then the alphabet sorted by code point, then the prefixed
//   "##c" symbols, then merged tokens in merge order (a token string formed twice keeps its first id);
// - the alphabet: every character of every word weighted by its count, plus the initial alphabet with an
//   "infinite" count; limit_alphabet drops the lowest counts first;
// - the merge queue: highest count first, ties to the smaller (left id, right id); stale entries are refreshed
//   and pushed back; a merge is applied only in the words of its queue entry, left to right and
//   non-overlapping; the merged pair's own count is not reset; every pair that gained occurrences gets a new
//   entry with the words where it was formed, so one pair can be merged twice (its last rank is kept);
// - stop when the vocabulary reaches vocab_size, the queue is empty, or the best count is below 1 or
//   min_frequency.
// The one choice HF leaves to chance is fixed here: HF numbers the "##c" symbols in the hash-map order of the
// words it met them in (random per process); lmforge numbers them by code point, or in `continuing_order` when
// given (used to replay a run of HF's and compare byte for byte). Counts are 64-bit where HF's pair counts are
// 32-bit: results differ only when a pair occurs more than 2^31 times.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lmforge::tokenizer_train {

struct BpeTrainerOptions {
  size_t vocab_size = 30000;                        // stop when the vocabulary has this many entries
  uint64_t min_frequency = 0;                       // stop when the best pair occurs fewer times
  std::vector<std::string> special_tokens;          // ids 0..k-1, in this order
  std::optional<size_t> limit_alphabet;             // keep at most this many characters (highest counts)
  std::vector<uint32_t> initial_alphabet;           // code points always in the alphabet (ByteLevel: 256)
  std::string continuing_subword_prefix;            // "" = none; WordPiece: "##"
  // With a prefix: code points whose "##c" symbols get ids first, in this order (the others follow by code
  // point). Empty: all by code point.
  std::vector<uint32_t> continuing_order;
};

// A word of the training corpus: its characters (UTF-8, already normalized and pre-tokenized; for byte-level
// BPE, the byte-to-unicode mapped form) and how often it occurs.
struct WordCount {
  std::string word;
  uint64_t count = 0;
};

struct BpeModel {
  std::vector<std::string> vocab;                   // tokens in id order
  // (left id, right id) in rank order, each pair once at the rank of its last merge (HF's merges map).
  std::vector<std::pair<uint32_t, uint32_t>> merges;
  // Every merge in the order it was made, with the pair's count then (HF's merge trace; a pair merged twice
  // appears twice).
  struct Step {
    uint32_t left, right, id;
    uint64_t count;
  };
  std::vector<Step> trace;
  size_t specials = 0;                              // vocab[0..specials) are the special tokens
  size_t alphabet = 0;                              // then this many alphabet characters
};

// Called now and then during the merges with (vocabulary size so far, target size).
using BpeProgress = std::function<void(size_t vocab, size_t target)>;

// Words in any order (the result does not depend on it); words with count 0 are ignored.
BpeModel train_bpe(const std::vector<WordCount>& words, const BpeTrainerOptions& options,
                   const BpeProgress& progress = {});

}  // namespace lmforge::tokenizer_train
