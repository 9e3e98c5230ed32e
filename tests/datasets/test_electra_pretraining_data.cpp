// ElectraPretrainingData, the data source of `train electra`: from text files it gives Google's own examples of the
// sample corpus (../shared/data/electra/tfrecords_s128, example k = record k div 1000 of file k mod 1000); from a
// Megatron sentence-level dataset it gives what tests/prep/electra_builder_reference.py's builder makes of the same
// sequences; several inputs are shuffled by the seed as the script shuffles its files; bad ids are named.
#include <gtest/gtest.h>

#include <map>

#include "datasets/electra_pretraining_data.h"
#include "datasets/npy.h"
#include "prep/electra_tfrecord.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::datasets::ElectraDataOptions;
using lmforge::datasets::ElectraPretrainingData;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
namespace prep = lmforge::prep;

const std::string kReference = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                               "/tests/prep/electra_builder_reference.py";
std::string bert_vocab() { return shared_path("data/vocab/bert-base-uncased-vocab.txt"); }

// Example i of `data` as the three features of a parsed record.
std::map<std::string, std::vector<int64_t>> features_of(const ElectraPretrainingData& data, size_t i) {
  const size_t m = size_t(data.seq_length());
  std::vector<int32_t> ids(m), mask(m), segments(m);
  data.get(i, ids, mask, segments);
  return {{"input_ids", {ids.begin(), ids.end()}},
          {"input_mask", {mask.begin(), mask.end()}},
          {"segment_ids", {segments.begin(), segments.end()}}};
}

TEST(ElectraPretrainingData, TextFilesGiveGooglesExamplesOfTheSampleCorpus) {
  ElectraDataOptions options;
  options.max_seq_length = 128;
  options.random_seed = 12345;
  const ElectraPretrainingData data = ElectraPretrainingData::from_text_files(
      {shared_path("data/nvhdf5/sample_sentences.txt")}, bert_vocab(), true, options);
  ASSERT_EQ(data.size(), 11534u);
  std::vector<std::vector<std::string>> files(1000);
  for (size_t f = 0; f < 1000; ++f)
    files[f] = prep::read_tfrecord_file(shared_path("data/electra/tfrecords_s128/pretrain_data.tfrecord-" +
                                                    std::to_string(f) + "-of-1000"))
                   .records;
  for (size_t k = 0; k < data.size(); ++k) {
    ASSERT_LT(k / 1000, files[k % 1000].size()) << k;
    ASSERT_EQ(features_of(data, k), prep::parse_int64_example(files[k % 1000][k / 1000], "example " + std::to_string(k)))
        << "example " << k;
  }
}

TEST(ElectraPretrainingData, MegatronSentenceDatasetGivesTheBuildersExamples) {
  TempDir dir;
  const std::string prefix = shared_path("data/sample/sample_bert_text_sentence");
  for (const int length : {128, 512}) {
    const std::string ref = dir.file("ref" + std::to_string(length));
    const auto r = run_command(kReference + " megatron " + prefix + " " + bert_vocab() + " " + ref + " " +
                               std::to_string(length) + " 2024");
    ASSERT_EQ(r.status, 0) << r.output;
    ElectraDataOptions options;
    options.max_seq_length = length;
    options.random_seed = 2024;
    const ElectraPretrainingData data = ElectraPretrainingData::from_megatron({prefix + ".idx"}, bert_vocab(), options);
    const lmforge::datasets::NpyArray rows = lmforge::datasets::read_npy(ref + ".npy");
    ASSERT_EQ(rows.descr, "<i8");
    ASSERT_EQ(rows.shape, (std::vector<int64_t>{int64_t(data.size()), 3, length}));
    EXPECT_GT(data.size(), length == 128 ? 8000u : 2000u);
    const auto* values = reinterpret_cast<const int64_t*>(rows.data.data());
    for (size_t k = 0; k < data.size(); ++k) {
      const auto ours = features_of(data, k);
      const int64_t* row = values + k * 3 * size_t(length);
      ASSERT_EQ(ours.at("input_ids"), std::vector<int64_t>(row, row + length)) << length << " example " << k;
      ASSERT_EQ(ours.at("input_mask"), std::vector<int64_t>(row + length, row + 2 * length)) << k;
      ASSERT_EQ(ours.at("segment_ids"), std::vector<int64_t>(row + 2 * length, row + 3 * length)) << k;
    }
  }
}

TEST(ElectraPretrainingData, InputsAreShuffledByTheSeedAndBadIdsAreNamed) {
  // Two inputs: the order is random.shuffle([a, b]) = one draw of randbelow(2). Each input ends its own documents,
  // so the examples are those of each input alone, concatenated in the shuffled order.
  TempDir dir;
  lmforge::testing::write_file(dir.file("a.txt"), "alpha beta gamma\n\ndelta\n");
  lmforge::testing::write_file(dir.file("b.txt"), "one two\nthree\n");
  ElectraDataOptions options;
  options.max_seq_length = 16;
  for (const int64_t seed : {1, 2, 3, 4}) {
    options.random_seed = seed;
    const auto data = ElectraPretrainingData::from_text_files({dir.file("a.txt"), dir.file("b.txt")}, bert_vocab(),
                                                              true, options);
    ASSERT_EQ(data.size(), 3u);
    prep::PythonRandom random(seed);
    const bool swapped = random.randbelow(2) == 0;  // shuffle: i = 1 swaps x[1] with x[randbelow(2)]
    // b's example (one, two, three: 3 tokens + [CLS] + [SEP] at least) comes first when swapped.
    const auto first = features_of(data, 0).at("input_ids");
    EXPECT_EQ(first[1] == 2028 /* "one" */, swapped) << "seed " << seed;
  }
  // A dataset made with a larger vocabulary than the one given.
  try {
    lmforge::testing::write_file(dir.file("v.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n");
    ElectraPretrainingData::from_megatron({shared_path("data/sample/sample_bert_text_sentence")}, dir.file("v.txt"),
                                          options);
    ADD_FAILURE() << "ids outside the vocabulary accepted";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary's 4 entries"), std::string::npos) << e.what();
  }
}

}  // namespace
