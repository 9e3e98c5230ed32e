// defines: tests of the NVIDIA BERT HDF5 shard reader against shards written by h5py as NVIDIA's
//   create_pretraining_data.py writes them and the fields/order computed independently in make_bert_hdf5.py
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "datasets/hdf5_bert_shards.h"
#include "test_util.h"
#include "util/error.h"

using namespace lmforge;
using namespace lmforge::datasets;
namespace fs = std::filesystem;

namespace {

// The fixtures of make_bert_hdf5.py in a fresh temporary directory.
class Fixtures {
 public:
  Fixtures() {
    const std::string cmd = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                            "/tests/datasets/make_bert_hdf5.py " + dir_.file("shards");
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("fixture script failed: " + cmd);
  }
  std::string path(const std::string& relative) const { return dir_.file("shards/" + relative); }
  std::vector<std::string> lines(const std::string& name) const {
    std::ifstream in(path(name));
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(line);
    return out;
  }

 private:
  lmforge::testing::TempDir dir_;
};

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::vector<int32_t> numbers(const std::vector<std::string>& words) {
  std::vector<int32_t> v;
  for (size_t i = 1; i < words.size(); ++i) v.push_back(std::stoi(words[i]));
  return v;
}

// expected.txt: (file name, row) → the example NVIDIA's loader derives.
std::map<std::pair<std::string, int64_t>, BertExample> expected_examples(const Fixtures& fx) {
  std::map<std::pair<std::string, int64_t>, BertExample> out;
  const std::vector<std::string> lines = fx.lines("expected.txt");
  for (size_t i = 0; i < lines.size(); i += 6) {
    const std::vector<std::string> head = split_words(lines[i]);
    BertExample e;
    e.is_random = std::stoi(head[3]);
    e.text = numbers(split_words(lines[i + 1]));
    e.types = numbers(split_words(lines[i + 2]));
    e.labels = numbers(split_words(lines[i + 3]));
    e.loss_mask = numbers(split_words(lines[i + 4]));
    e.padding_mask = numbers(split_words(lines[i + 5]));
    out[{head[1], std::stoll(head[2])}] = e;
  }
  return out;
}

void expect_same(const BertExample& got, const BertExample& want, const std::string& what) {
  EXPECT_EQ(got.text, want.text) << what;
  EXPECT_EQ(got.types, want.types) << what;
  EXPECT_EQ(got.labels, want.labels) << what;
  EXPECT_EQ(got.loss_mask, want.loss_mask) << what;
  EXPECT_EQ(got.padding_mask, want.padding_mask) << what;
  EXPECT_EQ(got.is_random, want.is_random) << what;
  EXPECT_EQ(got.truncated, 0) << what;
}

std::string name_of(const std::string& path) { return fs::path(path).filename().string(); }

TEST(Hdf5BertShards, EveryFieldOfEveryRowMatchesNvidiasLoader) {
  Fixtures fx;
  const auto expected = expected_examples(fx);
  ASSERT_EQ(expected.size(), 7u + 1 + 13 + 9 + 4);
  int64_t rows = 0, labelled = 0;
  for (const char* name : {"wiki_training_0.hdf5", "wiki_training_1.hdf5", "wiki_training_2.hdf5",
                                  "books_training_3.hdf5", "wiki_training_4.hdf5", "wiki_test_0.hdf5"}) {
    const Hdf5BertShard shard = read_hdf5_bert_shard(fx.path("good/" + std::string(name)));
    EXPECT_EQ(shard.seq_length, 24);
    EXPECT_EQ(shard.max_predictions, 5);
    for (int64_t r = 0; r < shard.rows; ++r) {
      BertExample got;
      hdf5_bert_example(shard, r, got);
      expect_same(got, expected.at({name, r}), std::string(name) + " row " + std::to_string(r));
      for (int32_t m : got.loss_mask) labelled += m;
      ++rows;
    }
  }
  EXPECT_EQ(rows, int64_t(expected.size()));
  EXPECT_GT(labelled, 50);  // the fixtures do mask tokens (rows with none, some and all P slots)
}

TEST(Hdf5BertShards, NarrowerIntegerTypesAreWidened) {
  Fixtures fx;
  const Hdf5BertShard nvidia = read_hdf5_bert_shard(fx.path("good/wiki_training_0.hdf5"));
  const Hdf5BertShard narrow = read_hdf5_bert_shard(fx.path("narrow/wiki_training_0.hdf5"));
  EXPECT_EQ(narrow.input_ids, nvidia.input_ids);
  EXPECT_EQ(narrow.input_mask, nvidia.input_mask);
  EXPECT_EQ(narrow.masked_lm_positions, nvidia.masked_lm_positions);
  EXPECT_EQ(narrow.masked_lm_ids, nvidia.masked_lm_ids);
  EXPECT_EQ(narrow.rows, 7);
}

// input_mask as int32 (and the other 0/1 datasets as uint8 / int64), which NVIDIA's loader reads: the same values.
TEST(Hdf5BertShards, WiderZeroOneDatasetsAreRead) {
  Fixtures fx;
  const Hdf5BertShard nvidia = read_hdf5_bert_shard(fx.path("good/wiki_training_0.hdf5"));
  const Hdf5BertShard wide = read_hdf5_bert_shard(fx.path("wide/wiki_training_0.hdf5"));
  EXPECT_EQ(wide.input_mask, nvidia.input_mask);
  EXPECT_EQ(wide.segment_ids, nvidia.segment_ids);
  EXPECT_EQ(wide.next_sentence_labels, nvidia.next_sentence_labels);
  EXPECT_EQ(wide.input_ids, nvidia.input_ids);
}

TEST(Hdf5BertShards, ListsTrainingAndValidationShardsByName) {
  Fixtures fx;
  const std::vector<std::string> train = list_hdf5_bert_shards(fx.path("good"), Hdf5Split::kTrain);
  std::vector<std::string> names;
  for (const std::string& f : train) names.push_back(name_of(f));
  EXPECT_EQ(names, (std::vector<std::string>{"books_training_3.hdf5", "wiki_training_0.hdf5", "wiki_training_1.hdf5",
                                             "wiki_training_2.hdf5", "wiki_training_4.hdf5"}));
  const std::vector<std::string> valid = list_hdf5_bert_shards(fx.path("good"), Hdf5Split::kValid);
  ASSERT_EQ(valid.size(), 1u);
  EXPECT_EQ(name_of(valid[0]), "wiki_test_0.hdf5");
  // A glob, and a single file.
  EXPECT_EQ(list_hdf5_bert_shards(fx.path("good/wiki_*.hdf5"), Hdf5Split::kTrain).size(), 4u);
  EXPECT_EQ(list_hdf5_bert_shards(fx.path("good/wiki_training_1.hdf5"), Hdf5Split::kTrain).size(), 1u);
  EXPECT_TRUE(list_hdf5_bert_shards(fx.path("good/wiki_training_1.hdf5"), Hdf5Split::kValid).empty());
  // No training shard, a name that says neither, nothing there.
  EXPECT_THROW(list_hdf5_bert_shards(fx.path("good/wiki_test_0.hdf5"), Hdf5Split::kTrain), Error);
  try {
    list_hdf5_bert_shards(fx.path("unnamed"), Hdf5Split::kTrain);
    ADD_FAILURE() << "a file named neither training nor test/valid/eval was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard_1.hdf5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(list_hdf5_bert_shards(fx.path("good/nothing_*.hdf5"), Hdf5Split::kTrain), Error);
  EXPECT_THROW(list_hdf5_bert_shards(fx.path("absent"), Hdf5Split::kTrain), Error);
}

// Expects `call` to throw an Error whose message holds every one of `words`.
void expect_error_words(const std::function<void()>& call, const std::vector<std::string>& words,
                        const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    for (const std::string& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << what << ": '" << w << "' missing from: " << e.what();
  }
}

// A shard whose input_ids span two of the reader's 16 MiB row blocks (2100 rows of length 2048, int32) reads back
// every row exactly (the blocks' boundaries and the short last block).
TEST(Hdf5BertShards, ShardsLargerThanOneReadBlockReadBackExactly) {
  lmforge::testing::TempDir dir;
  const std::string path = dir.file("big_training_0.hdf5");
  const std::string script =
      "import h5py, numpy as np\n"
      "n, L, P = 2100, 2048, 4\n"
      "r = np.arange(n)\n"
      "ids = np.zeros((n, L), np.int32); ids[:, 0] = 101; ids[:, 1] = 1000 + r; ids[:, 2] = 102\n"
      "mask = np.zeros((n, L), np.int8); mask[:, :3] = 1\n"
      "seg = np.zeros((n, L), np.int8); seg[r % 2 == 1, 2] = 1\n"
      "pos = np.zeros((n, P), np.int32); pos[:, 0] = 1\n"
      "mids = np.zeros((n, P), np.int32); mids[:, 0] = 5000 + r\n"
      "nsp = (r % 3 == 0).astype(np.int8)\n"
      "with h5py.File('" + path + "', 'w') as f:\n"
      "  for k, v in [('input_ids', ids), ('input_mask', mask), ('segment_ids', seg),\n"
      "               ('masked_lm_positions', pos), ('masked_lm_ids', mids), ('next_sentence_labels', nsp)]:\n"
      "    f.create_dataset(k, data=v, compression='gzip')\n";
  lmforge::testing::write_file(dir.file("make.py"), script);
  ASSERT_EQ(std::system(("/usr/bin/python3 " + dir.file("make.py")).c_str()), 0);
  const Hdf5BertShard shard = read_hdf5_bert_shard(path);
  ASSERT_EQ(shard.rows, 2100);
  ASSERT_EQ(shard.seq_length, 2048);
  BertExample ex;
  for (int64_t r = 0; r < shard.rows; ++r) {
    hdf5_bert_example(shard, r, ex);
    ASSERT_EQ(ex.text[0], 101) << r;
    ASSERT_EQ(ex.text[1], 1000 + r) << r;
    ASSERT_EQ(ex.text[2], 102) << r;
    ASSERT_EQ(ex.text[3], 0) << r;
    ASSERT_EQ(ex.padding_mask[2], 1) << r;
    ASSERT_EQ(ex.padding_mask[3], 0) << r;
    ASSERT_EQ(ex.types[2], r % 2) << r;
    ASSERT_EQ(ex.labels[1], 5000 + r) << r;
    ASSERT_EQ(ex.is_random, r % 3 == 0 ? 1 : 0) << r;
  }
}

// A shard link whose target is gone is named with its target, in a directory (alone, or beside good shards: it is
// never left out silently), through a glob and as the one file given (before: "holds no .hdf5 files", or the
// shard silently left out).
TEST(Hdf5BertShards, DanglingShardLinksAreNamed) {
  Fixtures fx;
  lmforge::testing::TempDir dir;
  const std::string only = dir.file("only"), mixed = dir.file("mixed");
  fs::create_directories(only);
  fs::create_directories(mixed);
  const std::string gone = dir.file("moved-away/wiki_training_9.hdf5");
  fs::create_symlink(gone, only + "/wiki_training_9.hdf5");
  fs::create_symlink(gone, mixed + "/wiki_training_9.hdf5");
  fs::copy_file(fx.path("good/wiki_training_1.hdf5"), mixed + "/wiki_training_1.hdf5");
  const std::vector<std::string> words = {"wiki_training_9.hdf5 -> " + gone, "does not exist"};
  expect_error_words([&] { list_hdf5_bert_shards(only, Hdf5Split::kTrain); }, words, "directory of one broken link");
  expect_error_words([&] { list_hdf5_bert_shards(mixed, Hdf5Split::kTrain); }, words, "directory with a good shard");
  expect_error_words([&] { list_hdf5_bert_shards(mixed + "/*_training_*.hdf5", Hdf5Split::kTrain); }, words, "glob");
  expect_error_words([&] { list_hdf5_bert_shards(only + "/wiki_training_9.hdf5", Hdf5Split::kTrain); }, words,
                     "the link itself");
  fs::remove(mixed + "/wiki_training_9.hdf5");
  EXPECT_EQ(list_hdf5_bert_shards(mixed, Hdf5Split::kTrain).size(), 1u);
}

// `train gpt`/`train t5` given shards (a directory of them, one .hdf5 file, a glob) say that HDF5 shards are
// `train bert` data (before: "<dir>.idx: cannot open"); a directory of Megatron datasets names the prefixes in it;
// a real prefix passes.
TEST(Hdf5BertShards, MegatronCommandsGivenShardsSayTheyAreTrainBertData) {
  Fixtures fx;
  for (const std::string& spec : {fx.path("good"), fx.path("good/wiki_training_1.hdf5"), fx.path("good/*.hdf5")})
    expect_error_words([&] { check_megatron_prefix("t5", spec); },
                       {"--data-path " + spec, "HDF5 shards", "`lmforge train bert` data", "`lmforge train t5`",
                        "PREFIX.bin and PREFIX.idx"},
                       spec);
  const std::string sample_dir = std::string(LMFORGE_SHARED_DIR) + "/data/sample";
  expect_error_words([&] { check_megatron_prefix("gpt", sample_dir); },
                     {"--data-path " + sample_dir, "a directory, not a dataset prefix", "`lmforge train gpt`",
                      sample_dir + "/sample_"},
                     "a directory of Megatron datasets");
  EXPECT_NO_THROW(check_megatron_prefix("gpt", sample_dir + "/sample_gpt2_text_document"));
  EXPECT_NO_THROW(check_megatron_prefix("gpt", "/nonexistent/prefix"));  // named later, when it is opened
}

// fairseq's --data given a Megatron prefix says that --data takes HDF5 shards and the prefix belongs in --data-path
// (before: "no such file or directory"); a path that is nothing at all is still "no such file or directory".
TEST(Hdf5BertShards, FairseqDataGivenAMegatronPrefixPointsToDataPath) {
  const std::string prefix = std::string(LMFORGE_SHARED_DIR) + "/data/sample/sample_bert_text_sentence";
  expect_error_words([&] { check_fairseq_data(prefix); },
                     {"--data " + prefix, "a Megatron dataset prefix", "HDF5 shards", "--data-path"}, "prefix");
  expect_error_words([&] { check_fairseq_data("/nonexistent-lmforge-shards"); },
                     {"--data /nonexistent-lmforge-shards: no such file or directory"}, "missing");
  Fixtures fx;
  EXPECT_NO_THROW(check_fairseq_data(fx.path("good")));
  EXPECT_NO_THROW(check_fairseq_data(fx.path("good/*_training_*.hdf5")));
}

// The stream order equals the documented algorithm as make_bert_hdf5.py re-states it, for three seeds over three
// epochs; each row appears exactly once per epoch; every sample equals NVIDIA's fields for its (file, row).
TEST(Hdf5BertShards, StreamOrderIsTheDocumentedPermutationAndCoversEachRowOncePerEpoch) {
  Fixtures fx;
  const auto expected = expected_examples(fx);
  const std::vector<std::string> files = list_hdf5_bert_shards(fx.path("good"), Hdf5Split::kTrain);
  std::map<uint64_t, std::vector<std::pair<std::string, int64_t>>> order;
  for (const std::string& line : fx.lines("order.txt")) {
    const std::vector<std::string> w = split_words(line);
    order[std::stoull(w[1])].push_back({w[3], std::stoll(w[4])});
  }
  ASSERT_EQ(order.size(), 3u);
  for (const auto& [seed, want] : order) {
    Hdf5BertShards stream(files, seed);
    ASSERT_EQ(stream.samples_per_epoch(), 30);
    ASSERT_EQ(want.size(), 90u);
    std::set<std::pair<std::string, int64_t>> seen;
    for (int64_t i = 0; i < int64_t(want.size()); ++i) {
      const Hdf5BertShards::Location at = stream.locate(i);
      const std::pair<std::string, int64_t> got{name_of(stream.shards()[size_t(at.file)].path), at.row};
      ASSERT_EQ(got, want[size_t(i)]) << "seed " << seed << " sample " << i;
      EXPECT_EQ(at.epoch, i / 30);
      if (i % 30 == 0) seen.clear();
      EXPECT_TRUE(seen.insert(got).second) << "sample " << i << " repeats a row within its epoch";
      BertExample ex;
      stream.sample(i, ex);
      expect_same(ex, expected.at(got), "seed " + std::to_string(seed) + " sample " + std::to_string(i));
    }
  }
  // Epochs differ in order, seeds differ in order.
  EXPECT_NE(std::vector(order[1234].begin(), order[1234].begin() + 30),
            std::vector(order[1234].begin() + 30, order[1234].begin() + 60));
  EXPECT_NE(order[1234], order[7]);
}

// Resuming at any sample index needs no state: a fresh stream, visited out of order, gives the same samples.
// Read in order, each non-empty shard is loaded once per epoch.
TEST(Hdf5BertShards, ResumesAtAnyIndexAndLoadsEachShardOncePerEpochInOrder) {
  Fixtures fx;
  const std::vector<std::string> files = list_hdf5_bert_shards(fx.path("good"), Hdf5Split::kTrain);
  Hdf5BertShards first(files, 99);
  std::vector<BertExample> in_order(75);
  for (int64_t i = 0; i < 75; ++i) {
    first.sample(i, in_order[size_t(i)]);
    if (i == 29) {
      EXPECT_EQ(first.shard_loads(), 4);  // 5 files, one with N = 0
    }
  }
  EXPECT_LE(first.shard_loads(), 4 + 4 + 4);
  Hdf5BertShards resumed(files, 99);
  for (int64_t i : {74, 3, 41, 40, 0, 29, 30, 59, 60, 12}) {
    BertExample ex;
    resumed.sample(i, ex);
    expect_same(ex, in_order[size_t(i)], "index " + std::to_string(i));
  }
  EXPECT_EQ(resumed.shard_order(2), first.shard_order(2));
  EXPECT_THROW(resumed.locate(-1), Error);
}

TEST(Hdf5BertShards, BrokenShardsAreErrorsNamingFileAndDataset) {
  Fixtures fx;
  const std::vector<std::string> cases = fx.lines("bad.txt");
  ASSERT_EQ(cases.size(), 15u);
  for (const std::string& line : cases) {
    const std::vector<std::string> w = split_words(line);
    const std::string& name = w[0];
    const std::string& stage = w[1];
    const std::string& path = w[2];
    std::vector<std::string> words;
    std::istringstream parts(w[3]);
    for (std::string part; std::getline(parts, part, '|');) words.push_back(part);
    if (stage == "read") {
      EXPECT_NO_THROW(probe_hdf5_bert_shard(path)) << name << ": the shape check suffices";
    }
    const auto check_message = [&](const std::function<void()>& call, const char* how) {
      try {
        call();
        ADD_FAILURE() << name << ": " << how << " accepted a broken shard";
      } catch (const Error& e) {
        for (const std::string& word : words)
          EXPECT_NE(std::string(e.what()).find(word), std::string::npos)
              << name << " (" << how << "): '" << word << "' missing from: " << e.what();
      }
    };
    if (stage == "probe") check_message([&] { probe_hdf5_bert_shard(path); }, "probe");
    check_message([&] { read_hdf5_bert_shard(path); }, "read");
    if (stage == "probe") {
      check_message([&] { Hdf5BertShards({path}, 1); }, "stream");
    } else {  // value errors surface when the stream loads the shard
      Hdf5BertShards stream({path}, 1);
      BertExample ex;
      check_message([&] { stream.sample(0, ex); }, "stream sample");
    }
  }
  // Shards of different sequence lengths cannot form one stream; no shards at all is an Error too.
  try {
    Hdf5BertShards({fx.path("mixed_len/a_training_0.hdf5"), fx.path("mixed_len/b_training_1.hdf5")}, 1);
    ADD_FAILURE() << "shards of lengths 24 and 32 were accepted together";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("b_training_1.hdf5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Hdf5BertShards({}, 1), Error);
  EXPECT_THROW(Hdf5BertShards({fx.path("good/wiki_training_2.hdf5")}, 1), Error);  // N = 0 only
  EXPECT_THROW(probe_hdf5_bert_shard(fx.path("good/absent_training.hdf5")), Error);
}

TEST(Hdf5BertShards, SplitmixPermutationIsAPermutation) {
  for (int64_t n : {0, 1, 2, 5, 1000}) {
    std::vector<int64_t> p = splitmix_permutation(n, 42);
    std::sort(p.begin(), p.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[size_t(i)], i);
  }
  EXPECT_NE(splitmix_permutation(50, 1), splitmix_permutation(50, 2));
  // splitmix64's published first output for seed 0 (state += golden gamma, then the finalizer).
  EXPECT_EQ(splitmix_mix(0x9E3779B97F4A7C15ULL), 0xE220A8397B1DCDAFULL);
}

}  // namespace
