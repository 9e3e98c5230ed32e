// GPT at tensor-parallel size 2 against the same GPT in one process: each rank of an mpirun job builds both, the
// whole model and its tensor-parallel piece, from the same seed, and checks that the piece's initial weights are
// exactly the whole model's slices (layout-independent initialisation), that a training forward WITH DROPOUT gives
// the same loss (the masks do not depend on the layout), that every gradient piece equals the whole gradient's
// slice, and that cached decoding gives the whole model's logits for this rank's vocabulary columns. The test
// launches itself under mpirun; the worker test only runs inside that job.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "dist/communicator.h"
#include "dist/mpi_session.h"
#include "model/gpt.h"
#include "tensor_parallel_harness.h"

namespace {

using namespace lmforge;
using namespace lmforge::testing;

const char* kWorkerEnv = "LMFORGE_GPT_TP_WORKER";

TEST(GptTensorParallel, TwoRanksComputeWhatOneProcessComputes) {
  auto r = run_tensor_parallel_workers(kWorkerEnv, "GptTensorParallelWorker", 120);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 of 2: parameters"), std::string::npos) << r.output;
}

TEST(GptTensorParallelWorker, PieceMatchesTheWholeModel) {
  if (std::getenv(kWorkerEnv) == nullptr) GTEST_SKIP() << "runs inside the mpirun job that GptTensorParallel starts";
  dist::MpiSession mpi;
  auto world = dist::make_mpi_communicator();
  const int rank = world->rank(), T = world->size();
  model::GPTConfig config;
  config.num_layers = 2;
  config.hidden = 32;
  config.heads = 4;
  config.seq_length = 16;
  config.max_positions = 16;
  config.vocab_size = 1000;  // padded to 1024
  config.hidden_dropout = 0.1f;
  config.attention_dropout = 0.1f;
  model::GPT whole(config, lmforge::kernels::cpu_backend());
  model::GPT piece(config, kernels::cpu_backend(), world.get());
  whole.init_weights(1234);
  piece.init_weights(1234);
  // Initial weights: exactly the slices (no whole tensor was ever built on this rank for them).
  ASSERT_TRUE(pieces_start_as_slices(whole, piece, ""));
  // A training forward with dropout on both: same loss, gradient pieces equal the whole gradient's slices.
  const int B = 2, S = config.seq_length;
  std::mt19937 rng(7);
  std::vector<int32_t> ids((size_t)(B * S + 1));
  for (auto& id : ids) id = (int32_t)(rng() % 1000);
  const layers::ForwardStep step = dropout_step();
  whole.zero_grad();
  piece.zero_grad();
  const float loss_whole = whole.forward(ids.data(), ids.data() + 1, B, S, &step);
  const float loss_piece = piece.forward(ids.data(), ids.data() + 1, B, S, &step);
  EXPECT_NEAR(loss_piece, loss_whole, 1e-5 * std::fabs(loss_whole));
  const float loss_eval = whole.forward(ids.data(), ids.data() + 1, B, S);
  EXPECT_NE(loss_eval, loss_whole) << "dropout made no difference";
  whole.forward(ids.data(), ids.data() + 1, B, S, &step);
  whole.backward();
  piece.backward();
  const double worst = expect_gradient_pieces(whole, piece, 1e-5, "");
  // Decoding: this rank's vocabulary columns of the whole model's logits, position by position.
  whole.decode_begin(B);
  piece.decode_begin(B);
  const int64_t Vp = config.padded_vocab_size(), Vl = Vp / T;
  for (int t = 0; t < 6; t++) {
    const int32_t toks[2] = {ids[(size_t)t], ids[(size_t)(S + t)]};
    const float* a = whole.decode_step(toks);
    const float* b = piece.decode_step(toks);
    for (int row = 0; row < B; row++)
      EXPECT_LT(max_abs_diff(a + row * Vp + rank * Vl, b + row * Vl, (size_t)Vl), 1e-5) << "position " << t;
  }
  std::printf("rank %d of %d: parameters %zu of %zu, loss %.7f vs %.7f, max gradient difference %.3g\n", rank, T,
              piece.num_parameters(), whole.num_parameters(), loss_piece, loss_whole, worst);
  std::fflush(stdout);
  if (::testing::Test::HasFailure()) world->abort("GPT tensor-parallel worker", "mismatch", 1);
}

}  // namespace
