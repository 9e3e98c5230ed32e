// defines: tests of the GPT split/epoch/index construction and of blending against a numpy transcription of Megatron
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstring>

#include "reference.h"
#include "datasets/blending.h"
#include "datasets/gpt_indices.h"
#include "util/error.h"

using namespace lmforge::datasets;
using namespace lmforge::datasets::testing;

namespace {

TEST(Split, ParsesAnySeparatorPadsAndNormalises) {
  auto w = parse_split("949,50,1");
  EXPECT_EQ(w[0], 949.0 / 1000.0);
  EXPECT_EQ(w[1], 50.0 / 1000.0);
  EXPECT_EQ(w[2], 1.0 / 1000.0);
  EXPECT_EQ(parse_split("949/50/1"), w);
  EXPECT_EQ(parse_split("969, 30, 1")[1], 30.0 / 1000.0);
  auto one = parse_split("1");
  EXPECT_EQ(one[0], 1.0);
  EXPECT_EQ(one[1], 0.0);
  EXPECT_EQ(one[2], 0.0);
  EXPECT_EQ(parse_split("0.8 .2")[1], 0.2 / (0.8 + 0.2));
  EXPECT_THROW(parse_split("1,2,3,4"), lmforge::Error);
  EXPECT_THROW(parse_split("1.2.3"), lmforge::Error);
  EXPECT_THROW(parse_split("0,0,0"), lmforge::Error);
  EXPECT_THROW(parse_split("abc"), lmforge::Error);
}

TEST(Split, PythonRoundIsHalfToEven) {
  EXPECT_EQ(python_round(0.5), 0);
  EXPECT_EQ(python_round(1.5), 2);
  EXPECT_EQ(python_round(2.5), 2);
  EXPECT_EQ(python_round(2.5000001), 3);
  EXPECT_EQ(python_round(-0.5), 0);
}

TEST(Split, ShiftRuleMatchesTheTableInTheNotes) {
  // megatron-data-format.md §6.1, checked there against Megatron's own functions.
  const auto w = parse_split("949,50,1");
  EXPECT_EQ(split_bounds(w, 10), (std::array<int64_t, 4>{0, 10, 10, 10}));
  EXPECT_EQ(split_bounds(w, 1000), (std::array<int64_t, 4>{0, 949, 999, 1000}));
  EXPECT_EQ(split_bounds(w, 6046), (std::array<int64_t, 4>{0, 5738, 6040, 6046}));
  EXPECT_EQ(split_bounds(w, 98536), (std::array<int64_t, 4>{0, 93510, 98437, 98536}));
  EXPECT_EQ(split_bounds(w, 501633), (std::array<int64_t, 4>{0, 476049, 501131, 501633}));
}

TEST(Split, SamplesPerSplitFollowTheTrainer) {
  // train_iters 1000, gbs 8, eval every 100 for 10 iters: valid = 10·8·(1000/100 + 1).
  EXPECT_EQ(samples_per_split(1000, 8, 10, 100), (std::array<int64_t, 3>{8000, 880, 80}));
  EXPECT_EQ(samples_per_split(5, 4, 0, 100), (std::array<int64_t, 3>{20, 0, 0}));
  EXPECT_THROW(samples_per_split(5, 4, 1, 0), lmforge::Error);
}

TEST(Epochs, SmallestEpochCountAndSeparation) {
  // T = 100, L = 10: one epoch gives (100−1)/10 = 9 samples.
  EXPECT_EQ(num_epochs(100, 10, 9), 1);
  EXPECT_EQ(num_epochs(100, 10, 10), 2);  // (200−1)/10 = 19
  EXPECT_EQ(num_epochs(100, 10, 19), 2);
  EXPECT_EQ(num_epochs(100, 10, 20), 3);
  // E = 2: before = 9, per_epoch = 9, threshold int(0.8·9) = 7: from_last 1..6 separates, 7+ does not.
  EXPECT_TRUE(plan_epochs(100, 10, 15).separate_final_epoch);
  EXPECT_FALSE(plan_epochs(100, 10, 16).separate_final_epoch);
  EXPECT_EQ(plan_epochs(100, 10, 15).samples_before_final_epoch, 9);
  EXPECT_EQ(plan_epochs(100, 10, 15).total_samples, 19);
  EXPECT_THROW(num_epochs(1, 10, 5), lmforge::Error);
}

TEST(Blending, ParseDataPath) {
  auto b = parse_data_path({"0.3", "a", "0.7", " b "});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].prefix, "a");
  EXPECT_EQ(b[1].prefix, "b");
  EXPECT_EQ(b[0].weight, 0.3 / (0.3 + 0.7));
  auto single = parse_data_path({"/x/y_text_document"});
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].weight, 1.0);
  EXPECT_THROW(parse_data_path({"0.3", "a", "0.7"}), lmforge::Error);
  EXPECT_THROW(parse_data_path({"x", "a", "0.7", "b"}), lmforge::Error);
  EXPECT_THROW(parse_data_path({"0", "a", "0", "b"}), lmforge::Error);
  EXPECT_THROW(parse_data_path({}), lmforge::Error);
}

TEST(Blending, NumpySumIsPairwise) {
  // numpy.sum(numpy.full(200, 0.1)) is 20.0 exactly (pairwise), while a left-to-right sum gives 20.000000000000014.
  std::vector<double> v(200, 0.1);
  double seq = 0;
  for (double x : v) seq += x;
  EXPECT_EQ(numpy_sum(v), 20.0);
  EXPECT_NE(seq, 20.0);
}

// ---- comparisons with the numpy transcription ----

struct Case {
  std::string name;
  std::string json;
};

class ReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = temp_dir("gpt");
    const std::string prefix = shared_prefix("sample_gpt2_text_document");
    std::string cases = "[";
    auto add = [&](const std::string& body) {
      if (cases.size() > 1) cases += ",";
      cases += body;
    };
    // Shared sample: 9887 sequences; train [0, 9383) holds 812267 tokens = 793 samples of 1024 per epoch, so 1100
    // samples take 2 epochs with 307 from the last (< int(0.8·793) = 634: separated) and 1493 take 700 (not separated).
    add(R"({"name":"one_epoch","prefix":")" + prefix + R"(","split":"949,50,1","index_split":0,"num_samples":500,"seq_length":1024,"seed":1234})");
    add(R"({"name":"separated","prefix":")" + prefix + R"(","split":"949,50,1","index_split":0,"num_samples":1100,"seq_length":1024,"seed":1234})");
    add(R"({"name":"not_separated","prefix":")" + prefix + R"(","split":"949,50,1","index_split":0,"num_samples":1493,"seq_length":1024,"seed":1234})");
    add(R"({"name":"valid_many_epochs","prefix":")" + prefix + R"(","split":"949,50,1","index_split":1,"num_samples":10000,"seq_length":128,"seed":99})");
    add(R"({"name":"test_split","prefix":")" + prefix + R"(","split":"98 1 1","index_split":2,"num_samples":700,"seq_length":64,"seed":7})");
    // Synthetic: many zero-length and short documents, L larger than most documents.
    add(R"({"name":"synthetic_zeros","sizes_seed":3,"size_low":0,"size_high":12,"n_docs":300,"split":"80,20","index_split":0,"num_samples":1000,"seq_length":16,"seed":5})");
    add(R"({"name":"synthetic_sep","sizes_seed":4,"size_low":0,"size_high":40,"n_docs":500,"split":"1","index_split":0,"num_samples":1393,"seq_length":8,"seed":11})");
    add(R"({"name":"synthetic_valid","sizes_seed":5,"size_low":1,"size_high":3,"n_docs":1000,"split":"5,3,2","index_split":1,"num_samples":2000,"seq_length":2,"seed":0})");
    // Blends.
    add(R"({"name":"blend2","kind":"blend","blend":["0.3","a","0.7","b"],"per_split":[1000,60,20],"split_index":0})");
    add(R"({"name":"blend3","kind":"blend","blend":["1","a","1","b","1","c"],"per_split":[333,77,5],"split_index":1})");
    // Ten weights whose numpy (pairwise) sum 3.8499999999999996 differs from Python's sum() 3.85.
    add(R"({"name":"blend10","kind":"blend","blend":["0.3","a","0.1","b","0.7","c","0.2","d","0.9","e","0.4","f","0.11","g","0.6","h","0.33","i","0.21","j"],"per_split":[5000,100,10],"split_index":0})");
    cases += "]";
    write_text(dir_ + "/cases.json", cases);
    run_python(reference_script() + " " + dir_ + "/cases.json " + dir_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static simdjson::dom::element meta(const std::string& name) {
    static simdjson::dom::parser parser;  // the returned element lives until the next parse
    return parser.load(dir_ + "/" + name + ".meta.json");
  }

  static std::vector<int32_t> sample_sizes() {
    // The shared .idx sizes, read here without the data module: int32 lengths at offset 34.
    const std::string idx = read_text(shared_prefix("sample_gpt2_text_document") + ".idx");
    EXPECT_GT(idx.size(), 34u) << "shared sample dataset missing";
    uint64_t s = 0;
    std::memcpy(&s, idx.data() + 18, 8);
    std::vector<int32_t> sizes(s);
    std::memcpy(sizes.data(), idx.data() + 34, s * 4);
    return sizes;
  }

  void check_gpt(const std::string& name, const std::vector<int32_t>& sizes, const std::string& split, int index_split,
                 int64_t n, int32_t L, uint32_t seed) {
    SCOPED_TRACE(name);
    auto m = meta(name);
    const auto bounds = split_bounds(parse_split(split), int64_t(sizes.size()));
    simdjson::dom::array rb = m["bounds"];
    size_t k = 0;
    for (auto v : rb) EXPECT_EQ(int64_t(v), bounds[k++]);
    const GptIndices g = build_gpt_indices(sizes, bounds[size_t(index_split)], bounds[size_t(index_split) + 1], n, L, seed);
    EXPECT_EQ(g.plan.epochs, int64_t(m["epochs"]));
    EXPECT_EQ(g.plan.separate_final_epoch, bool(m["separate"]));
    EXPECT_EQ(g.tokens_per_epoch, int64_t(m["tokens_per_epoch"]));
    EXPECT_EQ(std::string(std::string_view(m["shuffle_dtype"])), g.shuffle_is_int64 ? "int64" : "uint32");
    EXPECT_EQ(g.document_index, read_raw<int32_t>(dir_ + "/" + name + ".document.bin"));
    EXPECT_EQ(g.sample_index, read_raw<int32_t>(dir_ + "/" + name + ".sample.bin"));
    const auto sh = read_raw<uint32_t>(dir_ + "/" + name + ".shuffle.bin");
    EXPECT_EQ(g.shuffle_index, std::vector<int64_t>(sh.begin(), sh.end()));
    EXPECT_GE(g.num_samples(), n);
    // Every sample is L+1 tokens.
    std::vector<SamplePiece> pieces;
    for (int64_t i = 0; i < g.num_samples(); ++i) {
      sample_pieces(sizes, g.document_index, g.sample_index, g.shuffle_index, i, pieces);
      int64_t total = 0;
      for (auto& p : pieces) {
        ASSERT_GE(p.offset, 0);
        ASSERT_LE(p.offset + p.count, sizes[size_t(p.sequence)]);
        total += p.count;
      }
      ASSERT_EQ(total, L + 1) << "sample " << i;
    }
  }

  void check_blend(const std::string& name, const std::vector<std::string>& args, std::array<int64_t, 3> per_split,
                   int split_index) {
    SCOPED_TRACE(name);
    auto m = meta(name);
    const auto entries = parse_data_path(args);
    std::vector<double> w;
    for (auto& e : entries) w.push_back(e.weight);
    simdjson::dom::array wh = m["weights_hex"];
    size_t k = 0;
    for (auto v : wh) {
      EXPECT_EQ(std::strtod(std::string(std::string_view(v)).c_str(), nullptr), w[k]) << "weight " << k;
      ++k;
    }
    const auto sizes = blend_sizes(w, per_split);
    simdjson::dom::array rs = m["sizes"];
    k = 0;
    int64_t size = 0;
    for (auto row : rs) {
      size_t s = 0;
      for (auto v : simdjson::dom::array(row)) EXPECT_EQ(int64_t(v), sizes[k][s++]) << "dataset " << k;
      size += sizes[k][size_t(split_index)];
      ++k;
    }
    EXPECT_EQ(size, int64_t(m["size"]));
    std::vector<int16_t> di;
    std::vector<int64_t> dsi;
    build_blending_indices(normalize_weights(w), size, di, dsi);
    EXPECT_EQ(di, read_raw<int16_t>(dir_ + "/" + name + ".dataset_index.bin"));
    EXPECT_EQ(dsi, read_raw<int64_t>(dir_ + "/" + name + ".dataset_sample_index.bin"));
  }

  static std::string dir_;
};
std::string ReferenceTest::dir_;

TEST_F(ReferenceTest, SharedSampleOneEpoch) { check_gpt("one_epoch", sample_sizes(), "949,50,1", 0, 500, 1024, 1234); }
TEST_F(ReferenceTest, SharedSampleSeparatedFinalEpoch) {
  auto m = meta("separated");
  EXPECT_TRUE(bool(m["separate"]));
  EXPECT_EQ(int64_t(m["epochs"]), 2);
  check_gpt("separated", sample_sizes(), "949,50,1", 0, 1100, 1024, 1234);
}
TEST_F(ReferenceTest, SharedSampleTwoEpochsNotSeparated) {
  auto m = meta("not_separated");
  EXPECT_FALSE(bool(m["separate"]));
  EXPECT_EQ(int64_t(m["epochs"]), 2);
  check_gpt("not_separated", sample_sizes(), "949,50,1", 0, 1493, 1024, 1234);
}
TEST_F(ReferenceTest, SharedSampleValidManyEpochs) {
  EXPECT_GT(int64_t(meta("valid_many_epochs")["epochs"]), 2);
  check_gpt("valid_many_epochs", sample_sizes(), "949,50,1", 1, 10000, 128, 99);
}
TEST_F(ReferenceTest, SharedSampleTestSplit) { check_gpt("test_split", sample_sizes(), "98 1 1", 2, 700, 64, 7); }
TEST_F(ReferenceTest, SyntheticZeroLengthDocuments) {
  check_gpt("synthetic_zeros", read_raw<int32_t>(dir_ + "/synthetic_zeros.sizes.bin"), "80,20", 0, 1000, 16, 5);
}
TEST_F(ReferenceTest, SyntheticSeparated) {
  EXPECT_TRUE(bool(meta("synthetic_sep")["separate"]));
  check_gpt("synthetic_sep", read_raw<int32_t>(dir_ + "/synthetic_sep.sizes.bin"), "1", 0, 1393, 8, 11);
}
TEST_F(ReferenceTest, SyntheticTinyDocumentsManyEpochs) {
  check_gpt("synthetic_valid", read_raw<int32_t>(dir_ + "/synthetic_valid.sizes.bin"), "5,3,2", 1, 2000, 2, 0);
}
TEST_F(ReferenceTest, BlendTwoDatasets) { check_blend("blend2", {"0.3", "a", "0.7", "b"}, {1000, 60, 20}, 0); }
TEST_F(ReferenceTest, BlendEqualWeightsTiesGoToFirst) {
  check_blend("blend3", {"1", "a", "1", "b", "1", "c"}, {333, 77, 5}, 1);
}
TEST_F(ReferenceTest, BlendTenDatasetsPairwiseSum) {
  check_blend("blend10",
              {"0.3", "a", "0.1", "b", "0.7", "c", "0.2", "d", "0.9", "e", "0.4", "f", "0.11", "g", "0.6", "h", "0.33", "i",
               "0.21", "j"},
              {5000, 100, 10}, 0);
}

}  // namespace
