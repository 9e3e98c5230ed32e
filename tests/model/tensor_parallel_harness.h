// defines: the harness of the tensor-parallel model tests (test_gpt/bert/t5_tensor_parallel.cpp): each test binary
//          runs its own worker suite under a 2-rank mpirun (run_tensor_parallel_workers), every rank builds the whole
//          model and its piece, and expect_pieces_are_slices compares the piece's tensors (weights or gradients) with
//          the whole model's slices; dropout_step is the training step all three run
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "dist/mpi_test_util.h"
#include "layers/dropout.h"
#include "test_util.h"

namespace lmforge::testing {

// Runs this binary's `worker_suite`.* tests in a 2-rank mpirun job with `worker_env`=1 set (the worker tests skip
// without it), under `timeout` seconds. The workers print one line per rank that the caller looks for.
inline CommandResult run_tensor_parallel_workers(const std::string& worker_env, const std::string& worker_suite,
                                                 int timeout) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  return run_command("timeout " + std::to_string(timeout) + " env " + worker_env + "=1 OMP_NUM_THREADS=1 " +
                     mpirun_prefix(2) + "-x " + worker_env + " -x OMP_NUM_THREADS " + self +
                     " --gtest_filter=" + worker_suite + ".* --gtest_brief=1");
}

inline double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; i++) m = std::max(m, (double)std::fabs(a[i] - b[i]));
  return m;
}

// Every tensor of `piece` (one tensor-parallel rank) against its slice of the same tensor of `whole` (tensor-parallel
// size 1), over the flat buffers `values(model)` (params() or grads()): tol 0 asserts exact equality and stops at the
// first difference, tol > 0 expects each tensor within tol. `what` starts every failure message. Returns the largest
// difference.
template <class Model, class Values>
double expect_pieces_are_slices(Model& whole, Model& piece, Values values, double tol, const std::string& what) {
  EXPECT_EQ(piece.table().size(), whole.table().size()) << what;
  if (piece.table().size() != whole.table().size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < whole.table().size(); i++) {
    std::vector<float> expect(piece.table()[i].numel);
    piece.table().slice(i, values(whole) + whole.table()[i].offset, expect.data());
    const double d = max_abs_diff(expect.data(), values(piece) + piece.table()[i].offset, expect.size());
    worst = std::max(worst, d);
    if (tol == 0.0) {
      EXPECT_EQ(d, 0.0) << what << whole.table()[i].name;
      if (d != 0.0) return worst;
    } else {
      EXPECT_LT(d, tol) << what << whole.table()[i].name;
    }
  }
  return worst;
}

// The initial weights: expect_pieces_are_slices over params(), exactly (no whole tensor was ever built on a rank).
template <class Model>
bool pieces_start_as_slices(Model& whole, Model& piece, const std::string& what) {
  return expect_pieces_are_slices(whole, piece, [](Model& m) { return m.params(); }, 0.0, what) == 0.0;
}

// The gradients after one backward: each piece within tol of its slice; returns the largest difference.
template <class Model>
double expect_gradient_pieces(Model& whole, Model& piece, double tol, const std::string& what) {
  return expect_pieces_are_slices(whole, piece, [](Model& m) { return m.grads(); }, tol, what);
}

// The training step the workers run: dropout on, at a fixed seed, iteration and micro-batch.
inline layers::ForwardStep dropout_step() {
  layers::ForwardStep step;
  step.training = true;
  step.seed = 99;
  step.iteration = 3;
  step.micro_batch = 5;
  return step;
}

}  // namespace lmforge::testing
