// lmforge's trainers against files Hugging Face's own Rust trainer wrote (npm `tokenizers` 0.23.2, its default
// trainers: vocab 30000, min frequency 0, no specials, no initial alphabet), committed under data/hf_edge/ so that
// every build checks them without node: HF trained on the shared edge cases (each text + "\n", a text file; for
// WordPiece without e187, see below), and lmforge reads the same texts from the JSON lines. Remake them with
//   node tests/tokenizer_train/hf_train.js train ByteLevelBPE|WordPiece edge.txt OUT
#include <gtest/gtest.h>

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

TEST(HfReferences, WordPieceDefaultsOnEdgeCasesReplayHfOrder) {
  const std::string hf_vocab = read_file(kData + "wordpiece_vocab.txt");
  std::vector<std::string> hf_tokens;
  std::istringstream in(hf_vocab);
  for (std::string t; std::getline(in, t);) hf_tokens.push_back(t);
  // Without edge case e187: lmforge's Hugging Face BertNormalizer (src/text) decomposes U+11938 (Unicode 13) where
  // HF's older NFD tables keep it, so the alphabets differ there; an encoder difference, not the trainer's.
  const WordCountResult counted = count_edge_cases(WordSplit::kBert, kData + "edge_cases_without_e187.jsonl");
  BpeTrainerOptions options;
  options.continuing_subword_prefix = "##";
  const BpeModel ours = train_bpe(counted.words, options);  // code-point order
  const size_t alphabet = ours.specials + ours.alphabet;
  options.continuing_order = hf_continuing_order(hf_tokens, alphabet);
  ASSERT_FALSE(options.continuing_order.empty());
  // Same specials and alphabet, same "##c" set.
  ASSERT_GE(ours.vocab.size(), alphabet + options.continuing_order.size());
  std::vector<std::string> a(ours.vocab.begin(), ours.vocab.begin() + long(alphabet + options.continuing_order.size()));
  std::vector<std::string> b(hf_tokens.begin(), hf_tokens.begin() + long(a.size()));
  std::sort(a.begin() + long(alphabet), a.end());
  std::sort(b.begin() + long(alphabet), b.end());
  EXPECT_TRUE(a == b) << "specials, alphabet or the ##c set differ";
  // HF's algorithm with HF's own "##c" order: HF's file byte for byte.
  const BpeModel replay = train_bpe(counted.words, options);
  if (wordpiece_vocab_txt(replay) != hf_vocab) {
    std::ofstream(::testing::TempDir() + "wp_mine.txt") << wordpiece_vocab_txt(replay);
    ADD_FAILURE() << "differs from HF's vocab.txt: see " << ::testing::TempDir() << "wp_mine.txt";
  }
}

}  // namespace
}  // namespace lmforge::tokenizer_train
