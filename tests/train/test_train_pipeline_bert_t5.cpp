// `lmforge train bert|t5 --pipeline-model-parallel-size`: BERT cut into stages (P = 2, T = 2 × P = 2, P = 2 × D = 2
// with the distributed optimizer, the original post-LN flavour without the binary head) reproduces the single
// process's losses, gradient norms and validation losses over 10 iterations with dropout on (relative difference
// < 1e-5); a checkpoint written by one layout resumes under another and in one process and continues the
// uninterrupted run, and every checkpoint holds each whole Hugging Face tensor once.
#include <cstring>

#include "train/train_run_util.h"
#include "train/bert_t5_run_util.h"

namespace {

using namespace train_runs;

using namespace bert_t5_runs;

// The shared tiny models (train/bert_t5_run_util.h) on the sample with 2,996 words (tiny_vocab()) over 10 iterations, evaluated at 5 and 10, with AdamW; the
// caller's flags win; `reference`: the one-process run every layout is compared with, made once per build. (Each
// layout's claim, every iteration's losses equal to one process's, is the same at 10 iterations as at 20, the
// count these tests ran before: half the time of the suite's largest BERT/T5 part.)
ModelRun run10(const TempDir& dir, const std::string& model, const std::string& name, int np, Flags flags = {},
               bool reference = false) {
  flags.emplace("--train-iters", "10");
  flags.emplace("--eval-interval", "5");
  flags.emplace("--optimizer", "adam");
  return bert_t5_runs::run(dir, model, name, np, tiny_vocab(flags), reference);
}

// The safetensors header of a checkpoint's model file.
std::string model_header(const std::string& path) {
  const std::string model = read_file(path);
  uint64_t n = 0;  // a little-endian u64 length, then the JSON header
  if (model.size() < 8) return "";
  std::memcpy(&n, model.data(), 8);
  return model.substr(8, n);
}

void expect_once(const std::string& header, const std::string& entry, const std::string& what) {
  const size_t at = header.find(entry);
  EXPECT_NE(at, std::string::npos) << what << ": " << entry;
  EXPECT_EQ(header.find(entry, at + 1), std::string::npos) << what << ": twice: " << entry;
}

// Appends to `resumed` the scalars of each run that resumed from its checkpoint (a fatal failure when one failed).
void append_resumed(ModelRun& resumed, std::initializer_list<const ModelRun*> resumes) {
  for (const ModelRun* r : resumes) {
    ASSERT_EQ(r->status, 0) << r->output;
    EXPECT_NE(r->output.find("loaded checkpoint"), std::string::npos) << r->output;
    for (const auto& [tag, values] : r->scalars)
      resumed.scalars[tag].insert(resumed.scalars[tag].end(), values.begin(), values.end());
  }
}

// A suite per model whose one-process run (made once) every layout is compared with.
template <const char* kModel>
class PipelineSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    single_ = new ModelRun(run10(*dir_, kModel, "single", 0, {}, true));
  }
  static void TearDownTestSuite() {
    delete single_;
    delete dir_;
  }
  // The one-process run finished its 10 iterations and learned.
  static void expect_single_learns() {
    ASSERT_EQ(single_->status, 0) << single_->output;
    const std::vector<float>& lm = single_->scalars.at("lm loss");
    ASSERT_EQ(lm.size(), 10u);
    EXPECT_LT(lm.back(), lm.front() - 0.05f) << single_->output;
  }
  static inline TempDir* dir_ = nullptr;
  static inline ModelRun* single_ = nullptr;
};

constexpr char kBert[] = "bert", kT5[] = "t5";

const std::vector<std::string> kBertTags = {"lm loss", "sop loss", "grad-norm", "lm loss validation",
                                            "sop loss validation", "lm loss test"};

using BertPipeline = PipelineSuite<kBert>;

TEST_F(BertPipeline, EveryLayoutWithStagesReproducesOneProcess) {
  ASSERT_NO_FATAL_FAILURE(expect_single_learns());
  const ModelRun p2 = run10(*dir_, "bert", "p2", 2, {{"--pipeline-model-parallel-size", "2"}});
  expect_same_losses(p2, *single_, kBertTags, 1e-5, "BERT P=2");
  EXPECT_NE(p2.output.find("pipeline parallel: 2 stages (layers per stage: 1 1), 1F1B schedule"), std::string::npos)
      << p2.output;
  expect_same_losses(run10(*dir_, "bert", "t2p2", 4, {{"--pipeline-model-parallel-size", "2"},
                                             {"--tensor-model-parallel-size", "2"}}),
              *single_, kBertTags, 1e-5, "BERT T=2 x P=2");
  expect_same_losses(run10(*dir_, "bert", "p2d2", 4, {{"--pipeline-model-parallel-size", "2"},
                                             {"--use-distributed-optimizer", ""}}),
              *single_, kBertTags, 1e-5, "BERT P=2 x D=2, distributed optimizer");
}

// The original BERT (embedding LayerNorm on the first stage, no final LayerNorm) without the binary head.
TEST_F(BertPipeline, OriginalFlavourWithoutBinaryHead) {
  // (its own samples-map cache: Megatron's cache names do not record the binary-head setting, and the maps differ)
  const Flags flags = {{"--bert-post-layernorm", ""}, {"--bert-no-binary-head", ""}, {"--num-layers", "3"},
                       {"--train-iters", "12"}, {"--data-cache-path", dir_->file("cache-bert-no-binary-head")}};
  const ModelRun one = run10(*dir_, "bert", "post-single", 0, flags);
  Flags staged = flags;
  staged["--pipeline-model-parallel-size"] = "2";
  staged["--decoder-first-pipeline-num-layers"] = "1";
  staged["--decoder-last-pipeline-num-layers"] = "2";
  const ModelRun p2 = run10(*dir_, "bert", "post-p2", 2, staged);
  expect_same_losses(p2, one, {"lm loss", "grad-norm", "lm loss validation"}, 1e-5, "original BERT P=2 (1 + 2 layers)");
  EXPECT_EQ(p2.scalars.count("sop loss"), 0u);
}

TEST_F(BertPipeline, CheckpointFromOneLayoutResumesUnderAnother) {
  const std::string ckpt = dir_->file("ckpt");
  // T = 2 × P = 2 stops at 4; one process resumes to 7; P = 2 × D = 2 (distributed optimizer) resumes to 10.
  const ModelRun first = run10(*dir_, "bert", "first", 4,
                             {{"--pipeline-model-parallel-size", "2"}, {"--tensor-model-parallel-size", "2"},
                              {"--save", ckpt}, {"--exit-interval", "4"}});
  const ModelRun second = run10(*dir_, "bert", "second", 0, {{"--save", ckpt}, {"--load", ckpt}, {"--exit-interval", "7"}});
  const ModelRun third = run10(*dir_, "bert", "third", 4,
                             {{"--save", ckpt}, {"--load", ckpt}, {"--pipeline-model-parallel-size", "2"},
                              {"--use-distributed-optimizer", ""}});
  ModelRun resumed = first;
  ASSERT_NO_FATAL_FAILURE(append_resumed(resumed, {&second, &third}));
  expect_same_losses(resumed, *single_, {"lm loss", "sop loss", "grad-norm"}, 1e-5,
              "BERT T=2 x P=2 -> 1 process -> P=2 x D=2, resumed");
  // Each saved model is one whole Hugging Face MegatronBertForPreTraining (each tensor once, whole shapes).
  for (const char* iter : {"iter_0000004", "iter_0000007", "iter_0000010"}) {
    const std::string header = model_header(ckpt + "/" + iter + "/model.safetensors");
    for (const char* entry : {"\"bert.embeddings.word_embeddings.weight\":{\"dtype\":\"F32\",\"shape\":[3072,32]",
                              "\"bert.encoder.layer.0.attention.self.query.weight\":{\"dtype\":\"F32\",\"shape\":[32,32]",
                              "\"bert.encoder.layer.1.output.dense.weight\":{\"dtype\":\"F32\",\"shape\":[32,128]",
                              "\"cls.predictions.bias\":{\"dtype\":\"F32\",\"shape\":[3072]",
                              "\"cls.seq_relationship.weight\":{\"dtype\":\"F32\",\"shape\":[2,32]"})
      expect_once(header, entry, iter);
  }
}

// T5 (2 encoder and 2 decoder layers) split as Megatron splits it: stages before --pipeline-model-parallel-split-rank
// hold the encoder, the rest the decoder, the encoder's output travelling with the decoder's activations.
using T5Pipeline = PipelineSuite<kT5>;

const std::vector<std::string> kT5Tags = {"lm loss", "grad-norm", "lm loss validation", "lm loss test"};

TEST_F(T5Pipeline, EncoderAndDecoderStagesReproduceOneProcess) {
  ASSERT_NO_FATAL_FAILURE(expect_single_learns());
  // P = 2: the default split rank P/2 = 1, one encoder and one decoder stage.
  const ModelRun p2 = run10(*dir_, "t5", "p2", 2, {{"--pipeline-model-parallel-size", "2"}});
  expect_same_losses(p2, *single_, kT5Tags, 1e-5, "T5 P=2 (split rank 1)");
  EXPECT_NE(p2.output.find("pipeline parallel: 2 stages (layers per stage: encoder 2 | decoder 2)"),
            std::string::npos)
      << p2.output;
  // P = 4, split rank 2: a middle encoder stage, and a decoder stage that passes the encoder's output on.
  expect_same_losses(run10(*dir_, "t5", "p4", 4, {{"--pipeline-model-parallel-size", "4"},
                                         {"--pipeline-model-parallel-split-rank", "2"}}),
              *single_, kT5Tags, 1e-5, "T5 P=4 (split rank 2)");
}

TEST_F(T5Pipeline, CheckpointFromOneLayoutResumesUnderAnother) {
  const std::string ckpt = dir_->file("ckpt");
  // P = 2 stops at 4; one process resumes to 7; P = 3 with split rank 1 (the word table on three stages) to 10.
  const ModelRun first = run10(*dir_, "t5", "first", 2,
                             {{"--pipeline-model-parallel-size", "2"}, {"--save", ckpt}, {"--exit-interval", "4"}});
  const ModelRun second = run10(*dir_, "t5", "second", 0, {{"--save", ckpt}, {"--load", ckpt}, {"--exit-interval", "7"}});
  const ModelRun third = run10(*dir_, "t5", "third", 3,
                             {{"--save", ckpt}, {"--load", ckpt}, {"--pipeline-model-parallel-size", "3"},
                              {"--pipeline-model-parallel-split-rank", "1"}});
  ModelRun resumed = first;
  ASSERT_NO_FATAL_FAILURE(append_resumed(resumed, {&second, &third}));
  expect_same_losses(resumed, *single_, {"lm loss", "grad-norm"}, 1e-5, "T5 P=2 -> 1 process -> P=3 (split 1), resumed");
  for (const char* iter : {"iter_0000004", "iter_0000010"}) {
    const std::string header = model_header(ckpt + "/" + iter + "/model.safetensors");
    for (const char* entry :
         {"\"language_model.embedding.word_embeddings.weight\":{\"dtype\":\"F32\",\"shape\":[3200,32]",
          "\"language_model.embedding.position_embeddings.weight\":{\"dtype\":\"F32\",\"shape\":[64,32]",
          "\"language_model.encoder.final_norm.weight\":{\"dtype\":\"F32\",\"shape\":[32]",
          "\"language_model.decoder.layers.1.inter_attention.key_value.weight\":{\"dtype\":\"F32\",\"shape\":[64,32]",
          "\"lm_head.bias\":{\"dtype\":\"F32\",\"shape\":[3200]"})
      expect_once(header, entry, iter);
  }
}

// --bf16, --fp16 and activation recomputation inside BERT and T5 stages, as GPT's (test_train_pipeline.cpp): stages
// exchange fp32 copies of their bf16/fp16 activations and gradients (exact), so P = 2 tracks one mixed-precision
// process; recomputation inside a stage (full: chunks of the stage's own layers, here more layers per chunk than the
// stage holds too; selective: the attention cores) gives the stages' losses and gradient norms bit for bit, over 6
// iterations (each drawing new dropout masks that the recomputed forward must redraw: 10 would only repeat the
// bitwise claim).
void expect_mixed_precision_and_recomputation_in_stages(const TempDir& dir, const std::string& model,
                                                        const ModelRun& fp32_single) {
  const Flags p2 = {{"--pipeline-model-parallel-size", "2"}};
  const std::vector<std::string> tags = {"lm loss", "grad-norm", "lm loss validation"};
  for (const Flags& precision : {Flags{{"--bf16", ""}}, Flags{{"--fp16", ""}, {"--initial-loss-scale", "65536"}}}) {
    const std::string name = precision.begin()->first.substr(2);
    const ModelRun one = run10(dir, model, name + "-single", 0, precision);
    Flags staged = precision;
    staged.insert(p2.begin(), p2.end());
    const ModelRun p = run10(dir, model, name + "-p2", 2, staged);
    expect_same_losses(p, one, tags, 1e-5, model + " " + name + " P=2 against one " + name + " process");
    ASSERT_TRUE(p.scalars.count("lm loss")) << p.output;
    EXPECT_GT(max_relative_difference(p.scalars.at("lm loss"), fp32_single.scalars.at("lm loss")), 1e-6)
        << model << " " << name << " ran as fp32";
  }
  Flags p2_short = p2;
  p2_short["--train-iters"] = "6";
  p2_short["--eval-interval"] = "3";
  const ModelRun plain = run10(dir, model, "rc-plain", 2, p2_short);
  ASSERT_EQ(plain.status, 0) << plain.output;
  ASSERT_EQ(plain.scalars.count("lm loss") ? plain.scalars.at("lm loss").size() : 0u, 6u) << plain.output;
  for (const Flags& extra : {Flags{{"--recompute-granularity", "full"}, {"--recompute-method", "uniform"},
                                   {"--recompute-num-layers", "2"}},
                             Flags{{"--recompute-granularity", "full"}, {"--recompute-method", "block"},
                                   {"--recompute-num-layers", "1"}},
                             Flags{{"--recompute-activations", ""}}}) {
    Flags flags = p2_short;
    flags.insert(extra.begin(), extra.end());
    const ModelRun r = run10(dir, model, "rc", 2, flags);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("activation recomputation:"), std::string::npos) << r.output;
    for (const char* tag : {"lm loss", "grad-norm"}) {
      ASSERT_TRUE(r.scalars.count(tag) && plain.scalars.count(tag)) << tag;
      EXPECT_EQ(r.scalars.at(tag), plain.scalars.at(tag)) << model << " " << extra.begin()->first << " " << tag;
    }
  }
}

TEST_F(BertPipeline, MixedPrecisionAndRecomputationInsideStages) {
  ASSERT_NO_FATAL_FAILURE(expect_single_learns());
  expect_mixed_precision_and_recomputation_in_stages(*dir_, "bert", *single_);
}

TEST_F(T5Pipeline, MixedPrecisionAndRecomputationInsideStages) {
  ASSERT_NO_FATAL_FAILURE(expect_single_learns());
  expect_mixed_precision_and_recomputation_in_stages(*dir_, "t5", *single_);
}

TEST(T5PipelineLayout, SplitRanksThatDoNotFitFailAtOnce) {
  TempDir dir;
  const ModelRun bad = run10(dir, "t5", "bad", 0, {{"--pipeline-model-parallel-size", "2"},
                                                 {"--pipeline-model-parallel-split-rank", "2"}});
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("--pipeline-model-parallel-split-rank 2 must be in [1, 1]"), std::string::npos)
      << bad.output;
  const ModelRun odd = run10(dir, "t5", "odd", 0, {{"--pipeline-model-parallel-size", "3"},
                                                 {"--pipeline-model-parallel-split-rank", "1"},
                                                 {"--decoder-num-layers", "3"}});
  EXPECT_NE(odd.status, 0);
  EXPECT_NE(odd.output.find("--decoder-num-layers 3: the decoder's layers do not split evenly over its 2 pipeline"),
            std::string::npos)
      << odd.output;
  const ModelRun gpt_split = run10(dir, "bert", "split", 0, {{"--pipeline-model-parallel-split-rank", "1"}});
  EXPECT_NE(gpt_split.output.find("applies to train t5"), std::string::npos) << gpt_split.output;
}

}  // namespace
