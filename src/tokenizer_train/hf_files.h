// defines: the files Hugging Face writes for a trained tokenizer, byte for byte as tokenizers 0.23 writes them
//          (vocab.json, merges.txt, vocab.txt, tokenizer.json), and OutputFiles, which makes a set of files appear
//          under their final names only once all of them are complete
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tokenizer_train/bpe_trainer.h"
#include "tokenizer_train/word_counts.h"

namespace lmforge::tokenizer_train {

// BPE::save's vocab.json: one compact object, tokens in id order, no trailing newline.
std::string bpe_vocab_json(const BpeModel& model);
// BPE::save's merges.txt: "#version: 0.2", then "left right" per merge in rank order, each line ending in '\n'.
std::string bpe_merges_txt(const BpeModel& model);
// WordPiece::save's vocab.txt: one token per line in id order.
std::string wordpiece_vocab_txt(const BpeModel& model);

// tokenizer.json as Tokenizer::save(pretty) writes it (2-space indentation, HF's key order, no trailing newline):
// the special tokens as added tokens, then
//   byte-level BPE: normalizer null (or Lowercase), ByteLevel pre-tokenizer (add_prefix_space false, trim_offsets,
//   use_regex), no post-processor, ByteLevel decoder, BPE model (no unk, no prefix/suffix) with vocab and merges;
//   WordPiece: BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase: the trainer's), BertPreTokenizer,
//   no post-processor, WordPiece decoder ("##", cleanup), WordPiece model ("[UNK]", "##", 100 chars per word).
std::string bpe_tokenizer_json(const BpeModel& model, bool lowercase);
std::string wordpiece_tokenizer_json(const BpeModel& model, const WordSplitOptions& split);

// Files of one output directory, written under hidden temporary names (.<name>.tmp-<pid>) and renamed into place
// by commit() after all are written and synced; destroyed without commit(), it removes its temporaries. So a
// failed or killed run never leaves a file under a final name that does not belong with the others; the
// temporaries a killed run left (their process gone) are removed when the directory is next used.
class OutputFiles {
 public:
  explicit OutputFiles(std::string dir);  // creates dir (and parents) if missing; Error naming it otherwise
  ~OutputFiles();
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  // Takes a file another library wrote (libsentencepiece) at `temporary_path` in the directory: renamed to
  // `name` by commit(), removed otherwise.
  void adopt(const std::string& name, const std::string& temporary_path);
  // A hidden temporary path in the directory for `stem` (not registered).
  std::string temporary_path(const std::string& stem) const;
  void write(const std::string& name, const std::string& content);
  // Renames every file into place; returns the final paths.
  std::vector<std::string> commit();

 private:
  std::string dir_;
  std::vector<std::pair<std::string, std::string>> files_;  // final name, temporary path
  bool committed_ = false;
};

}  // namespace lmforge::tokenizer_train
