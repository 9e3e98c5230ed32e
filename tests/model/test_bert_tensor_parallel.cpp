// BERT at tensor-parallel size 2 against the same BERT in one process (as test_gpt_tensor_parallel.cpp does for
// GPT): each rank of an mpirun job builds the whole model and its tensor-parallel piece from the same seed, checks
// that the piece's initial weights are the whole model's slices, that a training forward WITH DROPOUT over a
// micro-batch with padding gives the same lm and sop losses, and that every gradient piece equals the whole
// gradient's slice — for the Megatron flavour (binary head on and off) and the original post-LN flavour. The test
// launches itself under mpirun; the worker test only runs inside that job. Measured: equal losses, gradients within
// 2e-7. Checked to fail under a deliberate mutation (run once): the binary head's gradient added on rank 0 only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "dist/communicator.h"
#include "dist/mpi_session.h"
#include "model/bert.h"
#include "tensor_parallel_harness.h"

namespace {

using namespace lmforge;
using namespace lmforge::testing;

const char* kWorkerEnv = "LMFORGE_BERT_TP_WORKER";

TEST(BertTensorParallel, TwoRanksComputeWhatOneProcessComputes) {
  auto r = run_tensor_parallel_workers(kWorkerEnv, "BertTensorParallelWorker", 180);
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* flavour : {"megatron", "megatron-no-binary-head", "original"})
    EXPECT_NE(r.output.find(std::string("rank 1 of 2, ") + flavour + ":"), std::string::npos) << r.output;
}

void check_flavour(dist::Communicator& world, const char* name, model::BertConfig config) {
  const int rank = world.rank(), T = world.size();
  model::Bert whole(config, lmforge::kernels::cpu_backend());
  model::Bert piece(config, kernels::cpu_backend(), &world);
  whole.init_weights(1234);
  piece.init_weights(1234);
  ASSERT_TRUE(pieces_start_as_slices(whole, piece, std::string(name) + " "));
  // Rows of different real lengths, ~20 % of the real positions labelled, both segments, both sentence orders.
  const int B = 3, S = config.seq_length;
  std::mt19937 rng(7);
  std::vector<int32_t> tokens((size_t)B * S, 0), types((size_t)B * S, 0), padding((size_t)B * S, 0),
      labels((size_t)B * S, -1), is_random(B);
  std::vector<float> mask((size_t)B * S, 0.0f);
  for (int b = 0; b < B; b++) {
    const int len = S - 3 * b;
    is_random[b] = b % 2;
    for (int t = 0; t < len; t++) {
      const size_t i = (size_t)b * S + t;
      tokens[i] = (int32_t)(rng() % config.vocab_size);
      padding[i] = 1;
      types[i] = t >= len / 2;
      if (t == 1 || rng() % 5 == 0) labels[i] = (int32_t)(rng() % config.vocab_size), mask[i] = 1.0f;
    }
  }
  model::BertInputs in;
  in.B = B;
  in.T = S;
  in.tokens = tokens.data();
  in.types = types.data();
  in.padding = padding.data();
  in.labels = labels.data();
  in.loss_mask = mask.data();
  in.is_random = is_random.data();
  const layers::ForwardStep step = dropout_step();
  const model::BertLosses eval = whole.forward(in);
  const model::BertLosses lw = whole.forward(in, &step);
  EXPECT_NE(eval.lm, lw.lm) << name << ": dropout made no difference";
  const model::BertLosses lp = piece.forward(in, &step);
  EXPECT_NEAR(lp.lm, lw.lm, 1e-5 * std::fabs(lw.lm)) << name;
  EXPECT_NEAR(lp.sop, lw.sop, 1e-5 * std::fabs(lw.sop) + 1e-12) << name;
  whole.backward();
  piece.backward();
  const double worst = expect_gradient_pieces(whole, piece, 1e-5, std::string(name) + " ");
  std::printf("rank %d of %d, %s: parameters %zu of %zu, lm %.7f vs %.7f, sop %.7f vs %.7f, max gradient "
              "difference %.3g\n",
              rank, T, name, piece.num_parameters(), whole.num_parameters(), lp.lm, lw.lm, lp.sop, lw.sop, worst);
  std::fflush(stdout);
}

TEST(BertTensorParallelWorker, PieceMatchesTheWholeModel) {
  if (std::getenv(kWorkerEnv) == nullptr) GTEST_SKIP() << "runs inside the mpirun job that BertTensorParallel starts";
  dist::MpiSession mpi;
  auto world = dist::make_mpi_communicator();
  model::BertConfig c;
  c.num_layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.ffn_hidden = 64;
  c.seq_length = 16;
  c.max_positions = 16;
  c.vocab_size = 1000;  // padded to 1024
  c.hidden_dropout = 0.1f;
  c.attention_dropout = 0.1f;
  check_flavour(*world, "megatron", c);
  model::BertConfig no_head = c;
  no_head.binary_head = false;
  check_flavour(*world, "megatron-no-binary-head", no_head);
  model::BertConfig original = c;
  original.post_layernorm = true;
  original.layernorm_eps = 1e-12f;
  original.mlp_gelu = kernels::GeluKind::ERF;
  check_flavour(*world, "original", original);
  if (::testing::Test::HasFailure()) world->abort("BERT tensor-parallel worker", "mismatch", 1);
}

}  // namespace
