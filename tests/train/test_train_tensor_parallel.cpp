// Tensor parallelism (model::GPT built on a tensor-parallel group) against the unsharded model::GPT: each rank of an mpirun job trains
// both, the whole model alone (the single-process reference) and its tensor-parallel shard with its group, 20
// AdamW (or LAMB) steps with clipping, and checks every step's loss (relative difference < 1e-5), the global
// gradient norm and the final parameters (its pieces of the reference's). Layouts: TP = 2, TP = 2 × DP = 2
// (replicated and distributed optimizer). LAMB's trust ratio needs each tensor's whole norms: split tensors sum
// over the tensor-parallel group, replicated ones (LayerNorms, row-parallel biases, wpe) are whole on every rank.
// The test launches itself under mpirun; the worker test only runs inside that job.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "dist/communicator.h"
#include "dist/mpi_session.h"
#include "model/gpt.h"
#include "dist/mpi_test_util.h"
#include "optim/adamw.h"
#include "optim/factory.h"
#include "test_util.h"
#include "checkpoint/model_io.h"
#include "parallel/distributed_optimizer.h"
#include "parallel/grad_buckets.h"
#include "parallel/grad_norm.h"
#include "parallel/microbatch_schedule.h"

namespace {

using lmforge::testing::mpirun_prefix;
using lmforge::testing::run_command;
namespace dist = lmforge::dist;
namespace checkpoint = lmforge::checkpoint;
namespace model = lmforge::model;
namespace optim = lmforge::optim;
namespace parallel = lmforge::parallel;
namespace kernels = lmforge::kernels;

const char* kWorkerEnv = "LMFORGE_TP_WORKER";

// optimizer: "" (AdamW), "lamb" or "lamb-all" (LAMB with the trust ratio on every tensor).
std::string worker_command(int np, int tp, bool distributed, const std::string& optimizer = "") {
  // This executable, its worker test only.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  return "timeout 120 env " + std::string(kWorkerEnv) + "=" + std::to_string(tp) + (distributed ? ",zero" : "") +
         (optimizer.empty() ? "" : "," + optimizer) +
         " OMP_NUM_THREADS=1 " + mpirun_prefix(np) + "-x " + kWorkerEnv + " -x OMP_NUM_THREADS " + self +
         " --gtest_filter=TensorParallelWorker.* --gtest_brief=1";
}

TEST(TensorParallel, TwoRanksReproduceTheWholeModel) {
  auto r = run_command(worker_command(2, 2, false));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("TP=2 DP=1 rank 1"), std::string::npos) << r.output;
}

TEST(TensorParallel, TwoByTwoWithDataParallelReproducesTheWholeModel) {
  auto r = run_command(worker_command(4, 2, false));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("TP=2 DP=2 rank 3"), std::string::npos) << r.output;
  r = run_command(worker_command(4, 2, true));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("TP=2 DP=2 rank 3 (distributed optimizer)"), std::string::npos) << r.output;
}

TEST(TensorParallel, LambNormsAreTheWholeTensorsUnderTensorAndDataParallelism) {
  auto r = run_command(worker_command(2, 2, false, "lamb"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("TP=2 DP=1 rank 1 lamb"), std::string::npos) << r.output;
  r = run_command(worker_command(4, 2, true, "lamb-all"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("TP=2 DP=2 rank 3 lamb (all tensors) (distributed optimizer)"), std::string::npos)
      << r.output;
}

TEST(TensorParallelWorker, ShardTrainsLikeTheWholeModel) {
  const char* env = std::getenv(kWorkerEnv);
  if (env == nullptr) GTEST_SKIP() << "runs inside the mpirun job that TensorParallel.* starts";
  const int T = std::atoi(env);
  const bool distributed = std::string(env).find("zero") != std::string::npos;
  optim::OptimizerConfig opt;  // AdamW, or LAMB (with the trust ratio on every tensor for "lamb-all")
  if (std::string(env).find("lamb") != std::string::npos) opt.kind = "lamb";
  opt.lamb_all_tensors = std::string(env).find("lamb-all") != std::string::npos;
  dist::MpiSession mpi;
  auto world = dist::make_mpi_communicator();
  ASSERT_EQ(world->size() % T, 0);
  const int D = world->size() / T, tp_rank = world->rank() % T, dp_rank = world->rank() / T;
  // Megatron's rank order: tensor-parallel ranks adjacent, data-parallel groups strided.
  auto tp = world->split(dp_rank, tp_rank);
  auto dp = world->split(tp_rank, dp_rank);
  ASSERT_EQ(tp->size(), T);
  ASSERT_EQ(dp->size(), D);

  model::GPTConfig config;
  config.num_layers = 2;
  config.hidden = 32;
  config.heads = 4;
  config.seq_length = 16;
  config.max_positions = 16;
  config.vocab_size = 1000;  // padded to 1024
  model::GPT whole(config, lmforge::kernels::cpu_backend());
  whole.init_weights(1234);
  std::vector<optim::ParamSpan> whole_spans;
  for (const lmforge::param::Parameter& t : whole.tensors())
    whole_spans.push_back({t.name, whole.params() + t.offset, whole.grads() + t.offset, t.numel, t.weight_decay});
  const std::unique_ptr<optim::Optimizer> whole_opt = optim::make_optimizer(opt, whole_spans);

  // The shard initialises itself from the same seed: it must hold exactly its pieces of the whole model.
  model::GPT shard(config, lmforge::kernels::cpu_backend(), tp.get());
  shard.init_weights(1234);
  const lmforge::param::ParamTable& table = shard.table();
  {
    std::vector<float> expected(shard.num_parameters());
    for (size_t i = 0; i < table.size(); i++)
      table.slice(i, whole.params() + whole.tensors()[i].offset, expected.data() + table[i].offset);
    for (size_t i = 0; i < expected.size(); i++) ASSERT_EQ(expected[i], shard.params()[i]) << "element " << i;
  }
  std::vector<optim::ParamSpan> spans;
  std::vector<bool> counted;
  for (const auto& t : table) {
    spans.push_back({t.name, shard.params() + t.offset, shard.grads() + t.offset, t.numel, t.weight_decay});
    counted.push_back(!t.replicated() || tp_rank == 0);
  }
  parallel::GradBuckets buckets(*dp, spans, kernels::make_view(shard.grads(), {(int64_t)shard.num_parameters()}),
                                distributed);
  parallel::GradNorm grad_norm(spans);
  parallel::DistributedOptimizer optimizer(buckets, spans,
                                           kernels::make_view(shard.params(), {(int64_t)shard.num_parameters()}), opt);
  grad_norm.set_tensor_parallel(tp.get(), counted);
  optimizer.set_tensor_parallel(tp.get(), counted);

  const int M = 4, S = config.seq_length;  // 4 one-sample micro-batches per step
  std::mt19937 rng(7);
  double worst = 0.0;
  for (int step = 1; step <= 20; step++) {
    std::vector<std::vector<int32_t>> samples(M);
    for (auto& s : samples) {
      s.resize((size_t)S + 1);
      for (auto& id : s) id = (int32_t)(rng() % 1000);
    }
    whole.zero_grad();
    double ref_sum = 0.0;
    for (int j = 0; j < M; j++) {
      ref_sum += whole.forward(samples[j].data(), samples[j].data() + 1, 1, S);
      whole.backward();
    }
    optim::scale_grads(whole_spans, 1.0f / M);
    const double ref_norm = optim::clip_grad_norm(whole_spans, 1.0);
    const double lr = 1e-3 * step / 20.0;
    whole_opt->step(lr, 0.1);

    shard.zero_grad();
    double sum = 0.0;
    for (int64_t k = 0; k < parallel::local_micro_batches(M, buckets); k++) {
      const auto& s = samples[(size_t)(k * D + dp_rank)];
      sum += shard.forward(s.data(), s.data() + 1, 1, S);
      shard.backward();
    }
    dp->all_reduce_sum(&sum, 1);
    buckets.reduce();
    const double norm =
        grad_norm.scale_and_clip(kernels::make_view(shard.grads(), {(int64_t)shard.num_parameters()}), buckets.owned(), *dp, parallel::gradient_scale(M, 1.0), true, 1.0);
    buckets.gather_gradients();
    optimizer.step(lr, 0.1);

    const float ref_loss = (float)(ref_sum / M), loss = (float)(sum / M);
    const double rel = std::fabs((double)loss - ref_loss) / std::fabs((double)ref_loss);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 1e-5) << "step " << step << ": " << loss << " vs " << ref_loss;
    EXPECT_NEAR(norm, ref_norm, 1e-4 * ref_norm) << "step " << step;
  }
  std::vector<float> expected(shard.num_parameters());
  for (size_t i = 0; i < table.size(); i++)
    table.slice(i, whole.params() + whole.tensors()[i].offset, expected.data() + table[i].offset);
  double max_diff = 0.0;
  for (size_t i = 0; i < expected.size(); i++)
    max_diff = std::max(max_diff, (double)std::fabs(expected[i] - shard.params()[i]));
  EXPECT_LT(max_diff, 1e-4);
  // gather_to_root reassembles the whole tensors (Hugging Face layout) on the group's rank 0, tensor by tensor.
  double gather_diff = 0.0;
  for (size_t i = 0; i < table.size(); i++) {
    const lmforge::param::Parameter& w = whole.tensors()[i];
    std::vector<float> gathered(tp_rank == 0 ? w.numel : 0);
    checkpoint::gather_to_root(table, i, kernels::make_view(shard.params() + table[i].offset, {(int64_t)table[i].numel}),
                               gathered, tp.get());
    for (size_t e = 0; e < gathered.size(); e++)
      gather_diff = std::max(gather_diff, (double)std::fabs(gathered[e] - whole.params()[w.offset + e]));
  }
  EXPECT_LT(gather_diff, 1e-4);
  const std::string kind = opt.kind == "lamb" ? (opt.lamb_all_tensors ? " lamb (all tensors)" : " lamb") : "";
  std::printf("TP=%d DP=%d rank %d%s%s: max relative loss difference %.3g over 20 steps, max parameter difference "
              "%.3g\n",
              T, D, world->rank(), kind.c_str(), distributed ? " (distributed optimizer)" : "", worst, max_diff);
  std::fflush(stdout);
  if (::testing::Test::HasFailure()) world->abort("tensor-parallel worker", "parity failed", 1);
}

}  // namespace
