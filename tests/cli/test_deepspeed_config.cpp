// DeepSpeed JSON configs on lmforge's options (cli/flags/deepspeed_config.h): DeepSpeed's batch arithmetic and its
// consistency check, the fp16, zero_optimization, optimizer and scheduler blocks, and one test per error case
// (malformed JSON, wrong types, stage 3, DeepSpeed's Lamb, Adam without adam_w_mode, batch inconsistencies, a key
// conflicting with a flag, a scheduler with Megatron's schedule flags, fp16 and bf16 blocks together, a number beyond
// 64 bits, a directory given as the file) plus the one-line warning listing unknown keys and the JSON's ZeRO stage
// winning over --zero-stage.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "cli/flags/deepspeed_config.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::testing::TempDir;
using lmforge::cli::apply_deepspeed_config;
using lmforge::cli::GivenFlags;
using lmforge::cli::read_deepspeed_config;
using lmforge::train::TrainOptions;

struct Applied {
  TrainOptions o;
  std::string notices;
};

// Reads `json` and applies it on `world` ranks with the flags in `given` on the command line.
Applied apply(const std::string& json, int world = 1, std::set<std::string> given = {}, TrainOptions o = {}) {
  TempDir dir;
  lmforge::testing::write_file(dir.file("ds.json"), json);
  std::ostringstream notices;
  GivenFlags flags;
  for (const std::string& f : given) flags.note(f, f);
  apply_deepspeed_config(read_deepspeed_config(dir.file("ds.json")), o, world, flags, notices);
  return {o, notices.str()};
}

std::string error_of(const std::string& json, int world = 1, std::set<std::string> given = {}, TrainOptions o = {}) {
  try {
    apply(json, world, given, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeepSpeedConfig, BatchSizesFollowDeepSpeedsRules) {
  // Two of three given: the third follows, with D = world / (tensor x pipeline).
  Applied a = apply(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2})", 4);
  EXPECT_EQ(a.o.micro_batch_size, 2);
  EXPECT_EQ(a.o.global_batch_size, 32);  // accumulation 4 on each of 4 ranks
  a = apply(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", 4);
  EXPECT_EQ(a.o.micro_batch_size, 4);
  a = apply(R"({"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2})", 2);
  EXPECT_EQ(a.o.global_batch_size, 12);
  a = apply(R"({"train_batch_size": 16})", 4);  // accumulation 1
  EXPECT_EQ(a.o.micro_batch_size, 4);
  TrainOptions tp2;
  tp2.tensor_model_parallel_size = 2;
  a = apply(R"({"train_micro_batch_size_per_gpu": 2})", 4, {}, tp2);  // D = 2
  EXPECT_EQ(a.o.global_batch_size, 4);
  a = apply(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3})", 4);
  EXPECT_EQ(a.o.global_batch_size, 24);
}

TEST(DeepSpeedConfig, InconsistentBatchesAreRefusedAsDeepSpeedRefusesThem) {
  const std::string e = error_of(
      R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3})", 4);
  EXPECT_NE(e.find("train_batch_size 32 != train_micro_batch_size_per_gpu 2 x gradient_accumulation_steps 3 x "
                   "data-parallel size 4"), std::string::npos) << e;
  EXPECT_NE(error_of(R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4})", 2).find("not a whole"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"train_batch_size": 0})").find("positive"), std::string::npos);
}

TEST(DeepSpeedConfig, AKeyAndAFlagDisagreeingIsAnErrorNamingBoth) {
  TrainOptions o;
  o.micro_batch_size = 8;
  std::string e = error_of(R"({"train_micro_batch_size_per_gpu": 4})", 1, {"--micro-batch-size"}, o);
  EXPECT_NE(e.find("train_micro_batch_size_per_gpu 4 conflicts with --micro-batch-size 8"), std::string::npos) << e;
  o.schedule.lr = 1e-4;
  e = error_of(R"({"optimizer": {"type": "Adam", "params": {"lr": 2e-4}}})", 1, {"--lr"}, o);
  EXPECT_NE(e.find("optimizer.params.lr 0.0002"), std::string::npos) << e;
  EXPECT_NE(e.find("--lr 0.0001"), std::string::npos) << e;
  o.clip_grad = 0.5;
  e = error_of(R"({"gradient_clipping": 1.0})", 1, {"--clip-grad"}, o);
  EXPECT_NE(e.find("--clip-grad 0.5"), std::string::npos) << e;
  // Agreeing is fine.
  o.micro_batch_size = 4;
  EXPECT_EQ(apply(R"({"train_micro_batch_size_per_gpu": 4})", 1, {"--micro-batch-size"}, o).o.micro_batch_size, 4);
  // A JSON scheduler and Megatron's schedule flags.
  e = error_of(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}})", 1,
               {"--lr-decay-style"});
  EXPECT_NE(e.find("--lr-decay-style"), std::string::npos) << e;
  e = error_of(R"({"zero_optimization": {"stage": 0}})", 1, {"--use-distributed-optimizer"});
  EXPECT_NE(e.find("--use-distributed-optimizer"), std::string::npos) << e;
}

TEST(DeepSpeedConfig, BlocksMapToTheOptions) {
  const Applied a = apply(R"({
    "train_micro_batch_size_per_gpu": 2, "gradient_clipping": 0.7, "steps_per_print": 5,
    "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 3, "min_loss_scale": 2},
    "zero_optimization": {"stage": 2, "reduce_bucket_size": 5000, "allgather_bucket_size": 7000,
                          "reduce_scatter": true, "overlap_comm": true, "contiguous_gradients": true},
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-6, "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_max_lr": 3e-4, "warmup_num_steps": 10,
                                                       "total_num_steps": 100, "warmup_type": "linear"}}})");
  const TrainOptions& o = a.o;
  EXPECT_EQ(o.micro_batch_size, 2);
  EXPECT_EQ(o.global_batch_size, 2);
  EXPECT_EQ(o.clip_grad, 0.7);
  EXPECT_TRUE(o.precision.fp16);
  EXPECT_EQ(o.precision.loss_scale, 0.0);
  EXPECT_EQ(o.precision.initial_loss_scale, 65536.0);  // DeepSpeed's initial_scale_power 16
  EXPECT_EQ(o.precision.loss_scale_window, 500);
  EXPECT_EQ(o.precision.hysteresis, 3);
  EXPECT_EQ(o.precision.min_loss_scale, 2.0);
  EXPECT_EQ(o.zero_stage, 2);
  EXPECT_TRUE(o.use_distributed_optimizer);
  EXPECT_EQ(o.ddp_bucket_size, 5000);
  EXPECT_EQ(o.optimizer.kind, "adam");
  EXPECT_EQ(o.optimizer.beta2, 0.95);
  EXPECT_EQ(o.optimizer.eps, 1e-6);
  EXPECT_EQ(o.schedule.weight_decay, 0.1);
  ASSERT_TRUE(o.schedule.deepspeed_lr.has_value());
  EXPECT_EQ(o.schedule.deepspeed_lr->type, "WarmupDecayLR");
  EXPECT_EQ(o.schedule.deepspeed_lr->total_num_steps, 100);
  EXPECT_EQ(o.schedule.deepspeed_lr->warmup_type, "linear");
  EXPECT_NE(a.notices.find("allgather_bucket_size 7000"), std::string::npos) << a.notices;
  EXPECT_NE(a.notices.find("steps_per_print"), std::string::npos) << a.notices;
  EXPECT_EQ(a.notices.find("warning"), std::string::npos) << a.notices;  // every key known
  EXPECT_EQ(apply(R"({"fp16": {"enabled": true, "initial_scale_power": 12}})").o.precision.initial_loss_scale, 4096.0);
  // No gradient_clipping: DeepSpeed does not clip.
  const Applied none = apply(R"({"train_batch_size": 4})");
  EXPECT_EQ(none.o.clip_grad, 0.0);
  EXPECT_NE(none.notices.find("no gradient_clipping"), std::string::npos) << none.notices;
}

TEST(DeepSpeedConfig, UnknownKeysAreListedInOneWarning) {
  const Applied a = apply(R"({"train_batch_size": 4, "gradient_clipping": 1.0, "flops_profiler": {"enabled": true},
                              "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}},
                              "optimizer": {"type": "Adam", "params": {"lr": 1e-4, "foo": 1}}})");
  size_t lines = 0;
  for (size_t p = a.notices.find("warning"); p != std::string::npos; p = a.notices.find("warning", p + 1)) lines++;
  EXPECT_EQ(lines, 1u) << a.notices;
  for (const char* key : {"flops_profiler", "zero_optimization.offload_optimizer", "optimizer.params.foo"})
    EXPECT_NE(a.notices.find(key), std::string::npos) << key << "\n" << a.notices;
}

TEST(DeepSpeedConfig, RefusedConfigsSayWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"train_batch_size": 4,)", "not valid JSON"},
      {R"({"train_batch_size": "4"})", "train_batch_size: expected a number"},
      {R"({"train_batch_size": 4.5})", "expected a whole number"},
      {R"({"zero_optimization": {"stage": 3}})", "ZeRO stage 3"},
      {R"({"zero_optimization": []})", "zero_optimization: expected an object"},
      {R"({"optimizer": {"type": "Lamb", "params": {"lr": 1e-3}}})", "DeepSpeed's Lamb is its own LAMB variant"},
      {R"({"optimizer": {"type": "SGD"}})", "'SGD' is not implemented"},
      {R"({"optimizer": {"params": {"lr": 1e-3}}})", "optimizer: needs a \"type\""},
      {R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})", "adam_w_mode: false"},
      {R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9]}}})", "two values"},
      {R"({"scheduler": {"type": "OneCycle"}})", "OneCycle"},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 5, "warmup_num_steps": 10}}})",
       "must exceed the warm-up steps"},
      {R"({"fp16": {"enabled": true, "consecutive_hysteresis": true}})", "consecutive_hysteresis"},
      {R"({"gradient_accumulation_steps": 2})", "gradient_accumulation_steps needs"},
  };
  for (const auto& [json, want] : cases) {
    const std::string e = error_of(json);
    EXPECT_NE(e.find(want), std::string::npos) << json << "\n -> " << e;
    EXPECT_NE(e.find("ds.json"), std::string::npos) << e;  // the file is named
  }
  EXPECT_NE(error_of("").find("ds.json"), std::string::npos);
  try {
    read_deepspeed_config("/nonexistent/ds.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ds.json"), std::string::npos);
  }
}

}  // namespace

namespace {

// Issue 28: DeepSpeed's engine takes the ZeRO stage from the JSON whatever Megatron-DeepSpeed's --zero-stage says.
TEST(DeepSpeedConfig, JsonZeroStageWinsOverTheFlagWithANoticeNamingBoth) {
  TrainOptions o;
  o.zero_stage = 0;
  const Applied a = apply(R"({"zero_optimization": {"stage": 2}})", 1, {"--zero-stage"}, o);
  EXPECT_EQ(a.o.zero_stage, 2);
  EXPECT_TRUE(a.o.use_distributed_optimizer);
  EXPECT_NE(a.notices.find("zero_optimization.stage 2 wins over --zero-stage 0 on the command line"),
            std::string::npos) << a.notices;
  o.zero_stage = 2;  // agreeing: no notice
  EXPECT_EQ(apply(R"({"zero_optimization": {"stage": 2}})", 1, {"--zero-stage"}, o).notices.find("wins"),
            std::string::npos);
}

TEST(DeepSpeedConfig, Fp16AndBf16BlocksBothEnabledAreNamedAsTheFilesBlocks) {
  std::string e = error_of(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})");
  EXPECT_NE(e.find("\"fp16\": {\"enabled\": true} and \"bf16\": {\"enabled\": true} are both enabled"),
            std::string::npos) << e;
  EXPECT_EQ(e.find("--fp16"), std::string::npos) << e;
  e = error_of(R"({"fp16": {"enabled": true}, "bfloat16": {"enabled": true}})");
  EXPECT_NE(e.find("\"bfloat16\": {\"enabled\": true}"), std::string::npos) << e;
  // One block and the other precision's flag on the command line.
  TrainOptions o;
  o.precision.bf16 = true;
  e = error_of(R"({"fp16": {"enabled": true}})", 1, {"--bf16"}, o);
  EXPECT_NE(e.find("\"fp16\": {\"enabled\": true} and --bf16 on the command line"), std::string::npos) << e;
}

TEST(DeepSpeedConfig, NumberBeyond64BitsNamesTheKeyAndTheRange) {
  std::string e = error_of(R"({"train_batch_size": 8, "zero_optimization": {"stage": 1,
                              "reduce_bucket_size": 18446744073709551620}})");
  EXPECT_NE(e.find("zero_optimization.reduce_bucket_size: 18446744073709551620 is out of range (integers are read "
                   "from -9223372036854775808 to 18446744073709551615"), std::string::npos) << e;
  e = error_of(R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9, 1e400]}}})");
  EXPECT_NE(e.find("optimizer.params.betas[1]: 1e400 is out of range (beyond the largest double"), std::string::npos)
      << e;
  e = error_of(R"({"train_batch_size": 18446744073709551615})");  // read, but past what a count may be
  EXPECT_NE(e.find("train_batch_size: expected a whole number from -9e15 to 9e15"), std::string::npos) << e;
  // Plain malformed JSON stays "not valid JSON".
  EXPECT_NE(error_of(R"({"train_batch_size": 8,})").find("not valid JSON"), std::string::npos);
}

TEST(DeepSpeedConfig, ConfigThatIsADirectoryIsSaidToBeOne) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("ds.json"));
  try {
    read_deepspeed_config(dir.file("ds.json"));
    ADD_FAILURE() << "a directory was read as a config";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("ds.json") + ": is a directory, not a file"), std::string::npos)
        << e.what();
  }
}

}  // namespace
