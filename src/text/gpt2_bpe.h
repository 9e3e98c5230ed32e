// defines: Gpt2BpeTokenizer: GPT-2 byte-level BPE (vocab.json + merges.txt), id for id with Hugging Face
//
// Why there are two BPE implementations: this one is the fast dedicated path, the generic one is the BPE model of
// the tokenizer.json pipeline (hf_models.cpp, behind load_hf_tokenizer() in hf_tokenizer_json.h).
// - This one does GPT-2's byte-level BPE only (hand-written pre-tokenizer gpt2_pretokenizer.h, merges in a
//   compact hash table, a word cache per encoder) and is what `prep`'s hot loop runs for
//   --tokenizer-type GPT2BPETokenizer (tokenizer_factory.cpp). load_hf_tokenizer() also encodes through it when a
//   tokenizer.json is exactly GPT-2's pipeline (ByteLevel pre-tokenizer with use_regex, BPE without
//   continuing_subword_prefix / end_of_word_suffix / ignore_merges, a vocabulary this class accepts): GPT-2,
//   RoBERTa-style files. Around it that pipeline still does added tokens, the normalizer, the post-processor and
//   decode().
// - The generic BPE runs every other tokenizer.json BPE (Llama 3's Split regex + ignore_merges, Llama 2's
//   byte_fallback, "##"/"</w>" subwords, ...) with HF's options, on per-word strings between virtual stages; on
//   GPT-2's file it is about 2.5x slower in CPU time (bench/text/RESULTS.md, tokenizer.json section).
// Both must give Hugging Face's ids: tests/text/test_gpt2_bpe.cpp checks this class on the shared sample corpus and
// edge cases, and tests/text/test_hf_tokenizer_json.cpp runs the same shared gpt2.tokenizer.json (and the RoBERTa
// fixture) with HfTokenizerOptions::fast_paths on (this class) and off (the generic BPE) against HF's ids.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace lmforge::text {

struct Gpt2BpeOptions {
  // Words each encoder remembers. The cache is emptied when it reaches this many entries (or 64 bytes of words
  // and ids per entry), so a worker's memory stays bounded, at most ~100 bytes per entry (~26 MB by default),
  // however large and varied the corpus.
  size_t cache_max_entries = 1 << 18;
};

// GPT-2's byte-to-unicode table: the printable code point standing for each byte in vocab.json/merges.txt
// (printable Latin-1 bytes stand for themselves, the other 68 bytes for U+0100 upwards, e.g. ' ' -> 'Ġ').
uint32_t gpt2_byte_to_unicode(uint8_t byte);

class Gpt2BpeEncoder;

// Ids are Hugging Face's for every valid UTF-8 text (pre-tokenizer: gpt2_pretokenizer.h; letters and numbers by
// Unicode 16, as HF). "<|endoftext|>" inside a text is plain text; the EOD id is only appended by callers.
// Invalid UTF-8, which HF cannot receive, is still tokenized losslessly: each byte that does not start a
// well-formed sequence is a one-byte punctuation-like character, and the tokens' bytes are exactly the input.
// Thread safety: the tokenizer is immutable; each thread encodes through its own make_encoder().
class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // Reads GPT-2's vocab.json (encoder.json) and merges.txt (vocab.bpe; a first line "#version..." is a
  // comment). Malformed files throw Error naming the file, the line and the reason.
  Gpt2BpeTokenizer(const std::string& vocab_file, const std::string& merge_file, Gpt2BpeOptions options = {});
  // Same from file contents; the names appear in error messages.
  Gpt2BpeTokenizer(std::string_view vocab_json, std::string_view merges_txt, const std::string& vocab_name,
                   const std::string& merges_name, Gpt2BpeOptions options = {});
  ~Gpt2BpeTokenizer() override;

  std::unique_ptr<TextEncoder> make_encoder() const override;
  // Invalid ids throw Error; byte sequences that are not UTF-8 become U+FFFD (Python's errors='replace').
  std::string decode(std::span<const int32_t> ids) const override;
  size_t vocab_size() const override { return vocab_.size(); }
  std::optional<int32_t> eod_id() const override { return eod_id_; }
  std::string type_name() const override { return "GPT2BPETokenizer"; }

  // Convenience for tests and tools: ids of `text` with a fresh encoder (no EOD).
  std::vector<int32_t> encode(std::string_view text) const;
  // The raw bytes of a token; empty for ids that are not in the vocabulary.
  std::string_view token_bytes(int32_t id) const;
  // The id of a token given by its raw bytes (not vocab.json's spelling).
  std::optional<int32_t> token_id(std::string_view bytes) const;
  size_t merge_count() const { return merge_count_; }
  const Gpt2BpeOptions& options() const { return options_; }

 private:
  friend class Gpt2BpeEncoder;

  // Merge of the pair (left, right): rank (line order in merges.txt, lower merges first) and resulting id.
  struct Merge {
    uint32_t rank;  // kNoMerge when the pair has no merge
    int32_t merged;
  };
  static constexpr uint32_t kNoMerge = ~uint32_t{0};
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  void load(std::string_view vocab_json, std::string_view merges_txt, const std::string& vocab_name,
            const std::string& merges_name);
  void parse_vocab(std::string_view json, const std::string& name);
  void parse_merges(std::string_view text, const std::string& name, const std::string& vocab_name);

  // Open addressing with linear probing at load <= 1/2. Looking pairs up is most of the cost of BPE on words
  // the cache has not seen, and the cost is cache misses, so when ids and ranks fit in 16 bits (GPT-2: 50,257
  // ids, 50,000 merges) a slot is one 8-byte word (left:16 right:16 rank:16 merged:16; 1 MB for GPT-2),
  // otherwise two (key = left:32 right:32, then rank:32 merged:32).
  Merge find_merge(int32_t left, int32_t right) const {
    if (compact_) {
      const uint64_t key = (uint64_t(uint32_t(left)) << 16) | uint32_t(right);
      size_t h = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
      while (true) {
        const uint64_t e = merges_[h];
        if ((e >> 32) == key) return Merge{uint32_t(e >> 16) & 0xFFFF, int32_t(e & 0xFFFF)};
        if (e == kEmpty) return Merge{kNoMerge, -1};
        h = (h + 1) & merge_mask_;
      }
    }
    const uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
    size_t h = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
    while (true) {
      const uint64_t k = merges_[2 * h];
      if (k == key) return Merge{uint32_t(merges_[2 * h + 1] >> 32), int32_t(uint32_t(merges_[2 * h + 1]))};
      if (k == kEmpty) return Merge{kNoMerge, -1};
      h = (h + 1) & merge_mask_;
    }
  }

  Gpt2BpeOptions options_;
  std::unordered_map<std::string, int32_t> vocab_;  // raw token bytes -> id
  std::vector<uint32_t> token_offset_;              // id -> offset in token_arena_ (size max_id + 2)
  std::vector<uint8_t> token_present_;              // id -> whether the vocabulary has it
  std::string token_arena_;
  int32_t byte_id_[256] = {};
  std::optional<int32_t> eod_id_;
  std::vector<uint64_t> merges_;
  bool compact_ = false;
  size_t merge_mask_ = 0;
  int merge_shift_ = 64;
  size_t merge_count_ = 0;
};

}  // namespace lmforge::text
