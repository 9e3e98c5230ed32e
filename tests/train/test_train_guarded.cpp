// Training on the guarded test device (kernels::Device::GUARDED: the CPU's kernels over memory the process cannot
// touch outside the device's own copies and ops, so any host access to device memory segfaults where it happens)
// against the same runs on `cpu`: every iteration's losses, gradient norm and loss scale, and every evaluation,
// bitwise equal. Covered: GPT in one process (fp32, bf16, fp16 with dynamic loss scaling and its skipped steps, the
// distributed optimizer on one rank, resuming from a checkpoint), BERT (LAMB, the sentence-order head) and T5 in
// one process (also with full recomputation and in bf16), and under a 2-rank mpirun job (the test launches itself; the worker test only runs inside that job)
// data parallelism with replicated AdamW, ZeRO-1 and ZeRO-2, tensor parallelism, and two pipeline stages (the
// activations between them and the tied embedding's gradient sum as device tensors), and BERT and T5 under tensor
// and pipeline parallelism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/mpi_session.h"
#include "dist/mpi_test_util.h"
#include "kernels/backend.h"
#include "test_util.h"
#include "trainer_test_util.h"

namespace {

using namespace trainer_tests;
using lmforge::kernels::Device;
using lmforge::train::EvalRecord;
using lmforge::train::IterationRecord;
using lmforge::testing::mpirun_prefix;
using lmforge::testing::run_command;
namespace dist = lmforge::dist;

struct DeviceRun {
  std::vector<IterationRecord> history;
  std::vector<EvalRecord> evals;
  std::string log;
};

DeviceRun train_on(TrainOptions o, Device device, dist::Communicator* comm = nullptr) {
  o.device = device;
  std::ostringstream log;
  std::unique_ptr<Trainer> t =
      comm ? std::make_unique<Trainer>(o, log, *comm) : std::make_unique<Trainer>(o, log);
  EXPECT_EQ(t->model().params().device, device) << "the model's parameters live on the device asked for";
  EXPECT_EQ(t->model().grads().device, device);
  t->run();
  return {t->history(), t->evaluations(), log.str()};
}

// Bitwise: the same bits (NaN norms of overflowing fp16 steps included).
template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

void expect_same_run(const DeviceRun& got, const DeviceRun& want, const std::string& what) {
  ASSERT_EQ(got.history.size(), want.history.size()) << what << "\n" << got.log;
  ASSERT_FALSE(want.history.empty()) << what;
  for (size_t i = 0; i < want.history.size(); i++) {
    const IterationRecord &g = got.history[i], &w = want.history[i];
    EXPECT_TRUE(same_bits(g.loss, w.loss)) << what << " iteration " << w.iteration << ": " << g.loss << " against "
                                           << w.loss;
    EXPECT_EQ(g.losses.size(), w.losses.size()) << what;
    for (size_t k = 0; k < std::min(g.losses.size(), w.losses.size()); k++)
      EXPECT_TRUE(same_bits(g.losses[k], w.losses[k])) << what << " iteration " << w.iteration << " loss " << k;
    EXPECT_TRUE(same_bits(g.grad_norm, w.grad_norm))
        << what << " iteration " << w.iteration << ": grad norm " << g.grad_norm << " against " << w.grad_norm;
    EXPECT_EQ(g.loss_scale, w.loss_scale) << what << " iteration " << w.iteration;
    EXPECT_EQ(g.skipped, w.skipped) << what << " iteration " << w.iteration;
    EXPECT_EQ(g.lr, w.lr) << what << " iteration " << w.iteration;
  }
  ASSERT_EQ(got.evals.size(), want.evals.size()) << what;
  for (size_t i = 0; i < want.evals.size(); i++)
    EXPECT_EQ(got.evals[i].losses, want.evals[i].losses) << what << " " << want.evals[i].name;
}

// tiny_vocab_options(), shorter: the guarded device pays an mprotect per op and per copy.
TrainOptions tiny_gpt(const TempDir& tmp) {
  TrainOptions o = tiny_vocab_options(tmp);
  o.schedule.train_iters = 4;
  o.eval_interval = 2;
  o.threads = 1;
  return o;
}

TEST(GuardedTraining, GptTrainsWithTheCpuLossesBitwise) {
  TempDir tmp;
  const TrainOptions o = tiny_gpt(tmp);
  const DeviceRun cpu = train_on(o, Device::CPU), guarded = train_on(o, Device::GUARDED);
  expect_same_run(guarded, cpu, "gpt fp32");
  EXPECT_LT(cpu.history.back().loss, cpu.history.front().loss) << "training moved";
}

// Full recomputation (uniform chunks of one layer: every layer's forward again in the backward, from the saved
// chunk inputs) and selective recomputation of the attention cores, on the device.
TEST(GuardedTraining, GptRecomputationWithTheCpuLossesBitwise) {
  TempDir tmp;
  TrainOptions full = tiny_gpt(tmp);
  full.recompute_granularity = "full";
  full.recompute_method = "uniform";
  full.recompute_num_layers = 1;
  expect_same_run(train_on(full, Device::GUARDED), train_on(full, Device::CPU), "gpt full recomputation");
  TrainOptions selective = tiny_gpt(tmp);
  selective.recompute_granularity = "selective";
  expect_same_run(train_on(selective, Device::GUARDED), train_on(selective, Device::CPU), "gpt selective");
}

TEST(GuardedTraining, GptMixedPrecisionWithTheCpuLossesBitwise) {
  TempDir tmp;
  TrainOptions bf16 = tiny_gpt(tmp);
  bf16.precision.bf16 = true;
  expect_same_run(train_on(bf16, Device::GUARDED), train_on(bf16, Device::CPU), "gpt bf16");
  // fp16 with a dynamic scale from 2^20: the first steps overflow and are skipped (the fp16 rounding and the
  // overflow check of the gradients on the device), then the scale has come down and steps are taken.
  TrainOptions fp16 = tiny_gpt(tmp);
  fp16.precision.fp16 = true;
  fp16.precision.hysteresis = 1;
  fp16.precision.initial_loss_scale = 1048576.0;
  fp16.schedule.train_iters = 6;
  const DeviceRun cpu = train_on(fp16, Device::CPU);
  expect_same_run(train_on(fp16, Device::GUARDED), cpu, "gpt fp16");
  bool skipped = false, stepped = false;
  for (const IterationRecord& r : cpu.history) (r.skipped ? skipped : stepped) = true;
  EXPECT_TRUE(skipped && stepped) << "the fp16 run exercises both an overflow and an update\n" << cpu.log;
}

TEST(GuardedTraining, GptDistributedOptimizerOnOneRankAndLambAndSgd) {
  TempDir tmp;
  TrainOptions zero = tiny_gpt(tmp);
  zero.use_distributed_optimizer = true;
  zero.ddp_bucket_size = 5000;  // shards cut tensors: the state is gathered and scattered in pieces
  expect_same_run(train_on(zero, Device::GUARDED), train_on(zero, Device::CPU), "gpt distributed optimizer");
  TrainOptions lamb = tiny_gpt(tmp);
  lamb.optimizer.kind = "lamb";
  expect_same_run(train_on(lamb, Device::GUARDED), train_on(lamb, Device::CPU), "gpt lamb");
  TrainOptions sgd = tiny_gpt(tmp);
  sgd.optimizer.kind = "sgd";
  sgd.optimizer.sgd_momentum = 0.9;
  expect_same_run(train_on(sgd, Device::GUARDED), train_on(sgd, Device::CPU), "gpt sgd");
}

// A guarded run stopped after 2 iterations, saved, and resumed for 2 more (the checkpoint's weights and optimizer
// state go through the device's copies both ways) gives the uninterrupted cpu run's losses.
TEST(GuardedTraining, GptResumesFromACheckpointWithTheCpuLossesBitwise) {
  TempDir tmp;
  const TrainOptions o = tiny_gpt(tmp);
  const DeviceRun cpu = train_on(o, Device::CPU);
  TrainOptions b = o;
  b.save = tmp.file("ckpt");
  b.exit_interval = 2;
  const DeviceRun first = train_on(b, Device::GUARDED);
  ASSERT_EQ(first.history.size(), 2u) << first.log;
  ASSERT_TRUE(fs::exists(tmp.file("ckpt/iter_0000002/optimizer.safetensors")));
  b.load = b.save;
  b.save = tmp.file("ckpt-end");  // the load directory keeps iteration 2 only, for the cpu run below
  DeviceRun resumed = train_on(b, Device::GUARDED);
  ASSERT_NE(resumed.log.find("loaded checkpoint"), std::string::npos) << resumed.log;
  DeviceRun joined;
  joined.history = first.history;
  joined.history.insert(joined.history.end(), resumed.history.begin(), resumed.history.end());
  joined.evals = first.evals;
  joined.evals.insert(joined.evals.end(), resumed.evals.begin(), resumed.evals.end());
  joined.log = first.log + resumed.log;
  expect_same_run(joined, cpu, "gpt resumed on guarded");
  // And a cpu run loads the guarded run's checkpoint: the files are the same either way.
  const DeviceRun cpu_resumed = train_on(b, Device::CPU);
  expect_same_run(cpu_resumed, resumed, "cpu resumed from the guarded checkpoint");
}

// BERT (LAMB, masked LM + sentence order) and T5 (encoder-decoder) on Megatron's sentence-level sample dataset.
TrainOptions tiny_masked_lm(const TempDir& tmp, const std::string& model) {
  TrainOptions o = tiny_gpt(tmp);
  o.model_type = model;
  o.tokenizer = {};
  o.tokenizer.type = "BertWordPieceLowerCase";
  o.tokenizer.vocab_file = shared_path("data/vocab/bert-base-uncased-vocab.txt");
  o.data_path = {shared_path("data/sample/sample_bert_text_sentence")};
  o.data_cache_path = tmp.file("cache-" + model);
  o.max_position_embeddings = 64;
  o.seq_length = 64;
  if (model == "bert") {
    o.optimizer.kind = "lamb";
  } else {
    o.decoder_seq_length = 32;
    o.tokenizer.vocab_extra_ids = 100;
  }
  return o;
}

TEST(GuardedTraining, BertAndT5TrainWithTheCpuLossesBitwise) {
  TempDir tmp;
  for (const std::string model : {"bert", "t5"}) {
    const TrainOptions o = tiny_masked_lm(tmp, model);
    const DeviceRun cpu = train_on(o, Device::CPU);
    expect_same_run(train_on(o, Device::GUARDED), cpu, model);
    if (model == "bert") {
      EXPECT_EQ(cpu.history.front().losses.size(), 2u) << "lm and sop losses";
    }
  }
}

// BERT and T5 with full recomputation (one layer a chunk) and in bf16: each stack's forward again in the backward
// from the chunk inputs kept on the device, and the low-precision compute copies of the weights.
TEST(GuardedTraining, BertAndT5RecomputationAndBf16WithTheCpuLossesBitwise) {
  TempDir tmp;
  for (const std::string model : {"bert", "t5"}) {
    TrainOptions full = tiny_masked_lm(tmp, model);
    full.schedule.train_iters = 3;
    full.recompute_granularity = "full";
    full.recompute_method = "uniform";
    full.recompute_num_layers = 1;
    expect_same_run(train_on(full, Device::GUARDED), train_on(full, Device::CPU), model + " full recomputation");
    TrainOptions bf16 = tiny_masked_lm(tmp, model);
    bf16.schedule.train_iters = 3;
    bf16.precision.bf16 = true;
    expect_same_run(train_on(bf16, Device::GUARDED), train_on(bf16, Device::CPU), model + " bf16");
  }
}

// ---- several ranks ------------------------------------------------------------------------------------------------

const char* kWorkerEnv = "LMFORGE_GUARDED_WORKER";

TEST(GuardedTraining, DataTensorAndPipelineParallelRanksWithTheCpuLossesBitwise) {
  TempDir tmp;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const auto r = run_command("timeout 600 env " + std::string(kWorkerEnv) + "=" + tmp.path() +
                             " OMP_NUM_THREADS=1 " + mpirun_prefix(2) + "-x " + kWorkerEnv +
                             " -x OMP_NUM_THREADS " + self + " --gtest_filter=GuardedTrainingWorker.* --gtest_brief=1");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* rank : {"rank 0", "rank 1"})
    EXPECT_NE(r.output.find(std::string("guarded worker ") + rank + ": dp, zero-1, zero-2, tp, pp equal"),
              std::string::npos)
        << r.output;
}

TEST(GuardedTrainingWorker, LayoutsMatchTheCpu) {
  const char* dir = std::getenv(kWorkerEnv);
  if (dir == nullptr)
    GTEST_SKIP() << "runs inside the mpirun job that GuardedTraining.DataTensorAndPipelineParallel* starts";
  dist::MpiSession mpi;
  auto world = dist::make_mpi_communicator();
  ASSERT_EQ(world->size(), 2);
  TempDir unused;
  TrainOptions base = tiny_gpt(unused);
  base.data_cache_path = std::string(dir) + "/cache";  // one index cache for both ranks (rank 0 builds it)
  base.ddp_bucket_size = 5000;  // several buckets, reductions overlapped with the backward
  base.schedule.train_iters = 3;  // 8 runs on 2 ranks over a shared machine: kept short
  base.eval_interval = 3;
  TrainOptions zero1 = base, zero2 = base, tp = base, pp = base;
  zero1.use_distributed_optimizer = true;
  zero2.use_distributed_optimizer = true;
  zero2.zero_stage = 2;
  tp.tensor_model_parallel_size = 2;
  tp.global_batch_size = 2 * tp.micro_batch_size;
  pp.pipeline_model_parallel_size = 2;  // one layer per stage; the tied embedding's gradient summed between them
  const std::pair<const char*, TrainOptions> layouts[] = {{"dp", base}, {"zero-1", zero1}, {"zero-2", zero2},
                                                          {"tp", tp}, {"pp", pp}};
  for (const auto& [name, o] : layouts) {
    const DeviceRun cpu = train_on(o, Device::CPU, world.get());
    const DeviceRun guarded = train_on(o, Device::GUARDED, world.get());
    expect_same_run(guarded, cpu, name);
    if (::testing::Test::HasFailure()) return;
  }
  // BERT (LAMB, the sentence-order head) and T5 split over the two ranks by tensor and by pipeline parallelism.
  for (const std::string model : {"bert", "t5"}) {
    TrainOptions mlm = tiny_masked_lm(unused, model);
    mlm.data_cache_path = std::string(dir) + "/cache-" + model;
    mlm.schedule.train_iters = 2;
    mlm.eval_interval = 2;
    TrainOptions mtp = mlm, mpp = mlm;
    mtp.tensor_model_parallel_size = 2;
    mtp.global_batch_size = 2 * mtp.micro_batch_size;
    mpp.pipeline_model_parallel_size = 2;
    mpp.global_batch_size = 2 * mpp.micro_batch_size;
    for (const auto& [name, o] : {std::pair{model + " tp", mtp}, std::pair{model + " pp", mpp}}) {
      expect_same_run(train_on(o, Device::GUARDED, world.get()), train_on(o, Device::CPU, world.get()), name);
      if (::testing::Test::HasFailure()) return;
    }
  }
  std::printf("guarded worker rank %d: dp, zero-1, zero-2, tp, pp equal\n", world->rank());
}

}  // namespace
