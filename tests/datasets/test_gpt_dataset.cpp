// defines: end-to-end tests of GptSampleSource/GptDataset against the numpy transcription of Megatron: samples,
//   split sizes, blends, and cache files byte-identical to numpy.save's under Megatron's md5 names
#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <random>

#include "data/indexed_dataset.h"
#include "reference.h"
#include "datasets/gpt_dataset.h"
#include "datasets/npy.h"
#include "util/error.h"

using namespace lmforge;
using namespace lmforge::datasets;
using namespace lmforge::datasets::testing;
namespace fs = std::filesystem;

namespace {

const std::vector<int64_t> kWindows = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 17, 63, 100, 299, 512, 999, 1000, 1004, 1999, 2047};

std::string windows_json() {
  std::string s = "[";
  for (size_t i = 0; i < kWindows.size(); ++i) s += (i ? "," : "") + std::to_string(kWindows[i]);
  return s + "]";
}

std::string json_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + python_json_string(v[i]);
  return s + "]";
}

class GptDatasetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = temp_dir("dataset");
    // An lmforge-written int32 dataset (ids above 65535), with some empty documents' worth of short sequences.
    int32_prefix_ = dir_ + "/synthetic_int32_text_document";
    {
      data::IndexedDatasetWriter w(int32_prefix_, data::DType::Int32);
      std::mt19937 gen(42);
      std::vector<int32_t> ids;
      for (int d = 0; d < 400; ++d) {
        ids.resize(1 + gen() % 300);
        for (auto& t : ids) t = int32_t(gen() % 120000);
        w.add_sequence(ids);
        w.end_document();
      }
      w.finish();
    }
    // A copy of Megatron's sample, so the default cache directory (beside the data) is writable.
    copy_prefix_ = dir_ + "/copy/sample_gpt2_text_document";
    fs::create_directories(dir_ + "/copy");
    for (const char* ext : {".bin", ".idx"})
      fs::copy_file(shared_prefix("sample_gpt2_text_document") + ext, copy_prefix_ + ext);

    const std::string shared = shared_prefix("sample_gpt2_text_document");
    std::string cases = "[";
    cases += R"({"name":"single","kind":"source","data_path":)" + json_list({shared}) +
             R"(,"split":"949,50,1","seed":1234,"seq_length":128,"per_split":[2000,300,50],"windows":)" + windows_json() + "},";
    cases += R"({"name":"blend","kind":"source","data_path":)" + json_list({"0.3", shared, "0.7", int32_prefix_}) +
             R"(,"split":"90,8,2","seed":7,"seq_length":64,"per_split":[1000,100,20],"windows":)" + windows_json() + "},";
    cases += R"({"name":"weighted_single","kind":"source","data_path":)" + json_list({"2", int32_prefix_}) +
             R"(,"split":"949,50,1","seed":5,"seq_length":32,"per_split":[1000,200,0],"windows":)" + windows_json() + "},";
    cases += R"({"name":"default_cache","kind":"source","data_path":)" + json_list({copy_prefix_}) +
             R"(,"split":"98, 2","seed":3,"seq_length":1024,"per_split":[1500,30,10],"windows":)" + windows_json() + "}";
    cases += "]";
    write_text(dir_ + "/cases.json", cases);
    run_python(reference_script() + " " + dir_ + "/cases.json " + dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Builds the source, compares sizes and sample windows with the reference, and the cache files byte for byte.
  void check(const std::string& name, const std::vector<std::string>& data_path, const GptDatasetConfig& cfg,
             std::array<int64_t, 3> per_split, const std::string& cache_dir, bool expect_cached) {
    SCOPED_TRACE(name);
    simdjson::dom::parser parser;
    simdjson::dom::element meta = parser.load(dir_ + "/" + name + ".meta.json");
    GptSampleSource src(data_path, cfg, per_split);
    const std::string summary = src.summary();
    if (expect_cached) EXPECT_EQ(summary.find("written to"), std::string::npos) << summary;
    else EXPECT_EQ(summary.find("loaded from"), std::string::npos) << summary;
    int s = 0, files = 0;
    for (simdjson::dom::element entry : simdjson::dom::array(meta["splits"])) {
      const Split split = Split(s);
      ASSERT_EQ(src.has_split(split), bool(entry["built"])) << split_name(split);
      if (!src.has_split(split)) {
        EXPECT_THROW(src.sample(split, 0, tokens_), Error);
        ++s;
        continue;
      }
      ASSERT_EQ(src.size(split), int64_t(entry["size"])) << split_name(split);
      std::vector<int64_t> expected = read_raw<int64_t>(dir_ + "/" + name + ".windows" + std::to_string(s) + ".bin");
      std::vector<int64_t> got;
      for (int64_t i : kWindows) {
        if (i >= src.size(split)) continue;
        src.sample(split, i, tokens_);
        EXPECT_EQ(int64_t(tokens_.size()), cfg.seq_length + 1);
        got.insert(got.end(), tokens_.begin(), tokens_.end());
      }
      EXPECT_FALSE(expected.empty());
      EXPECT_EQ(got, expected) << split_name(split);
      EXPECT_THROW(src.sample(split, src.size(split), tokens_), Error);
      for (auto md5 : simdjson::dom::array(entry["md5"])) {
        for (const char* suffix : {"description.txt", "document_index.npy", "sample_index.npy", "shuffle_index.npy"}) {
          const std::string file = std::string(std::string_view(md5)) + "-GPTDataset-" + suffix;
          const std::string mine = read_text(cache_dir + "/" + file);
          EXPECT_FALSE(mine.empty()) << "missing " << cache_dir << "/" << file;
          EXPECT_TRUE(mine == read_text(dir_ + "/" + name + ".cache/" + file)) << file << " differs from numpy's";
          ++files;
        }
      }
      ++s;
    }
    EXPECT_GT(files, 0);
  }

  static std::string dir_, int32_prefix_, copy_prefix_;
  std::vector<int32_t> tokens_;
};
std::string GptDatasetTest::dir_, GptDatasetTest::int32_prefix_, GptDatasetTest::copy_prefix_;

TEST_F(GptDatasetTest, SingleMegatronDatasetMatchesAndCacheIsNumpyIdentical) {
  GptDatasetConfig cfg{"949,50,1", 1234, 128, dir_ + "/single.mine"};
  check("single", {shared_prefix("sample_gpt2_text_document")}, cfg, {2000, 300, 50}, cfg.cache_path, false);
  // Second build reads the cache and gives the same samples.
  check("single", {shared_prefix("sample_gpt2_text_document")}, cfg, {2000, 300, 50}, cfg.cache_path, true);
}

TEST_F(GptDatasetTest, BlendOfUint16AndInt32Datasets) {
  GptDatasetConfig cfg{"90,8,2", 7, 64, dir_ + "/blend.mine"};
  check("blend", {"0.3", shared_prefix("sample_gpt2_text_document"), "0.7", int32_prefix_}, cfg, {1000, 100, 20},
        cfg.cache_path, false);
}

TEST_F(GptDatasetTest, OneWeightedDatasetIsABlendOfOne) {
  GptDatasetConfig cfg{"949,50,1", 5, 32, dir_ + "/weighted_single.mine"};
  check("weighted_single", {"2", int32_prefix_}, cfg, {1000, 200, 0}, cfg.cache_path, false);
}

TEST_F(GptDatasetTest, DefaultCacheBesideTheDataAndEmptyTestSplit) {
  GptDatasetConfig cfg{"98, 2", 3, 1024, ""};
  check("default_cache", {copy_prefix_}, cfg, {1500, 30, 10}, copy_prefix_ + "/cache/GPTDataset_indices", false);
}

TEST_F(GptDatasetTest, CorruptCacheIsAnErrorNamingTheFile) {
  GptDatasetConfig cfg{"949,50,1", 99, 256, dir_ + "/corrupt"};
  const std::vector<std::string> path = {int32_prefix_};
  { GptSampleSource first(path, cfg, {100, 0, 0}); }
  std::string shuffle;
  for (auto& e : fs::directory_iterator(cfg.cache_path))
    if (e.path().string().ends_with("shuffle_index.npy")) shuffle = e.path().string();
  ASSERT_FALSE(shuffle.empty());
  fs::resize_file(shuffle, fs::file_size(shuffle) - 4);
  try {
    GptSampleSource second(path, cfg, {100, 0, 0});
    FAIL() << "a truncated cache file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(shuffle), std::string::npos) << e.what();
  }
}

TEST(GptDescription, MatchesPythonJsonDumps) {
  // The exact text json.dumps(OrderedDict(...), indent=4) gives (no trailing newline).
  EXPECT_EQ(gpt_description("/x/spam_gpt2_text_document", 20000, Split::Train, "949,50,1", 1234, 1024),
            "{\n    \"class\": \"GPTDataset\",\n    \"path_prefix\": \"/x/spam_gpt2_text_document\",\n"
            "    \"num_samples\": 20000,\n    \"index_split\": \"train\",\n    \"split\": \"949,50,1\",\n"
            "    \"random_seed\": 1234,\n    \"sequence_length\": 1024\n}");
}

TEST(GptDescription, JsonStringEscapesLikePython) {
  const std::string dir = temp_dir("json");
  const std::vector<std::string> inputs = {"plain", "quote\" back\\slash", "tab\tnl\ncr\r\x01\x7f", "é中😀",
                                           std::string("bad\xff\xc3(utf8")};
  std::string bytes;
  for (const auto& s : inputs) bytes += s + '\0';
  write_text(dir + "/in.bin", bytes);
  write_text(dir + "/j.py",
             "import json, sys\n"
             "raw = open(sys.argv[1], 'rb').read().split(b'\\0')[:-1]\n"
             "out = [json.dumps(r.decode('utf-8', 'surrogateescape')) for r in raw]\n"
             "open(sys.argv[2], 'w').write('\\n'.join(out))\n");
  run_python(dir + "/j.py " + dir + "/in.bin " + dir + "/out.txt");
  std::string mine;
  for (size_t i = 0; i < inputs.size(); ++i) mine += (i ? "\n" : "") + python_json_string(inputs[i]);
  EXPECT_EQ(mine, read_text(dir + "/out.txt"));
  fs::remove_all(dir);
}

}  // namespace
