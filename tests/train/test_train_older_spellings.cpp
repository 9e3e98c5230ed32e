// Scripts people already have, run by `lmforge train gpt` with sizes shrunk and everything else unchanged:
// Megatron v1.1.5's pretrain_gpt2_distributed.sh flag set and DeepSpeedExamples' ds_pretrain_gpt2.sh (with a
// DeepSpeed JSON config) give the losses of the equivalent run in today's flags; the Megatron-DeepSpeed README's
// GPT arguments run and log the loss scale and the recomputation; a flag given twice takes the last value; ZeRO
// stage 2 from a DeepSpeed config on 2 ranks reproduces one process and holds half the gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "train_run_util.h"

namespace {

using namespace train_runs;
using lmforge::testing::write_file;

void expect_same_losses(const TrainRun& got, const TrainRun& want, const std::string& what) {
  ASSERT_EQ(got.status, 0) << what << ":\n" << got.output;
  ASSERT_EQ(want.status, 0) << want.output;
  // (--fp16 from Megatron's initial scale 2^32: the first overflowing iterations are skipped and log no loss.)
  ASSERT_GE(got.loss.size(), 3u) << got.output;
  ASSERT_EQ(got.loss.size(), want.loss.size());
  EXPECT_EQ(std::memcmp(got.loss.data(), want.loss.data(), got.loss.size() * sizeof(float)), 0) << what;
  ASSERT_EQ(got.grad_norm.size(), want.grad_norm.size());  // (bytes: skipped fp16 iterations log NaN norms)
  EXPECT_EQ(std::memcmp(got.grad_norm.data(), want.grad_norm.data(), got.grad_norm.size() * sizeof(float)), 0) << what;
  EXPECT_EQ(got.valid, want.valid) << what;
}

bool has(const TrainRun& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

// Megatron v1.1.5 examples/pretrain_gpt2_distributed.sh with the model shrunk: as it is in one process (--fp16 runs
// are compared in one process: with --fp16 on several ranks the skipped iterations vary from run to run, also with
// today's flags alone), and without --fp16 on 2 ranks, where v1's global batch is --batch-size x 2 (v1 had no
// accumulation).
TEST(OlderSpellings, MegatronV1ScriptGivesTheLossesOfTodaysFlags) {
  TempDir dir;
  const Flags v1 = {{"--micro-batch-size", "-"}, {"--global-batch-size", "-"}, {"--lr-warmup-iters", "-"},
                    {"--model-parallel-size", "1"}, {"--batch-size", "2"}, {"--lr-decay-iters", "16"},
                    {"--save", dir.file("ckpt-v1")}, {"--load", dir.file("ckpt-v1")}, {"--data-impl", "mmap"},
                    {"--distributed-backend", "nccl"}, {"--lr-decay-style", "cosine"}, {"--min-lr", "1.0e-5"},
                    {"--weight-decay", "1e-2"}, {"--clip-grad", "1.0"}, {"--warmup", ".01"},
                    {"--checkpoint-activations", ""}, {"--save-interval", "10000"}, {"--fp16", ""},
                    {"--train-iters", "20"}, {"--eval-interval", "10"}};  // fp16 from 2^32: skips before it trains
  const Flags today = {{"--micro-batch-size", "2"}, {"--global-batch-size", "4"}, {"--lr-warmup-iters", "-"},
                       {"--tensor-model-parallel-size", "1"}, {"--lr-decay-iters", "16"},
                       {"--save", dir.file("ckpt-today")}, {"--load", dir.file("ckpt-today")},
                       {"--lr-decay-style", "cosine"}, {"--min-lr", "1.0e-5"}, {"--weight-decay", "1e-2"},
                       {"--clip-grad", "1.0"}, {"--lr-warmup-fraction", ".01"},
                       {"--recompute-granularity", "full"}, {"--recompute-method", "uniform"},
                       {"--save-interval", "10000"}, {"--fp16", ""},
                       {"--train-iters", "20"}, {"--eval-interval", "10"}};
  Flags today1 = today;
  today1["--global-batch-size"] = "2";
  const TrainRun old_run = train(dir, "v1", 0, v1), new_run = train(dir, "today", 0, today1);
  expect_same_losses(old_run, new_run, "Megatron v1.1.5 flags");
  Flags v1_fp32 = v1, today_fp32 = today;
  v1_fp32["--fp16"] = today_fp32["--fp16"] = "-";
  v1_fp32["--save"] = v1_fp32["--load"] = dir.file("ckpt-v1-2");
  today_fp32["--save"] = today_fp32["--load"] = dir.file("ckpt-today-2");
  const TrainRun old2 = train(dir, "v1-2", 2, v1_fp32), new2 = train(dir, "today-2", 2, today_fp32);
  expect_same_losses(old2, new2, "Megatron v1.1.5 flags on 2 ranks, fp32");
  EXPECT_TRUE(has(old2, "global batch size:     4")) << old2.output;
  EXPECT_TRUE(has(old_run, "notice: --distributed-backend nccl")) << old_run.output;
  EXPECT_TRUE(has(old_run, "activation recomputation: full")) << old_run.output;
}

// DeepSpeedExamples Megatron-LM v1.1.5 examples/ds_pretrain_gpt2.sh (its gpt_options, deepspeed_options and
// chkp_opt) and a DeepSpeed config in the shape of its ds_zero_stage_2_config.json, shrunk, in one process (--fp16:
// see above); DeepSpeed derives 2 accumulation steps of micro-batch 2 from train_batch_size 4.
TEST(OlderSpellings, DeepSpeedScriptAndConfigGiveTheLossesOfTodaysFlags) {
  TempDir dir;
  write_file(dir.file("ds_config.json"), R"({
  "train_batch_size": 4,
  "gradient_accumulation_steps": 2,
  "steps_per_print": 1,
  "zero_optimization": {"stage": 1, "allgather_partitions": true, "reduce_scatter": true,
                        "allgather_bucket_size": 50000, "reduce_bucket_size": 5000, "overlap_comm": true,
                        "contiguous_gradients": true},
  "optimizer": {"type": "Adam", "params": {"lr": 0.003, "max_grad_norm": 1.0, "betas": [0.9, 0.95]}},
  "gradient_clipping": 1.0,
  "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1},
  "wall_clock_breakdown": true,
  "zero_allow_untested_optimizer": false
})");
  const Flags ds = {{"--micro-batch-size", "-"}, {"--global-batch-size", "-"}, {"--lr-warmup-iters", "-"},
                    {"--lr", "-"}, {"--clip-grad", "-"}, {"--model-parallel-size", "1"}, {"--batch-size", "2"},
                    {"--lr-decay-iters", "16"}, {"--data-impl", "mmap"}, {"--distributed-backend", "nccl"},
                    {"--lr-decay-style", "cosine"}, {"--min-lr", "1.0e-5"}, {"--weight-decay", "1e-2"},
                    {"--warmup", "0.01"}, {"--checkpoint-activations", ""}, {"--fp16", ""},
                    {"--deepspeed", ""}, {"--deepspeed_config", dir.file("ds_config.json")}, {"--zero-stage", "1"},
                    {"--zero-reduce-bucket-size", "5000"}, {"--zero-allgather-bucket-size", "50000"},
                    {"--zero-contigious-gradients", ""}, {"--zero-reduce-scatter", ""},
                    {"--checkpoint-num-layers", "1"}, {"--partition-activations", ""}, {"--checkpoint-in-cpu", ""},
                    {"--synchronize-each-layer", ""}, {"--contigious-checkpointing", ""}};
  const Flags today = {{"--micro-batch-size", "2"}, {"--global-batch-size", "4"}, {"--lr-warmup-iters", "-"},
                       {"--lr", "0.003"}, {"--clip-grad", "1.0"}, {"--adam-beta2", "0.95"},
                       {"--lr-decay-iters", "16"}, {"--lr-decay-style", "cosine"}, {"--min-lr", "1.0e-5"},
                       {"--weight-decay", "1e-2"}, {"--lr-warmup-fraction", "0.01"},
                       {"--recompute-granularity", "full"}, {"--recompute-method", "uniform"}, {"--fp16", ""},
                       {"--initial-loss-scale", "65536"}, {"--use-distributed-optimizer", ""},
                       {"--ddp-bucket-size", "5000"}};
  const TrainRun ds_run = train(dir, "ds", 0, ds), new_run = train(dir, "today", 0, today);
  expect_same_losses(ds_run, new_run, "DeepSpeedExamples ds_pretrain_gpt2.sh flags + JSON");
  for (const char* notice : {"--partition-activations", "--checkpoint-in-cpu", "--synchronize-each-layer",
                             "--contigious-checkpointing", "--zero-reduce-scatter", "--zero-contigious-gradients",
                             "--zero-allgather-bucket-size", "steps_per_print"})
    EXPECT_TRUE(has(ds_run, notice)) << notice << "\n" << ds_run.output;
  EXPECT_TRUE(has(ds_run, "loss scale: 65536.0")) << ds_run.output;  // DeepSpeed's initial_scale_power 16
  EXPECT_TRUE(has(ds_run, "distributed adam optimizer")) << ds_run.output;
  EXPECT_TRUE(has(ds_run, "(2 micro-batches of 2)")) << ds_run.output;
}

// The GPT arguments of Megatron-DeepSpeed's README, sizes shrunk, on a copy of the sample dataset (the index
// cache is written beside it, as Megatron does).
TEST(OlderSpellings, MegatronDeepSpeedReadmeArgumentsRun) {
  TempDir dir;
  for (const char* ext : {".bin", ".idx"})
    fs::copy_file(shared_path("data/sample/sample_gpt2_text_document") + ext,
                  dir.file(std::string("my-gpt2_text_document") + ext));
  fs::copy_file(shared_path("data/vocab/gpt2-vocab.json"), dir.file("gpt2-vocab.json"));
  fs::copy_file(shared_path("data/vocab/gpt2-merges.txt"), dir.file("gpt2-merges.txt"));
  const std::string args =
      "--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --max-position-embeddings 32 "
      "--micro-batch-size 4 --global-batch-size 8 --lr 0.00015 --train-iters 12 --lr-decay-iters 10 "
      "--lr-decay-style cosine --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --lr-warmup-fraction .01 "
      "--fp16 --log-interval 2 --save-interval 6 --eval-interval 6 --eval-iters 1 --checkpoint-activations "
      "--save ckpt --load ckpt --data-path my-gpt2_text_document";
  auto run = [&](const std::string& extra) {
    return run_command("cd " + dir.path() + " && timeout 120 env OMP_NUM_THREADS=1 " + LMFORGE_EXE + " train gpt " +
                       args + extra);
  };
  // Stopped after the checkpoint of iteration 6, then the same command line resumes from it (--load ckpt). The
  // README's --fp16 starts the scale at Megatron's 2^32, where this tiny run would skip every one of its iterations
  // (an error since issue 31): the scale starts at 2^16, as DeepSpeed's does.
  const auto first = run(" --exit-interval 6 --initial-loss-scale 65536");
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("activation recomputation: full, uniform, 1 layer per chunk"), std::string::npos)
      << first.output;
  EXPECT_TRUE(std::regex_search(first.output, std::regex("loss scale: [0-9]+\\.[0-9] \\| grad norm"))) << first.output;
  EXPECT_NE(first.output.find("iteration        6/      12"), std::string::npos) << first.output;
  EXPECT_EQ(first.output.find("iteration       12/"), std::string::npos) << first.output;
  EXPECT_TRUE(fs::exists(dir.file("ckpt/iter_0000006"))) << first.output;
  const auto again = run(" --initial-loss-scale 65536");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("iteration       12/      12"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("iteration        2/"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("loss scale:"), std::string::npos) << again.output;
}

// argparse: a flag given twice takes the last value, a list flag given twice the last list.
TEST(OlderSpellings, AFlagGivenTwiceTakesTheLastValue) {
  TempDir dir;
  const std::string base = std::string("timeout 120 ") + LMFORGE_EXE + " train gpt --num-layers 1 --hidden-size 8 "
      "--num-attention-heads 2 --micro-batch-size 1 --lr 1e-3 --train-iters 1 --split 949,50,1 --vocab-file " +
      shared_path("data/vocab/gpt2-vocab.json") + " --merge-file " + shared_path("data/vocab/gpt2-merges.txt") +
      " --data-cache-path " + dir.file("cache") + " --print-samples 1";
  const auto r = run_command(base + " --seq-length 16 --data-path /nonexistent/a /nonexistent/b --seq-length 24 "
                             "--data-path " + shared_path("data/sample/sample_gpt2_text_document") +
                             " --max-position-embeddings 8 --max-position-embeddings 32");
  ASSERT_EQ(r.status, 0) << r.output;
  // The first sample of the train split holds seq-length + 1 tokens: 25 (the last --seq-length).
  const size_t at = r.output.find("\"text\": [");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string ids = r.output.substr(at, r.output.find(']', at) - at);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ','), 24) << ids;
  // Without the repeat the same flags are still checked: the last value decides, the first is gone.
  const auto bad = run_command(base + " --seq-length 24 --data-path " +
                               shared_path("data/sample/sample_gpt2_text_document") + " --data-path /nonexistent/x");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("/nonexistent/x"), std::string::npos) << bad.output;
}

// "gradients held after the backward: X MB" from rank 0's log.
double held_gradient_megabytes(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("gradients (whole|sharded \\(ZeRO-2\\)): ([0-9.]+) MB held"))) return -1;
  return std::stod(m[2]);
}

TEST_F(TrainParallel, ZeroStage2FromADeepSpeedConfigReproducesOneProcess) {
  // DeepSpeed derives the accumulation: 4 = 1 x 2 x 2 ranks, 1 x 1 x 4 ranks.
  write_file(dir_->file("zero2.json"),
             R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0,
                 "zero_optimization": {"stage": 2, "reduce_bucket_size": 5000}})");
  const Flags accumulate = {{"--micro-batch-size", "-"}, {"--global-batch-size", "-"}, {"--clip-grad", "-"},
                            {"--deepspeed", ""}, {"--deepspeed_config", dir_->file("zero2.json")}};
  const TrainRun zero2 = train(*dir_, "zero2", 2, accumulate);
  expect_parity(zero2, *single_, 1e-6, "ZeRO-2 on 2 ranks, 2 micro-batches each");
  EXPECT_TRUE(zero2.output.find("sharded (ZeRO-2)") != std::string::npos) << zero2.output;
  // With one micro-batch per rank the reduction is the one of stage 1: bit for bit its losses.
  const TrainRun zero1 = train(*dir_, "zero1-4", 4, {{"--use-distributed-optimizer", ""}, {"--ddp-bucket-size", "5000"}});
  const TrainRun zero2x4 = train(*dir_, "zero2-4", 4, accumulate);
  expect_parity(zero2x4, *single_, 1e-6, "ZeRO-2 on 4 ranks");
  EXPECT_EQ(zero2x4.loss, zero1.loss);
  EXPECT_EQ(zero2x4.grad_norm, zero1.grad_norm);
  const double whole = held_gradient_megabytes(zero1.output), shard = held_gradient_megabytes(zero2x4.output);
  ASSERT_GT(whole, 0) << zero1.output;
  // (the log prints 3 decimals of ~0.24 and ~0.06 MB: the ratio is known to 0.01)
  EXPECT_NEAR(shard / whole, 0.25, 0.01) << zero2x4.output;
}

}  // namespace
