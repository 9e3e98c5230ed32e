// `lmforge train electra` as users run it, on Megatron's sentence-level sample dataset with a tiny model: both losses
// fall and evaluation reports the discriminator's replaced-token accuracy on the validation split; 2 data-parallel
// ranks and tensor-parallel size 2 reproduce one process (dropout on); a run stopped by --exit-interval and resumed
// with --load logs exactly the uninterrupted run's lines; the first step's losses equal `lmforge check electra-step`
// on the same weights, examples and draws (the draws restated here from the documented key: seed, iteration, global
// sample index), and so does an evaluation of a checkpoint on the validation split; the saved Hugging Face
// directories give, under a float64 PyTorch statement of ElectraForPreTraining and ElectraForMaskedLM
// (electra_hf_forward.py), lmforge's discriminator and generator logits; pipeline stages are refused.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "checkpoint/safetensors.h"
#include "prep/electra_tfrecord.h"
#include "families/registry.h"
#include "model/electra_draws.h"
#include "text/tokenizer_factory.h"
#include "train/train_run_util.h"

namespace {

using namespace train_runs;
using lmforge::testing::loss_lines;
namespace ck = lmforge::checkpoint;

const std::string kVocab = shared_path("data/vocab/bert-base-uncased-vocab.txt");
const std::string kData = shared_path("data/sample/sample_bert_text_sentence");

Flags electra_flags() {
  return {{"--hidden-dropout", "0.1"}, {"--attention-dropout", "0.1"}, {"--num-layers", "2"},
          {"--hidden-size", "32"}, {"--num-attention-heads", "2"}, {"--embedding-size", "16"},
          {"--generator-hidden-size", "0.5"}, {"--seq-length", "64"}, {"--max-position-embeddings", "64"},
          {"--micro-batch-size", "2"}, {"--global-batch-size", "8"}, {"--lr", "0.002"},
          {"--lr-decay-style", "linear"}, {"--lr-warmup-iters", "2"}, {"--weight-decay", "0.01"},
          {"--clip-grad", "1.0"}, {"--split", "949,50,1"}, {"--log-interval", "1"}, {"--eval-interval", "10"},
          {"--eval-iters", "1"}, {"--train-iters", "10"}, {"--threads", "1"}, {"--vocab-file", kVocab},
          {"--data-path", kData}};
}

struct ElectraRun {
  int status = -1;
  std::string output;
  std::map<std::string, std::vector<float>> scalars;
};
ElectraRun run_electra(const TempDir& dir, const std::string& name, int np, const Flags& overrides = {}) {
  Flags flags = electra_flags();
  for (const auto& [k, v] : overrides) flags[k] = v;
  const std::string tb = dir.file("tb-" + name);
  fs::remove_all(tb);
  flags["--tensorboard-dir"] = tb;
  std::string cmd = "timeout 300 env OMP_NUM_THREADS=1 " + (np > 0 ? mpirun_prefix(np) : std::string()) +
                    std::string(LMFORGE_EXE) + " train electra";
  for (const auto& [k, v] : flags)
    if (v != "-") cmd += " " + k + (v.empty() ? "" : " '" + v + "'");
  ElectraRun r;
  const auto c = run_command(cmd);
  r.status = c.status;
  r.output = c.output;
  if (c.status == 0 && fs::exists(tb)) r.scalars = read_scalars(tb);
  return r;
}

double mean(const std::vector<float>& v, size_t from, size_t to) {
  double s = 0.0;
  for (size_t i = from; i < to; i++) s += v[i];
  return s / double(to - from);
}

TEST(TrainElectra, BothLossesFallAndEvaluationReportsTheReplacedTokenAccuracy) {
  TempDir dir;
  const ElectraRun r = run_electra(dir, "learn", 0,
                                   {{"--train-iters", "30"}, {"--eval-interval", "30"}, {"--lr", "0.01"},
                                    {"--lr-decay-style", "constant"}, {"--lr-warmup-iters", "0"}});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<float>& mlm = r.scalars.at("mlm loss");
  const std::vector<float>& disc = r.scalars.at("disc loss");
  ASSERT_EQ(mlm.size(), 30u);
  ASSERT_EQ(disc.size(), 30u);
  EXPECT_LT(mean(mlm, 25, 30), mean(mlm, 0, 5) - 0.5) << r.output;
  EXPECT_LT(mean(disc, 25, 30), mean(disc, 0, 5) - 0.05) << r.output;
  const std::vector<float>& accuracy = r.scalars.at("disc accuracy");
  for (float a : accuracy) EXPECT_TRUE(a >= 0.0f && a <= 1.0f) << a;
  // The validation split's accuracy (evaluation at iteration 30, and once more at the end: Megatron's test split).
  ASSERT_FALSE(r.scalars.at("disc accuracy validation").empty()) << r.output;
  const float valid = r.scalars.at("disc accuracy validation").back();
  EXPECT_GT(valid, 0.5f) << r.output;  // most tokens are originals: a trained discriminator calls them so
  EXPECT_NE(r.output.find("disc accuracy value:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mlm loss:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ELECTRA: discriminator 2 layers, hidden 32, 2 heads, ffn 128; generator 2 layers, "
                          "hidden 16, 1 heads, ffn 64; shared embeddings 16 wide (vocab 30522"),
            std::string::npos)
      << r.output;
}

void expect_same_run(const ElectraRun& got, const ElectraRun& want, const char* what) {
  ASSERT_EQ(got.status, 0) << what << ":\n" << got.output;
  for (const char* tag : {"mlm loss", "disc loss", "disc accuracy", "grad-norm", "mlm loss validation",
                          "disc loss validation", "disc accuracy validation"}) {
    ASSERT_TRUE(want.scalars.count(tag)) << tag;
    ASSERT_TRUE(got.scalars.count(tag)) << what << " " << tag;
    ASSERT_EQ(got.scalars.at(tag).size(), want.scalars.at(tag).size()) << what << " " << tag;
    const double d = max_relative_difference(got.scalars.at(tag), want.scalars.at(tag));
    std::printf("[ parity ] ELECTRA %s %s: max relative difference %.3g\n", what, tag, d);
    EXPECT_LT(d, 1e-5) << what << " " << tag;
  }
}

// Dropout on: every layout draws the single process's masks, masking and sampling draws.
TEST(TrainElectra, DataAndTensorParallelRanksReproduceOneProcess) {
  TempDir dir;
  const ElectraRun single = run_electra(dir, "single", 0, {{"--save", dir.file("ck1")}});
  ASSERT_EQ(single.status, 0) << single.output;
  expect_same_run(run_electra(dir, "dp2", 2), single, "DP=2");
  const ElectraRun tp2 = run_electra(dir, "tp2", 2, {{"--tensor-model-parallel-size", "2"}, {"--save", dir.file("ck2")}});
  expect_same_run(tp2, single, "TP=2");
  EXPECT_NE(tp2.output.find("tensor parallel: 2 ranks per group"), std::string::npos) << tp2.output;
  // The TP=2 checkpoint holds whole tensors, its hf/ directories too (the discriminator's split layers gathered).
  for (const char* file : {"model.safetensors", "hf/discriminator/model.safetensors", "hf/generator/model.safetensors"}) {
    const ck::SafetensorsFile a(dir.file(std::string("ck1/iter_0000010/") + file)),
        b(dir.file(std::string("ck2/iter_0000010/") + file));
    const ck::TensorInfo &ta = a.at("electra.encoder.layer.1.intermediate.dense.weight"),
                         &tb = b.at("electra.encoder.layer.1.intermediate.dense.weight");
    EXPECT_EQ(ta.shape, tb.shape) << file;
    const auto x = a.bytes(ta), y = b.bytes(tb);
    ASSERT_EQ(x.size(), y.size()) << file;
    double worst = 0.0;
    for (size_t i = 0; i < x.size() / 4; i++) {
      float p, q;
      std::memcpy(&p, x.data() + 4 * i, 4);
      std::memcpy(&q, y.data() + 4 * i, 4);
      worst = std::max(worst, (double)std::fabs(p - q));
    }
    EXPECT_LT(worst, 1e-5) << file;
  }
}

TEST(TrainElectra, ResumeLogsTheUninterruptedRun) {
  TempDir dir;
  const Flags base = {{"--save", dir.file("ckpt")}, {"--save-interval", "100"}};
  Flags first = base;
  first["--exit-interval"] = "4";
  const ElectraRun a = run_electra(dir, "part1", 0, first);
  ASSERT_EQ(a.status, 0) << a.output;
  Flags second = base;
  second["--load"] = dir.file("ckpt");
  const ElectraRun b = run_electra(dir, "part2", 0, second);
  ASSERT_EQ(b.status, 0) << b.output;
  const ElectraRun whole = run_electra(dir, "whole", 0);
  ASSERT_EQ(whole.status, 0) << whole.output;
  std::vector<std::string> resumed = loss_lines(a.output);
  for (const std::string& l : loss_lines(b.output)) resumed.push_back(l);
  EXPECT_EQ(resumed, loss_lines(whole.output)) << a.output << b.output;
  EXPECT_NE(b.output.find("loaded checkpoint"), std::string::npos) << b.output;
  // Another loss weight cannot continue these weights silently.
  Flags other = second;
  other["--disc-weight"] = "20";
  other["--train-iters"] = "12";
  const ElectraRun c = run_electra(dir, "other", 0, other);
  EXPECT_NE(c.status, 0);
  EXPECT_NE(c.output.find("--disc-weight"), std::string::npos) << c.output;
}

// The inputs of `lmforge check electra-step` for the first step of the tiny run: the task's samples 0 and 1 of the
// train split and the draws the trainer's key gives them — restated here: key (seed, iteration 0), sample b of the
// global batch, the three sites (model/electra_draws.h) — and the tiny model's meta.json (embedding size E). Runs
// the check on `weights` into dir/step.safetensors. (Evaluation: samples 0 and 1 of `split`, its key's iteration
// 2^64 - 1 - split.)
lmforge::testing::CommandResult check_first_step(const TempDir& dir, const std::string& weights, int E = 16,
                                                 lmforge::train::SplitKind split = lmforge::train::SplitKind::TRAIN,
                                                 uint64_t key_iteration = 0) {
  lmforge::train::TrainOptions o;
  o.model_type = "electra";
  o.data_path = {kData};
  o.tokenizer.type = "BertWordPieceLowerCase";
  o.tokenizer.vocab_file = kVocab;
  o.seq_length = 64;
  o.split = "949,50,1";
  const auto tokenizer = lmforge::text::make_tokenizer(o.tokenizer);
  const auto task = lmforge::families::model_family("electra").make_task(o, *tokenizer, {2, 0, 0});
  lmforge::train::Batch batch;
  task->fill(split, 0, 2, batch);
  const int64_t B = 2, L = 64, N = 9, V = 30522;  // N = int((0.15 + 0.005) x 64)
  std::vector<int64_t> ids(batch.tokens.begin(), batch.tokens.end()), mask(batch.padding.begin(), batch.padding.end()),
      types(batch.token_types.begin(), batch.token_types.end());
  std::vector<double> pos_u(B * N), keep_u(B * N), gumbel_u(B * N * V);
  const lmforge::model::ElectraDrawKey key{1234, key_iteration};
  using lmforge::model::ElectraDrawSite;
  for (int64_t b = 0; b < B; b++) {
    lmforge::model::electra_uniform_row(key, b, ElectraDrawSite::POSITIONS, 0, N, pos_u.data() + b * N);
    lmforge::model::electra_uniform_row(key, b, ElectraDrawSite::KEEP, 0, N, keep_u.data() + b * N);
    lmforge::model::electra_uniform_row(key, b, ElectraDrawSite::GUMBEL, 0, N * V, gumbel_u.data() + b * N * V);
  }
  ck::write_safetensors(dir.file("batch.safetensors"),
                        {{"input_ids", ck::DType::kI64, {B, L}, ids.data()},
                         {"input_mask", ck::DType::kI64, {B, L}, mask.data()},
                         {"segment_ids", ck::DType::kI64, {B, L}, types.data()},
                         {"pos_u", ck::DType::kF64, {B, N}, pos_u.data()},
                         {"keep_u", ck::DType::kF64, {B, N}, keep_u.data()},
                         {"gumbel_u", ck::DType::kF64, {B, N, V}, gumbel_u.data()}});
  std::ofstream(dir.file("meta.json")) << R"({"config": {"vocab_size": 30522, "embedding_size": )" << E << R"(,
    "hidden_size": 32, "num_layers": 2, "heads": 2, "intermediate": 128, "gen_hidden": 16, "gen_layers": 2,
    "gen_heads": 1, "gen_intermediate": 64, "max_position": 64, "type_vocab": 2, "eps": 1e-12, "seq_len": 64,
    "mask_prob": 0.15, "disc_weight": 50.0, "gen_weight": 1.0, "temperature": 1.0, "init_range": 0.02}})";
  return run_command(std::string(LMFORGE_EXE) + " check electra-step --config " + dir.file("meta.json") +
                     " --weights " + weights + " --batch " + dir.file("batch.safetensors") + " --output " +
                     dir.file("step.safetensors"));
}

// The discriminator's replaced-token accuracy of the checked step, from its outputs: the share of real tokens
// (input_mask 1) where (logit > 0) equals the replaced label.
double step_accuracy(const TempDir& dir) {
  const ck::SafetensorsFile step(dir.file("step.safetensors")), batch(dir.file("batch.safetensors"));
  const auto logits = step.bytes(step.at("disc_logits")), labels = step.bytes(step.at("disc_labels")),
             mask = batch.bytes(batch.at("input_mask"));
  double right = 0.0, real = 0.0;
  for (size_t i = 0; i < mask.size() / 8; i++) {
    int64_t m, y;
    float z;
    std::memcpy(&m, mask.data() + 8 * i, 8);
    std::memcpy(&y, labels.data() + 8 * i, 8);
    std::memcpy(&z, logits.data() + 4 * i, 4);
    if (m == 0) continue;
    real += 1.0;
    right += (z > 0.0f) == (y != 0);
  }
  return right / real;
}

double step_scalar(const TempDir& dir, const char* name) {
  const ck::SafetensorsFile step(dir.file("step.safetensors"));
  double v;
  std::memcpy(&v, step.bytes(step.at(name)).data(), sizeof v);
  return v;
}

// The first step of a run (dropout off; --lr 1e-30, so the saved weights are the initial ones to the last bit that
// matters) against `lmforge check electra-step` on those weights, examples and draws.
TEST(TrainElectra, FirstStepEqualsCheckElectraStep) {
  TempDir dir;
  const ElectraRun r = run_electra(dir, "first", 0,
                                   {{"--train-iters", "1"}, {"--lr", "1e-30"}, {"--lr-warmup-iters", "0"},
                                    {"--hidden-dropout", "0"}, {"--attention-dropout", "0"},
                                    {"--global-batch-size", "2"}, {"--eval-iters", "0"}, {"--save", dir.file("ck")}});
  ASSERT_EQ(r.status, 0) << r.output;
  const auto check = check_first_step(dir, dir.file("ck/iter_0000001/model.safetensors"));
  ASSERT_EQ(check.status, 0) << check.output;
  const double mlm = step_scalar(dir, "mlm_loss"), disc = step_scalar(dir, "disc_loss");
  std::printf("first step: train mlm %.8g disc %.8g; check electra-step mlm %.8g disc %.8g\n",
              r.scalars.at("mlm loss")[0], r.scalars.at("disc loss")[0], mlm, disc);
  EXPECT_NEAR(r.scalars.at("mlm loss")[0], mlm, 1e-5 * mlm) << r.output;
  EXPECT_NEAR(r.scalars.at("disc loss")[0], disc, 1e-5 * disc) << r.output;
  EXPECT_NEAR(r.scalars.at("disc accuracy")[0], step_accuracy(dir), 1e-6) << r.output;
}

// `--skip-train --load` evaluates a checkpoint on the validation split (Megatron's evaluation-only run): its mlm
// loss, disc loss and replaced-token accuracy equal `lmforge check electra-step` on the checkpoint's weights, the
// split's first two examples and the evaluation's draws (key iteration 2^64 - 2, dropout off).
TEST(TrainElectra, EvaluationOfACheckpointEqualsCheckElectraStepOnTheValidationSplit) {
  TempDir dir;
  const ElectraRun trained = run_electra(dir, "trained", 0,
                                         {{"--train-iters", "10"}, {"--lr", "0.01"}, {"--global-batch-size", "2"},
                                          {"--eval-iters", "0"}, {"--save", dir.file("ck")}});
  ASSERT_EQ(trained.status, 0) << trained.output;
  const ElectraRun eval = run_electra(dir, "eval", 0,
                                      {{"--train-iters", "10"}, {"--lr", "0.01"}, {"--global-batch-size", "2"},
                                       {"--eval-iters", "1"}, {"--load", dir.file("ck")}, {"--skip-train", ""}});
  ASSERT_EQ(eval.status, 0) << eval.output;
  EXPECT_NE(eval.output.find("disc accuracy value:"), std::string::npos) << eval.output;
  ASSERT_TRUE(eval.scalars.count("disc accuracy validation")) << eval.output;
  const auto check = check_first_step(dir, dir.file("ck/iter_0000010/model.safetensors"), 16,
                                      lmforge::train::SplitKind::VALID, UINT64_MAX - 1);
  ASSERT_EQ(check.status, 0) << check.output;
  const double mlm = step_scalar(dir, "mlm_loss"), disc = step_scalar(dir, "disc_loss"), accuracy = step_accuracy(dir);
  std::printf("validation: eval mlm %.8g disc %.8g accuracy %.8g; check electra-step mlm %.8g disc %.8g accuracy "
              "%.8g\n", eval.scalars.at("mlm loss validation")[0], eval.scalars.at("disc loss validation")[0],
              eval.scalars.at("disc accuracy validation")[0], mlm, disc, accuracy);
  EXPECT_NEAR(eval.scalars.at("mlm loss validation")[0], mlm, 1e-5 * mlm);
  EXPECT_NEAR(eval.scalars.at("disc loss validation")[0], disc, 1e-5 * disc);
  EXPECT_NEAR(eval.scalars.at("disc accuracy validation")[0], accuracy, 1e-6);
  EXPECT_GT(accuracy, 0.5);
}

// The Hugging Face directories of a trained checkpoint, in both layouts of the projections (E 16: the
// discriminator projects 16 -> 32, the 16-wide generator reads the embeddings directly; E 32: the discriminator
// reads them directly, the generator projects 32 -> 16), give the logits lmforge computes with the same weights on
// the step's fake ids (discriminator) and masked ids (generator, at the masked slots).
TEST(TrainElectra, HuggingFaceDirectoriesGiveLmforgesLogits) {
  for (const int E : {16, 32}) {
    TempDir dir;
    const ElectraRun r = run_electra(dir, "hf", 0,
                                     {{"--train-iters", "20"}, {"--lr", "0.01"}, {"--lr-decay-style", "constant"},
                                      {"--eval-iters", "0"}, {"--embedding-size", std::to_string(E)},
                                      {"--save", dir.file("ck")}});
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string ck_dir = dir.file("ck/iter_0000020");
    const std::string config = read_file(ck_dir + "/hf/discriminator/config.json");
    EXPECT_NE(config.find("\"architectures\": [\"ElectraForPreTraining\"]"), std::string::npos) << config;
    EXPECT_NE(config.find("\"model_type\": \"electra\""), std::string::npos) << config;
    EXPECT_NE(read_file(ck_dir + "/hf/generator/config.json").find("\"hidden_size\": 16"), std::string::npos);
    EXPECT_FALSE(fs::exists(ck_dir + "/hf.tmp"));
    const auto check = check_first_step(dir, ck_dir + "/model.safetensors", E);
    ASSERT_EQ(check.status, 0) << check.output;
    const auto hf = run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                                "/tests/train/electra_hf_forward.py --discriminator " + ck_dir +
                                "/hf/discriminator --generator " + ck_dir + "/hf/generator --batch " +
                                dir.file("batch.safetensors") + " --step " + dir.file("step.safetensors") +
                                " --tolerance 1e-5");
    std::printf("E %d: %s", E, hf.output.c_str());
    EXPECT_EQ(hf.status, 0) << hf.output;
  }
}

// --electra-size small fills the sizes, the learning rate and the embedding size that are not given (ELECTRA-Small:
// 12 layers of 256 with 4 heads and FFN 1024, embedding 128, generator 64 wide, lr 5e-4); a size given wins.
TEST(TrainElectra, SizePresetFillsWhatIsNotGiven) {
  TempDir dir;
  const ElectraRun r = run_electra(dir, "small", 0,
                                   {{"--num-layers", "-"}, {"--hidden-size", "-"}, {"--num-attention-heads", "-"},
                                    {"--embedding-size", "-"}, {"--generator-hidden-size", "-"}, {"--lr", "-"},
                                    {"--train-iters", "1"}, {"--global-batch-size", "2"}, {"--eval-iters", "0"},
                                    {"--electra-size", "small"}, {"--lr-warmup-iters", "0"},
                                    {"--lr-decay-style", "constant"}});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--electra-size small: --num-layers, --hidden-size, --num-attention-heads, "
                          "--ffn-hidden-size, --embedding-size, --generator-hidden-size, --lr, --mask-prob from the "
                          "preset"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("ELECTRA: discriminator 12 layers, hidden 256, 4 heads, ffn 1024; generator 12 layers, "
                          "hidden 64, 1 heads, ffn 256; shared embeddings 128 wide"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("learning rate: 5.000000E-04"), std::string::npos) << r.output;
  const ElectraRun large = run_electra(dir, "large", 0, {{"--electra-size", "large"}, {"--train-iters", "4"},
                                                         {"--print-samples", "1"}});
  ASSERT_EQ(large.status, 0) << large.output;
  // ELECTRA-Large masks 25%; the sizes given here (hidden 32) keep the preset's FFN and embedding size out.
  EXPECT_NE(large.output.find("--electra-size large: --mask-prob from the preset"), std::string::npos) << large.output;
}

// --data-path a text file of sentences: --print-samples shows the train split's samples as the examples
// build_pretraining_dataset.py wrote for it (its TFRecords of the same file, seed 12345, length 128: example k is
// record k div 1000 of file k mod 1000), each under its example number.
TEST(TrainElectra, TextFileSamplesAreTheBuildersExamples) {
  TempDir dir;
  const ElectraRun r = run_electra(dir, "text", 0,
                                   {{"--data-path", shared_path("data/nvhdf5/sample_sentences.txt")},
                                    {"--seed", "12345"}, {"--seq-length", "128"}, {"--max-position-embeddings", "128"},
                                    {"--print-samples", "4"}});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::regex line("\\{\"split\": \"(train|valid|test)\", \"index\": \\d+, \"example\": (\\d+), \"input_ids\": "
                        "\\[([^\\]]*)\\], \"input_mask\": \\[([^\\]]*)\\], \"segment_ids\": \\[([^\\]]*)\\]\\}");
  auto values = [](const std::string& list) {
    std::vector<int64_t> out;
    std::istringstream in(list);
    for (std::string v; std::getline(in, v, ',');) out.push_back(std::stoll(v));
    return out;
  };
  int seen = 0;
  std::istringstream out(r.output);
  for (std::string l; std::getline(out, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    const size_t k = std::stoul(m[2]);
    const auto file = lmforge::prep::read_tfrecord_file(
        shared_path("data/electra/tfrecords_s128/pretrain_data.tfrecord-" + std::to_string(k % 1000) + "-of-1000"));
    ASSERT_LT(k / 1000, file.records.size()) << l;
    const auto want = lmforge::prep::parse_int64_example(file.records[k / 1000], "example " + std::to_string(k));
    EXPECT_EQ(values(m[3]), want.at("input_ids")) << "example " << k;
    EXPECT_EQ(values(m[4]), want.at("input_mask")) << "example " << k;
    EXPECT_EQ(values(m[5]), want.at("segment_ids")) << "example " << k;
    seen++;
  }
  EXPECT_GE(seen, 8) << r.output;  // 4 of train and validation, the test split's (it has some examples) as well
}

TEST(TrainElectra, PipelineStagesAreRefused) {
  TempDir dir;
  const ElectraRun r = run_electra(dir, "pp2", 0, {{"--pipeline-model-parallel-size", "2"}});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("pipeline stages are not implemented"), std::string::npos) << r.output;
}

}  // namespace
