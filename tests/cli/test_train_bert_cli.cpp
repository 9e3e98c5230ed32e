// `lmforge train bert --print-samples`: the samples the trainer would read equal Megatron's own BertDataset output
// (../shared/data/sample/megatron_samples/bert_s128, every field of 64 samples of each split, made by Megatron's
// legacy BertDataset with the flags of its meta.json); a blend is refused as Megatron refuses it.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/npy.h"
#include "test_util.h"

namespace {

using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;

// The value of `"name": ...` in a --print-samples line: an array of integers or one integer.
std::vector<int64_t> field(const std::string& line, const std::string& name) {
  const std::string key = "\"" + name + "\": ";
  const size_t at = line.find(key);
  if (at == std::string::npos) return {};
  const char* p = line.c_str() + at + key.size();
  std::vector<int64_t> out;
  if (*p != '[') return {std::strtoll(p, nullptr, 10)};
  ++p;
  while (*p && *p != ']') {
    char* end = nullptr;
    out.push_back(std::strtoll(p, &end, 10));
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  return out;
}

std::vector<int64_t> npy_values(const std::string& path) {
  const lmforge::datasets::NpyArray a = lmforge::datasets::read_npy(path);
  EXPECT_EQ(a.descr, "<i8") << path;
  std::vector<int64_t> v(a.data.size() / 8);
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

std::string bert_command(const TempDir& dir, const std::string& extra) {
  return std::string(LMFORGE_EXE) +
         " train bert --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128"
         " --max-position-embeddings 512 --micro-batch-size 4 --global-batch-size 4 --lr 1e-4"
         " --train-iters 500 --eval-interval 200 --eval-iters 25 --split 949,50,1 --seed 1234 --mask-prob 0.15"
         " --short-seq-prob 0.1 --tokenizer-type BertWordPieceLowerCase --vocab-file " +
         shared_path("data/vocab/bert-base-uncased-vocab.txt") + " --data-cache-path " + dir.file("cache") + " " +
         extra;
}

TEST(TrainBertCli, PrintSamplesEqualsMegatronsBertDataset) {
  TempDir dir;
  const auto r = run_command(bert_command(dir, "--data-path " + shared_path("data/sample/sample_bert_text_sentence") +
                                                   " --print-samples 64"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  std::vector<std::string> by_split[3];
  const char* splits[3] = {"train", "valid", "test"};
  for (std::string line; std::getline(lines, line);)
    for (int s = 0; s < 3; s++)
      if (line.rfind(std::string("{\"split\": \"") + splits[s] + "\"", 0) == 0) by_split[s].push_back(line);
  const std::string ref = shared_path("data/sample/megatron_samples/bert_s128/");
  for (int s = 0; s < 3; s++) {
    ASSERT_EQ(by_split[s].size(), 64u) << splits[s] << "\n" << r.output.substr(0, 2000);
    for (const char* name : {"text", "types", "labels", "loss_mask", "padding_mask", "is_random", "truncated"}) {
      const std::vector<int64_t> want = npy_values(ref + splits[s] + "_" + name + ".npy");
      std::vector<int64_t> got;
      for (size_t i = 0; i < by_split[s].size(); i++) {
        EXPECT_EQ(field(by_split[s][i], "index"), std::vector<int64_t>{(int64_t)i});
        const std::vector<int64_t> v = field(by_split[s][i], name);
        got.insert(got.end(), v.begin(), v.end());
      }
      EXPECT_EQ(got, want) << splits[s] << " " << name;
    }
  }
}

TEST(TrainBertCli, BlendIsRefusedAsMegatronDoes) {
  TempDir dir;
  const std::string prefix = shared_path("data/sample/sample_bert_text_sentence");
  const auto r = run_command(bert_command(dir, "--data-path 0.5 " + prefix + " 0.5 " + prefix + " --print-samples 1"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("Megatron does not blend BERT or T5 datasets"), std::string::npos) << r.output;
}

TEST(TrainBertCli, WithoutBinaryHeadSamplesAreOneSegment) {
  TempDir dir;
  const auto r = run_command(bert_command(dir, "--data-path " + shared_path("data/sample/sample_bert_text_sentence") +
                                                   " --bert-no-binary-head --print-samples 8"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  int n = 0;
  for (std::string line; std::getline(lines, line); n++) {
    for (int64_t t : field(line, "types")) EXPECT_EQ(t, 0) << line;  // one segment: types 0, padding 0 ([PAD])
    EXPECT_EQ(field(line, "is_random"), std::vector<int64_t>{0});
  }
  EXPECT_EQ(n, 24);  // 8 of each split
}

}  // namespace
