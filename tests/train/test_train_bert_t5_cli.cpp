// `lmforge train bert` and `lmforge train t5` as users run them, on Megatron's sentence-level sample dataset (with a
// 2,996-word vocabulary where runs are compared with one another, bert_t5_runs::tiny_vocab()):
// every parallel layout (data, tensor, both) reproduces the single process's losses with dropout on; a run stopped
// by --exit-interval and resumed with --load logs exactly the uninterrupted run's lines; the original (post-LN) BERT
// from a Google bert_config.json trains; T5's --print-samples equals Megatron's own T5Dataset output.
#include <cstring>
#include <regex>

#include "datasets/npy.h"
#include "train/bert_t5_run_util.h"

namespace {

using namespace train_runs;
using namespace bert_t5_runs;
using lmforge::testing::loss_lines;

TEST(TrainBert, EveryLayoutReproducesTheSingleProcess) {
  TempDir dir;
  const Flags lamb = tiny_vocab({{"--lr", "0.02"}});  // LAMB's steps are relative: 10 of them learn at this rate
  const ModelRun single = run(dir, "bert", "single", 0, lamb);
  ASSERT_EQ(single.status, 0) << single.output;
  const std::vector<float>& lm = single.scalars.at("lm loss");
  ASSERT_EQ(lm.size(), 10u);
  // It learns: the last three iterations' masked-LM loss below the first three's (one batch of 8 is noisy).
  EXPECT_LT(lm[7] + lm[8] + lm[9], lm[0] + lm[1] + lm[2] - 3 * 0.05f) << single.output;
  const std::vector<std::string> tags = {"lm loss", "sop loss", "grad-norm", "lm loss validation", "sop loss validation",
                                         "lm loss test"};
  expect_same_losses(run(dir, "bert", "dp2", 2, lamb), single, tags, 1e-5, "BERT DP=2");
  expect_same_losses(run(dir, "bert", "tp2", 2, tiny_vocab({{"--tensor-model-parallel-size", "2"}, {"--lr", "0.02"}})), single, tags, 1e-5,
                     "BERT TP=2");
  expect_same_losses(run(dir, "bert", "tp2dp2", 4,
                         tiny_vocab({{"--tensor-model-parallel-size", "2"}, {"--use-distributed-optimizer", ""}, {"--lr", "0.02"}})),
                     single, tags, 1e-5, "BERT TP=2 x DP=2, distributed optimizer");
}

TEST(TrainBert, ResumeLogsTheUninterruptedRun) {
  TempDir dir;
  const Flags base = {{"--save", dir.file("ckpt")}, {"--save-interval", "100"}};
  Flags first = base;
  first["--exit-interval"] = "4";
  const ModelRun a = run(dir, "bert", "part1", 0, tiny_vocab(first));
  ASSERT_EQ(a.status, 0) << a.output;
  Flags second = base;
  second["--load"] = dir.file("ckpt");
  const ModelRun b = run(dir, "bert", "part2", 0, tiny_vocab(second));
  ASSERT_EQ(b.status, 0) << b.output;
  const ModelRun whole = run(dir, "bert", "whole", 0, tiny_vocab({}));
  ASSERT_EQ(whole.status, 0) << whole.output;
  std::vector<std::string> resumed = loss_lines(a.output);
  for (const std::string& l : loss_lines(b.output)) resumed.push_back(l);
  EXPECT_EQ(resumed, loss_lines(whole.output)) << a.output << b.output;
  EXPECT_NE(b.output.find("loaded checkpoint"), std::string::npos) << b.output;
}

TEST(TrainBert, OriginalBertFromGoogleConfigAndNoBinaryHead) {
  TempDir dir;
  const std::string config = dir.file("bert_config.json");
  std::ofstream(config) << R"({"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 64,
    "num_attention_heads": 2, "num_hidden_layers": 2, "type_vocab_size": 2, "vocab_size": 30522})";
  const ModelRun post = run(dir, "bert", "post", 0,
                       {{"--num-layers", "-"}, {"--hidden-size", "-"}, {"--num-attention-heads", "-"},
                        {"--max-position-embeddings", "-"}, {"--bert-config-file", config}, {"--save", dir.file("ck")},
                        {"--lr", "0.01"}, {"--train-iters", "20"}, {"--eval-interval", "20"}});
  ASSERT_EQ(post.status, 0) << post.output;
  EXPECT_NE(post.output.find("original (post-LN) BERT, 2 layers, hidden 32, 2 heads, ffn 64"), std::string::npos)
      << post.output;
  const std::vector<float>& lm = post.scalars.at("lm loss");
  EXPECT_LT(lm.back(), lm.front() - 0.05f) << post.output;
  // Hugging Face BertForPreTraining names in the checkpoint.
  const std::string model = read_file(dir.file("ck/iter_0000020/model.safetensors"));
  EXPECT_NE(model.find("bert.embeddings.LayerNorm.weight"), std::string::npos);
  EXPECT_NE(model.find("cls.seq_relationship.weight"), std::string::npos);
  // A flag that contradicts the file is an error naming both.
  const ModelRun contradiction = run(dir, "bert", "contra", 0, {{"--bert-config-file", config}, {"--hidden-size", "64"}});
  EXPECT_NE(contradiction.status, 0);
  EXPECT_NE(contradiction.output.find("--hidden-size 64 contradicts"), std::string::npos) << contradiction.output;

  const ModelRun headless = run(dir, "bert", "nohead", 0, {{"--bert-no-binary-head", ""}});
  ASSERT_EQ(headless.status, 0) << headless.output;
  EXPECT_EQ(headless.scalars.count("sop loss"), 0u);
  EXPECT_EQ(headless.output.find("sop loss"), std::string::npos);
}

// A float64 scalar of a safetensors file (the reference losses beside Megatron's small BERT).
double safetensors_f64(const std::string& path, const std::string& name) {
  const std::string raw = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  const std::string header = raw.substr(8, n);
  const std::regex entry("\"" + name + "\":\\{[^}]*\"data_offsets\":\\[(\\d+),");
  std::smatch m;
  if (!std::regex_search(header, m, entry)) throw std::runtime_error(path + ": no " + name);
  double v = 0.0;
  std::memcpy(&v, raw.data() + 8 + n + std::stoull(m[1].str()), 8);
  return v;
}

// Megatron's small BERT as a Hugging Face MegatronBertForPreTraining file, taken by --finetune --load: the first
// iteration (dropout 0, the first 8 training samples as one micro-batch) logs Megatron's own lm and sop losses.
TEST(TrainBert, FinetuneFromHuggingFaceFileLogsMegatronsLosses) {
  TempDir dir;
  const std::string ref = shared_path("data/sample/megatron_samples/bert_model_small/");
  const ModelRun r = run(dir, "bert", "finetune", 0,
                         {{"--hidden-size", "64"}, {"--num-attention-heads", "4"}, {"--ffn-hidden-size", "256"},
                          {"--seq-length", "128"}, {"--max-position-embeddings", "512"}, {"--micro-batch-size", "8"},
                          {"--global-batch-size", "8"}, {"--train-iters", "250"}, {"--exit-interval", "1"},
                          {"--eval-iters", "0"}, {"--hidden-dropout", "0"}, {"--attention-dropout", "0"},
                          {"--optimizer", "adam"}, {"--finetune", ""}, {"--load", ref + "model.safetensors"}});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string grads = ref + "grads_bert_s128_train0-8.safetensors";
  const double lm = safetensors_f64(grads, "lm_loss"), sop = safetensors_f64(grads, "sop_loss");
  ASSERT_EQ(r.scalars.at("lm loss").size(), 1u) << r.output;
  EXPECT_NEAR(r.scalars.at("lm loss")[0], lm, 1e-5 * lm) << r.output;
  EXPECT_NEAR(r.scalars.at("sop loss")[0], sop, 1e-5 * sop) << r.output;
}

TEST(TrainT5, EveryLayoutReproducesTheSingleProcessAndResumes) {
  TempDir dir;
  const ModelRun single = run(dir, "t5", "single", 0, tiny_vocab({}));
  ASSERT_EQ(single.status, 0) << single.output;
  const std::vector<float>& lm = single.scalars.at("lm loss");
  EXPECT_LT(lm.back(), lm.front() - 0.05f) << single.output;
  const std::vector<std::string> tags = {"lm loss", "grad-norm", "lm loss validation", "lm loss test"};
  expect_same_losses(run(dir, "t5", "dp2", 2, tiny_vocab({})), single, tags, 1e-5, "T5 DP=2");
  expect_same_losses(run(dir, "t5", "tp2", 2, tiny_vocab({{"--tensor-model-parallel-size", "2"}})), single, tags, 1e-5, "T5 TP=2");
  expect_same_losses(run(dir, "t5", "tp2dp2", 4,
                         tiny_vocab({{"--tensor-model-parallel-size", "2"}, {"--use-distributed-optimizer", ""}})),
                     single, tags, 1e-5, "T5 TP=2 x DP=2, distributed optimizer");
  Flags first = {{"--save", dir.file("ckpt")}, {"--exit-interval", "4"}};
  const ModelRun a = run(dir, "t5", "part1", 0, tiny_vocab(first));
  const ModelRun b = run(dir, "t5", "part2", 0, tiny_vocab({{"--save", dir.file("ckpt")}, {"--load", dir.file("ckpt")}}));
  ASSERT_EQ(b.status, 0) << b.output;
  std::vector<std::string> resumed = loss_lines(a.output);
  for (const std::string& l : loss_lines(b.output)) resumed.push_back(l);
  EXPECT_EQ(resumed, loss_lines(single.output)) << a.output << b.output;
}

std::vector<int64_t> json_field(const std::string& line, const std::string& name) {
  const std::string key = "\"" + name + "\": ";
  const size_t at = line.find(key);
  if (at == std::string::npos) return {};
  const char* p = line.c_str() + at + key.size();
  if (*p != '[') return {std::strtoll(p, nullptr, 10)};
  std::vector<int64_t> out;
  for (++p; *p && *p != ']';) {
    char* end = nullptr;
    out.push_back(std::strtoll(p, &end, 10));
    for (p = end; *p == ',' || *p == ' ';) ++p;
  }
  return out;
}

// Megatron's own T5Dataset output for the same dataset and flags (meta.json of t5_e128_d64).
TEST(TrainT5, PrintSamplesEqualsMegatronsT5Dataset) {
  TempDir dir;
  const auto r = run_command(command(dir, "t5", {{"--encoder-seq-length", "128"}, {"--decoder-seq-length", "64"},
                                                 {"--max-position-embeddings", "512"}, {"--micro-batch-size", "4"},
                                                 {"--global-batch-size", "4"}, {"--train-iters", "500"},
                                                 {"--eval-interval", "200"}, {"--eval-iters", "25"},
                                                 {"--print-samples", "64"}}));
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  std::map<std::string, std::vector<std::string>> by_split;
  for (std::string line; std::getline(lines, line);)
    for (const char* s : {"train", "valid", "test"})
      if (line.rfind(std::string("{\"split\": \"") + s + "\"", 0) == 0) by_split[s].push_back(line);
  const std::string ref = shared_path("data/sample/megatron_samples/t5_e128_d64/");
  for (const char* s : {"train", "valid", "test"}) {
    ASSERT_EQ(by_split[s].size(), 64u) << s;
    for (const char* name : {"text_enc", "text_dec", "labels", "loss_mask", "truncated"}) {
      const lmforge::datasets::NpyArray a = lmforge::datasets::read_npy(ref + s + "_" + name + ".npy");
      std::vector<int64_t> want(a.data.size() / 8), got;
      std::memcpy(want.data(), a.data.data(), a.data.size());
      for (const std::string& line : by_split[s]) {
        const std::vector<int64_t> v = json_field(line, name);
        got.insert(got.end(), v.begin(), v.end());
      }
      EXPECT_EQ(got, want) << s << " " << name;
    }
  }
}

}  // namespace
