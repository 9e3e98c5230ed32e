// The HF BPE/WordPiece trainer re-statement against Hugging Face's own results: the unit test of tokenizers'
// trainer.rs, and the shared references trained with HF's algorithm on the sample corpus (byte-level BPE with
// GPT-2's settings, WordPiece with BERT's), compared byte for byte, merge trace included.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "text/gpt2_bpe.h"
#include "tokenizer_train/bpe_trainer.h"
#include "tokenizer_train/hf_files.h"
#include "tokenizer_train/word_counts.h"

namespace lmforge::tokenizer_train {
namespace {

const std::string kShared = LMFORGE_SHARED_DIR;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tokenizers/src/models/bpe/trainer.rs, test_train: min_frequency 2 gives 're', 'are', 'is'.
TEST(BpeTrainer, HuggingFaceUnitTest) {
  const std::vector<WordCount> words = {{"roses", 1}, {"are", 2}, {"red", 1},  {"voilets", 1},
                                        {"blue", 1},  {"BERT", 1}, {"is", 2},  {"big", 1},
                                        {"and", 1},   {"so", 1},   {"GPT-2", 1}};
  BpeTrainerOptions options;
  options.min_frequency = 2;
  const BpeModel model = train_bpe(words, options);
  const std::vector<std::string> expected = {"-", "2", "B", "E", "G", "P", "R", "T", "a", "b", "d", "e", "g",
                                             "i", "l", "n", "o", "r", "s", "t", "u", "v", "re", "are", "is"};
  EXPECT_EQ(model.vocab, expected);
  const std::vector<std::pair<uint32_t, uint32_t>> merges = {{17, 11}, {8, 22}, {13, 18}};
  EXPECT_EQ(model.merges, merges);
}

// "a a a" merges to "aa a" (left to right, non-overlapping), and the pair's leftover count is HF's.
TEST(BpeTrainer, OverlappingPairsMergeLeftToRight) {
  BpeTrainerOptions options;
  const BpeModel more = train_bpe({{"aaa", 5}}, options);
  const std::vector<std::string> expected = {"a", "aa", "aaa"};
  EXPECT_EQ(more.vocab, expected);
  ASSERT_EQ(more.trace.size(), 2u);
  EXPECT_EQ(more.trace[0].count, 10u);  // two (a, a) windows
  EXPECT_EQ(more.trace[1].count, 5u);
}

TEST(BpeTrainer, ContinuingPrefixOrderAndMerges) {
  BpeTrainerOptions options;
  options.continuing_subword_prefix = "##";
  options.special_tokens = {"[UNK]"};
  const BpeModel model = train_bpe({{"ab", 3}, {"ba", 1}}, options);
  // Specials, alphabet, "##c" by code point, then "a"+"##b" -> "ab" (the prefix of the right part dropped).
  const std::vector<std::string> expected = {"[UNK]", "a", "b", "##a", "##b", "ab", "ba"};
  EXPECT_EQ(model.vocab, expected);
  options.continuing_order = {'b'};
  const BpeModel replay = train_bpe({{"ab", 3}, {"ba", 1}}, options);
  EXPECT_EQ(replay.vocab[3], "##b");
  EXPECT_EQ(replay.vocab[4], "##a");
}

WordCountResult count_sample(WordSplit split, bool lowercase) {
  CorpusOptions corpus;
  corpus.inputs = {kShared + "/data/sample/sample.jsonl"};
  corpus.threads = 2;
  corpus.progress_seconds = 1e9;
  WordSplitOptions options;
  options.split = split;
  options.lowercase = lowercase;
  return count_words(corpus, options);
}

TEST(BpeTrainer, SharedGpt2ReferenceByteIdentical) {
  const std::string dir = kShared + "/data/toktrain/gpt2bpe8000_sample/";
  const WordCountResult counted = count_sample(WordSplit::kByteLevel, false);
  BpeTrainerOptions options;
  options.vocab_size = 8000;
  options.min_frequency = 2;
  options.special_tokens = {"<|endoftext|>"};
  for (int b = 0; b < 256; ++b) options.initial_alphabet.push_back(text::gpt2_byte_to_unicode(uint8_t(b)));
  const BpeModel model = train_bpe(counted.words, options);

  // The trace first: it names the first merge that differs.
  std::istringstream trace(read_file(dir + "merge_trace.tsv"));
  std::string line;
  std::getline(trace, line);  // header
  size_t i = 0;
  for (; std::getline(trace, line); ++i) {
    ASSERT_LT(i, model.trace.size());
    const BpeModel::Step& s = model.trace[i];
    const std::string mine = model.vocab[s.left] + "\t" + model.vocab[s.right] + "\t" + model.vocab[s.id] + "\t" +
                             std::to_string(s.count);
    ASSERT_EQ(mine, line) << "merge " << i;
  }
  EXPECT_EQ(i, model.trace.size());
  EXPECT_EQ(bpe_vocab_json(model), read_file(dir + "vocab.json"));
  EXPECT_EQ(bpe_merges_txt(model), read_file(dir + "merges.txt"));
  // tokenizer.json: HF's own file, except that lmforge also writes the ByteLevel decoder (so decode() gives text).
  std::string json = bpe_tokenizer_json(model, false);
  const std::string decoder =
      "  \"decoder\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n"
      "    \"trim_offsets\": true,\n    \"use_regex\": true\n  },\n";
  const size_t at = json.find(decoder);
  ASSERT_NE(at, std::string::npos);
  json.replace(at, decoder.size(), "  \"decoder\": null,\n");
  EXPECT_EQ(json, read_file(dir + "tokenizer.json"));

  // Vocabulary 32000 with the same settings: training only runs longer, so HF's 8000 are its first 8000 entries
  // and merges (the sample has enough pairs for 32000).
  options.vocab_size = 32000;
  const BpeModel big = train_bpe(counted.words, options);
  ASSERT_EQ(big.vocab.size(), 32000u);
  EXPECT_TRUE(std::equal(model.vocab.begin(), model.vocab.end(), big.vocab.begin()));
  ASSERT_GT(big.trace.size(), model.trace.size());
  for (size_t k = 0; k < model.trace.size(); ++k)
    ASSERT_TRUE(big.trace[k].left == model.trace[k].left && big.trace[k].right == model.trace[k].right &&
                big.trace[k].count == model.trace[k].count) << k;
}

TEST(BpeTrainer, SharedBertWordPieceReferenceByteIdentical) {
  const std::string dir = kShared + "/data/toktrain/bertwp8000_sample/";
  const WordCountResult counted = count_sample(WordSplit::kBert, true);
  BpeTrainerOptions options;
  options.vocab_size = 8000;
  options.special_tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  options.continuing_subword_prefix = "##";
  const BpeModel model = train_bpe(counted.words, options);
  std::istringstream trace(read_file(dir + "merge_trace.tsv"));
  std::string line;
  std::getline(trace, line);
  size_t i = 0;
  for (; std::getline(trace, line); ++i) {
    ASSERT_LT(i, model.trace.size());
    const BpeModel::Step& s = model.trace[i];
    const std::string mine = model.vocab[s.left] + "\t" + model.vocab[s.right] + "\t" + model.vocab[s.id] + "\t" +
                             std::to_string(s.count);
    ASSERT_EQ(mine, line) << "merge " << i;
  }
  EXPECT_EQ(wordpiece_vocab_txt(model), read_file(dir + "vocab.txt"));
  EXPECT_EQ(wordpiece_tokenizer_json(model, WordSplitOptions{WordSplit::kBert, true, true}), read_file(dir + "tokenizer.json"));

  // BERT's size, 30522: the reference's 8000 entries come first.
  options.vocab_size = 30522;
  const BpeModel big = train_bpe(counted.words, options);
  ASSERT_EQ(big.vocab.size(), 30522u);
  EXPECT_TRUE(std::equal(model.vocab.begin(), model.vocab.end(), big.vocab.begin()));
}

}  // namespace
}  // namespace lmforge::tokenizer_train
