// lmforge's trainers against files Hugging Face's own Rust trainer wrote (npm `tokenizers` 0.23.2, its default
// trainers: vocab 30000, min frequency 0, no specials, no initial alphabet), committed under data/hf_edge/ so that
// every build checks them without node: HF trained on the shared edge cases (each text + "\n", a text file), and
// lmforge reads the same texts from the JSON lines. Remake them with
//   node tests/tokenizer_train/hf_train.js train ByteLevelBPE|WordPiece edge.txt OUT
// and the WordPiece normalizer switches with WordPiece:stripAccents=false,handleChineseChars=false and
// WordPiece:lowercase=false,cleanText=false as the model argument (npm tokenizers 0.23.2).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "hf_order.h"
#include "tokenizer_train/bpe_trainer.h"
#include "tokenizer_train/hf_files.h"
#include "tokenizer_train/word_counts.h"

namespace lmforge::tokenizer_train {
namespace {

const std::string kData = std::string(LMFORGE_SOURCE_DIR) + "/tests/tokenizer_train/data/hf_edge/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

WordCountResult count_edge_cases(WordSplit split, const std::string& file) {
  CorpusOptions corpus;
  corpus.inputs = {file};
  corpus.threads = 2;
  corpus.progress_seconds = 1e9;
  WordSplitOptions options;
  options.split = split;
  options.lowercase = split == WordSplit::kBert;
  return count_words(corpus, options);
}

TEST(HfReferences, ByteLevelBpeDefaultsOnEdgeCases) {
  const std::string edge = std::string(LMFORGE_SHARED_DIR) + "/data/edge/edge_cases.jsonl";
  const BpeModel model = train_bpe(count_edge_cases(WordSplit::kByteLevel, edge).words, BpeTrainerOptions{});
  EXPECT_LT(model.vocab.size(), 30000u);  // the corpus runs out of pairs first: the stop rule is checked too
  EXPECT_EQ(bpe_vocab_json(model), read_file(kData + "bpe_vocab.json"));
  EXPECT_EQ(bpe_merges_txt(model), read_file(kData + "bpe_merges.txt"));
}

// WordPiece on the edge cases with the BertNormalizer as `split` sets it, against HF's vocab.txt `reference` made
// with the same switches: same specials and alphabet, same "##c" set, and HF's algorithm replayed with HF's own
// "##c" order gives HF's file byte for byte.
void expect_wordpiece_replays_hf(const WordSplitOptions& split, const std::string& reference) {
  const std::string hf_vocab = read_file(kData + reference);
  std::vector<std::string> hf_tokens;
  std::istringstream in(hf_vocab);
  for (std::string t; std::getline(in, t);) hf_tokens.push_back(t);
  CorpusOptions corpus;
  corpus.inputs = {std::string(LMFORGE_SHARED_DIR) + "/data/edge/edge_cases.jsonl"};
  corpus.threads = 2;
  corpus.progress_seconds = 1e9;
  const WordCountResult counted = count_words(corpus, split);
  BpeTrainerOptions options;
  options.continuing_subword_prefix = "##";
  const BpeModel ours = train_bpe(counted.words, options);  // code-point order
  const size_t alphabet = ours.specials + ours.alphabet;
  options.continuing_order = hf_continuing_order(hf_tokens, alphabet);
  ASSERT_FALSE(options.continuing_order.empty()) << reference;
  ASSERT_GE(ours.vocab.size(), alphabet + options.continuing_order.size()) << reference;
  std::vector<std::string> a(ours.vocab.begin(), ours.vocab.begin() + long(alphabet + options.continuing_order.size()));
  std::vector<std::string> b(hf_tokens.begin(), hf_tokens.begin() + long(a.size()));
  std::sort(a.begin() + long(alphabet), a.end());
  std::sort(b.begin() + long(alphabet), b.end());
  EXPECT_TRUE(a == b) << reference << ": specials, alphabet or the ##c set differ";
  const BpeModel replay = train_bpe(counted.words, options);
  if (wordpiece_vocab_txt(replay) != hf_vocab) {
    std::ofstream(::testing::TempDir() + "wp_mine.txt") << wordpiece_vocab_txt(replay);
    ADD_FAILURE() << "differs from HF's " << reference << ": see " << ::testing::TempDir() << "wp_mine.txt";
  }
}

// HF's defaults (lower-case, accents stripped, Chinese characters padded, text cleaned). The edge cases include
// e187, U+11938 of Unicode 13, which HF's NFD keeps whole (src/text/bert_unicode.cpp).
TEST(HfReferences, WordPieceDefaultsOnEdgeCasesReplayHfOrder) {
  WordSplitOptions split;
  split.split = WordSplit::kBert;
  split.lowercase = true;
  split.strip_accents = true;
  expect_wordpiece_replays_hf(split, "wordpiece_vocab.txt");
}

// The BertNormalizer's switches: lower-case keeping accents, without Chinese-character padding
// (WordPiece:stripAccents=false,handleChineseChars=false), and cased without clean_text
// (WordPiece:lowercase=false,cleanText=false).
TEST(HfReferences, WordPieceNormalizerSwitchesOnEdgeCasesReplayHfOrder) {
  WordSplitOptions keep_accents;
  keep_accents.split = WordSplit::kBert;
  keep_accents.lowercase = true;
  keep_accents.strip_accents = keep_accents.handle_chinese_chars = false;
  expect_wordpiece_replays_hf(keep_accents, "wordpiece_keep_accents_no_chinese_vocab.txt");
  WordSplitOptions raw;
  raw.split = WordSplit::kBert;
  raw.lowercase = raw.clean_text = false;
  raw.strip_accents = false;
  expect_wordpiece_replays_hf(raw, "wordpiece_cased_no_clean_text_vocab.txt");
}

}  // namespace
}  // namespace lmforge::tokenizer_train
