// defines: make_bert_wordpiece_tokenizer(): BERT's basic tokenizer + greedy WordPiece, Megatron or HF flavour
//
// One implementation, two reference behaviours (WordPieceFlavor):
// - kMegatron: Google's original BERT tokenization.py as Megatron vendors it (--tokenizer-type
//   BertWordPieceLowerCase / BertWordPieceCase); output byte-identical to Megatron's preprocess_data.py.
// - kHuggingFace: Hugging Face tokenizers' BertNormalizer + BertPreTokenizer + WordPiece; ids equal to HF's.
// Both: clean text (delete NUL, U+FFFD, Cc/Cf controls except \t\n\r; whitespace -> space), pad CJK ideographs,
// uncased: lower-case and strip accents (NFD, drop Mn), split on whitespace and punctuation (ASCII non-alnum
// printables and P*), then greedy longest-match-first WordPiece with "##" continuations; a word that is too long
// or cannot be covered becomes a single [UNK]. The differences implemented:
//   | behaviour                     | kMegatron (Google)                 | kHuggingFace                        |
//   | longest word (code points)    | 200                                | 100                                 |
//   | Σ (U+03A3) when lower-casing  | ς at the end of a word (Python's   | always σ (char::to_lowercase)       |
//   |                               | str.lower() Final_Sigma context)   |                                     |
//   | private-use characters (Co)   | kept (each word -> [UNK])          | deleted by clean text               |
//   | category tables (P*, Mn, Cf)  | Python 3.11 unicodedata: Unicode 14| unicode_categories crate: Unicode 8 |
//   | lower-case table              | Unicode 14 (= utf8proc's 15 here)  | Rust std, Unicode 16                |
//   | CJK Extension E padded from   | U+2B820                            | U+2B920                             |
//   | order (uncased)               | lower-case, then strip accents     | strip accents, then lower-case      |
//   | vocab_size()                  | vocab + [BOS] + [EOS] (Megatron    | vocab entries                       |
//   |                               | adds them; decides the dtype)      |                                     |
// The category tables are utf8proc's (Unicode 15) plus generated exception lists (bert_unicode_tables.cpp, made by
// scripts/gen_bert_unicode_tables.py) and six hand-listed HF category changes since Unicode 8 (bert_unicode.cpp);
// every code point is checked against Google's code and HF in tests/text (EveryCodePointMatchesTheReferences).
// Not reproduced (documented limits): NFD is applied per code point, so canonical reordering of two adjacent
// non-Mn combining marks (Mc/Me with nonzero combining class) across characters is skipped; HF's NFD and
// lower-case tables beyond Unicode 16 and utf8proc's 15 (only characters that no BERT vocabulary contains).
// Invalid UTF-8 (not expected: callers repair text first) is read as U+FFFD, which clean text deletes.
// decode() is BERT's convert_tokens_to_string for both flavours: " ".join(tokens).replace(" ##", "").strip().
//
// Why there are two WordPiece implementations: this one is the fast dedicated path, the generic one is the
// WordPiece model of the tokenizer.json pipeline (hf_models.cpp, behind load_hf_tokenizer() in hf_tokenizer_json.h).
// - This one is BERT's whole pipeline in one pass per character (bert_unicode.h), with a piece trie and a hash
//   probe for whole-word pieces, and is what `prep`'s hot loop runs for --tokenizer-type BertWordPieceLowerCase /
//   BertWordPieceCase (kMegatron, tokenizer_factory.cpp); Megatron's flavour exists only here. load_hf_tokenizer()
//   also encodes through it (kHuggingFace) when a tokenizer.json is exactly BERT's pipeline (BertNormalizer +
//   BertPreTokenizer + WordPiece with "##", dense ids, no normalized added tokens).
// - The generic WordPiece runs every other tokenizer.json WordPiece (other normalizers or pre-tokenizers, another
//   continuing_subword_prefix) after the generic normalizer and pre-tokenizer stages; on BERT's file that path is
//   about 4.5x slower in CPU time (bench/text/RESULTS.md, tokenizer.json section).
// Both must give Hugging Face's ids: tests/text/test_bert_wordpiece.cpp checks kHuggingFace on the shared sample
// corpus and edge cases (and kMegatron against Megatron's own dataset), and tests/text/test_hf_tokenizer_json.cpp
// runs the same shared bert.tokenizer.json with HfTokenizerOptions::fast_paths on (this implementation) and off
// (the generic WordPiece) against HF's ids.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace lmforge::text {

// kNvidia: NVIDIA DeepLearningExamples' tokenization.py, the tokenizer of its create_pretraining_data.py: Google's
// rules (kMegatron) except that clean text deletes every C* character (also Co private use and Cn unassigned), a
// word longer than 100 characters is [UNK] (Google: 200), a whitespace-delimited word that is exactly [UNK], [SEP],
// [PAD], [CLS] or [MASK] is kept whole and un-lowered (its never_split list), and no [BOS]/[EOS] are added.
enum class WordPieceFlavor { kMegatron, kHuggingFace, kNvidia };

struct WordPieceOptions {
  WordPieceFlavor flavor = WordPieceFlavor::kMegatron;
  bool lower_case = true;                // uncased: lower-case (and strip accents, unless strip_accents says)
  std::optional<bool> strip_accents;     // HF's BertNormalizer strip_accents; unset: same as lower_case.
                                         // kMegatron: must equal lower_case (Google's code ties them)
  size_t max_input_chars_per_word = 0;   // 0: the flavour's default (Megatron 200, HF 100)
  // Keep a whitespace-delimited [UNK], [SEP], [PAD], [CLS] or [MASK] whole (NVIDIA's never_split list). Unset: on for
  // kNvidia only. kNvidia with false and 200-character words is ELECTRA's tokenization.py (prep/electra_examples.h).
  std::optional<bool> never_split;
  std::string unk_token = "[UNK]";
  // kMegatron: Megatron's --vocab-extra-ids N (T5): after [BOS] and [EOS], <extra_id_0> .. <extra_id_{N-1}> are
  // added to the vocabulary the same way (id = the vocabulary's size at the time, unless the token exists). Like
  // Megatron's, the encoder does not produce them from text: they enter data only through the T5 dataset's spans.
  int vocab_extra_ids = 0;
};

// vocab.txt: one token per line, id = line number (0-based). Megatron strips each line (Python str.strip()),
// HF trims its end; a repeated token keeps its last line's id, as both do. Unreadable file, invalid UTF-8 or no
// unk token: Error naming the file (and line).
// The lines of a vocab.txt as the flavour reads them (kMegatron and kNvidia strip both ends, kHuggingFace the end).
std::vector<std::string> read_wordpiece_vocab(const std::string& vocab_file, WordPieceFlavor flavor);
std::unique_ptr<Tokenizer> make_bert_wordpiece_tokenizer(const std::string& vocab_file, bool lower_case,
                                                         WordPieceFlavor flavor, int vocab_extra_ids = 0);
std::unique_ptr<Tokenizer> make_bert_wordpiece_tokenizer(const std::string& vocab_file,
                                                         const WordPieceOptions& options);
// Vocabulary already in memory (e.g. the "vocab" of a tokenizer.json): tokens[id]. `origin` names it in errors.
std::unique_ptr<Tokenizer> make_bert_wordpiece_tokenizer(std::vector<std::string> tokens,
                                                         const WordPieceOptions& options,
                                                         const std::string& origin = "vocabulary");

}  // namespace lmforge::text
