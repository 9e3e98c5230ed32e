// T5 at tensor-parallel size 2 against the same T5 in one process (as test_gpt_tensor_parallel.cpp does for GPT):
// each rank of an mpirun job builds the whole model and its piece from the same seed, checks that the piece's
// initial weights are the whole model's slices (the per-head query_key_value and key_value split in one piece per
// rank), that a training forward WITH DROPOUT over a micro-batch padded on both sides gives the same loss, and that
// every gradient piece equals the whole gradient's slice. The test launches itself under mpirun. Measured: equal
// losses, gradients within 1.1e-7.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "dist/communicator.h"
#include "dist/mpi_session.h"
#include "model/t5.h"
#include "tensor_parallel_harness.h"

namespace {

using namespace lmforge;
using namespace lmforge::testing;

const char* kWorkerEnv = "LMFORGE_T5_TP_WORKER";

TEST(T5TensorParallel, TwoRanksComputeWhatOneProcessComputes) {
  auto r = run_tensor_parallel_workers(kWorkerEnv, "T5TensorParallelWorker", 180);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 of 2: parameters"), std::string::npos) << r.output;
}

TEST(T5TensorParallelWorker, PieceMatchesTheWholeModel) {
  if (std::getenv(kWorkerEnv) == nullptr) GTEST_SKIP() << "runs inside the mpirun job that T5TensorParallel starts";
  dist::MpiSession mpi;
  auto world = dist::make_mpi_communicator();
  const int rank = world->rank(), T = world->size();
  model::T5Config c;
  c.encoder_num_layers = 2;
  c.decoder_num_layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.ffn_hidden = 64;
  c.encoder_seq_length = 12;
  c.decoder_seq_length = 8;
  c.max_positions = 16;
  c.vocab_size = 1000;  // padded to 1024
  c.hidden_dropout = 0.1f;
  c.attention_dropout = 0.1f;
  model::T5 whole(c, lmforge::kernels::cpu_backend());
  model::T5 piece(c, kernels::cpu_backend(), world.get());
  whole.init_weights(1234);
  piece.init_weights(1234);
  ASSERT_TRUE(pieces_start_as_slices(whole, piece, ""));
  const int B = 3, Te = c.encoder_seq_length, Td = c.decoder_seq_length;
  std::mt19937 rng(5);
  std::vector<int32_t> enc((size_t)B * Te, 0), enc_pad((size_t)B * Te, 0), dec((size_t)B * Td, 0),
      dec_pad((size_t)B * Td, 0), labels((size_t)B * Td, -1);
  std::vector<float> mask((size_t)B * Td, 0.0f);
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < Te - 2 * b; t++)
      enc[(size_t)b * Te + t] = 1 + (int32_t)(rng() % 999), enc_pad[(size_t)b * Te + t] = 1;
    for (int t = 0; t < Td - b; t++) {
      const size_t i = (size_t)b * Td + t;
      dec[i] = 1 + (int32_t)(rng() % 999), dec_pad[i] = 1;
      labels[i] = (int32_t)(rng() % 1000), mask[i] = 1.0f;
    }
  }
  model::T5Inputs in;
  in.B = B;
  in.Te = Te;
  in.Td = Td;
  in.encoder_tokens = enc.data();
  in.encoder_padding = enc_pad.data();
  in.decoder_tokens = dec.data();
  in.decoder_padding = dec_pad.data();
  in.labels = labels.data();
  in.loss_mask = mask.data();
  const layers::ForwardStep step = dropout_step();
  const double eval = whole.forward(in);
  const double lw = whole.forward(in, &step);
  EXPECT_NE(eval, lw) << "dropout made no difference";
  const double lp = piece.forward(in, &step);
  EXPECT_NEAR(lp, lw, 1e-5 * std::fabs(lw));
  whole.backward();
  piece.backward();
  const double worst = expect_gradient_pieces(whole, piece, 1e-5, "");
  std::printf("rank %d of %d: parameters %zu of %zu, loss %.7f vs %.7f, max gradient difference %.3g\n", rank, T,
              piece.num_parameters(), whole.num_parameters(), lp, lw, worst);
  std::fflush(stdout);
  if (::testing::Test::HasFailure()) world->abort("T5 tensor-parallel worker", "mismatch", 1);
}

}  // namespace
