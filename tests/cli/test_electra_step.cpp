// defines: tests of `lmforge check electra-step`: the shared float64 ELECTRA step (../shared/data/electra/
//          model_small, embedding 48 ≠ hidden 128) and a second configuration with embedding size = hidden size from
//          an independent float64 PyTorch statement (tests/cli/electra_step_reference.py) are reproduced in fp32:
//          loss to 1e-5 relative, every gradient to 1e-4 of its tensor's largest magnitude, the step's masking,
//          samples, fake ids and labels exactly
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "test_util.h"

namespace lmforge {
namespace {

using checkpoint::SafetensorsFile;

// Any tensor of the file as doubles (F64, F32 or I64).
std::vector<double> values(const SafetensorsFile& f, const std::string& name) {
  const checkpoint::TensorInfo& t = f.at(name);
  const auto bytes = f.bytes(t);
  std::vector<double> v(t.numel());
  for (size_t i = 0; i < v.size(); i++) {
    if (t.dtype == checkpoint::DType::kF64) {
      std::memcpy(&v[i], bytes.data() + 8 * i, 8);
    } else if (t.dtype == checkpoint::DType::kF32) {
      float x;
      std::memcpy(&x, bytes.data() + 4 * i, 4);
      v[i] = x;
    } else if (t.dtype == checkpoint::DType::kI64) {
      int64_t x;
      std::memcpy(&x, bytes.data() + 8 * i, 8);
      v[i] = (double)x;
    } else {
      ADD_FAILURE() << name << ": unexpected dtype";
    }
  }
  return v;
}

double meta_number(const checkpoint::JsonObject& meta, const std::string& key) {
  const auto& v = meta.at(key);
  if (const double* d = std::get_if<double>(&v)) return *d;
  return (double)std::get<int64_t>(v);
}

// Runs the check on a reference directory (meta.json, weights/batch/results/grads.safetensors) and compares.
void expect_step_reproduced(const std::string& dir, const std::string& device = "cpu") {
  testing::TempDir tmp;
  const std::string out = tmp.file("step.safetensors");
  const auto r = testing::run_command(std::string(LMFORGE_EXE) + " check electra-step --device " + device +
                                      " --config " + dir +
                                      "/meta.json --weights " + dir + "/weights.safetensors --batch " + dir +
                                      "/batch.safetensors --output " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const SafetensorsFile mine(out), results(dir + "/results.safetensors"), grads(dir + "/grads.safetensors");
  const checkpoint::JsonObject meta =
      checkpoint::parse_json_object(testing::read_file(dir + "/meta.json"), dir + "/meta.json");

  // The step's decisions exactly.
  for (const char* name : {"masked_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights", "sampled",
                           "fake_ids", "disc_labels"})
    EXPECT_EQ(values(mine, name), values(results, name)) << name;
  // Losses to 1e-5 relative.
  for (const auto& [key, ref_key] : {std::pair{"loss", "loss"}, {"mlm_loss", "mlm_loss"}, {"disc_loss", "disc_loss"}}) {
    const double got = values(mine, key)[0], want = meta_number(meta, ref_key);
    EXPECT_LE(std::fabs(got - want), 1e-5 * std::fabs(want)) << key << ": " << got << " vs " << want;
  }
  // Logits close (fp32 against float64).
  for (const char* name : {"disc_logits", "gen_logits"}) {
    const auto got = values(mine, name), want = values(results, name);
    ASSERT_EQ(got.size(), want.size()) << name;
    double err = 0.0, mag = 0.0;
    for (size_t i = 0; i < got.size(); i++) err = std::max(err, std::fabs(got[i] - want[i])), mag = std::max(mag, std::fabs(want[i]));
    EXPECT_LE(err, 1e-4 * mag) << name;
  }
  // Every gradient: largest absolute error over the tensor's largest magnitude ≤ 1e-4; and no extra tensors.
  // The attention key biases are the exception: softmax is invariant to adding the same number to every score of a
  // row, and q·b_k is such a number, so their gradient is exactly zero and the float64 file holds rounding noise
  // (~1e-21); for a tensor whose reference is zero to 1e-15 of the model's largest gradient, the error is measured
  // against that largest gradient instead (fp32 leaves ~1e-13 of it).
  double largest = 0.0;
  for (const auto& t : grads.tensors())
    for (double g : values(grads, t.name)) largest = std::max(largest, std::fabs(g));
  size_t compared = 0, zero = 0;
  for (const auto& t : grads.tensors()) {
    const auto got = values(mine, "grad." + t.name), want = values(grads, t.name);
    ASSERT_EQ(got.size(), want.size()) << t.name;
    double err = 0.0, mag = 0.0;
    for (size_t i = 0; i < got.size(); i++)
      err = std::max(err, std::fabs(got[i] - want[i])), mag = std::max(mag, std::fabs(want[i]));
    if (mag < 1e-15 * largest) {
      EXPECT_NE(t.name.find("attention.self.key.bias"), std::string::npos) << t.name << " has a zero gradient";
      EXPECT_LE(err, 1e-9 * largest) << t.name << ": error " << err << " with a zero reference";
      zero++;
    } else {
      EXPECT_LE(err, 1e-4 * mag) << t.name << ": error " << err << ", largest " << mag;
    }
    compared++;
  }
  EXPECT_LT(zero, compared / 4);
  size_t mine_grads = 0;
  for (const auto& t : mine.tensors()) mine_grads += t.name.rfind("grad.", 0) == 0;
  EXPECT_EQ(mine_grads, compared);
}

TEST(ElectraStep, ReproducesTheSharedFloat64StepWithEmbeddingProjections) {
  expect_step_reproduced(testing::shared_path("data/electra/model_small"));
}

// The guarded test device faults on any host access to device memory: the host-side masking, sampling and BCE
// reach the logits only through the backend's copies.
TEST(ElectraStep, ReproducesTheSharedStepOnTheGuardedDevice) {
  expect_step_reproduced(testing::shared_path("data/electra/model_small"), "guarded");
}

// The reference directory of tests/cli/electra_step_reference.py with `args`, made once per script text and args.
std::string reference_dir(const std::string& args) {
  const std::string script = std::string(LMFORGE_SOURCE_DIR) + "/tests/cli/electra_step_reference.py";
  std::ifstream src(script);
  const std::string text((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  const std::string dir = std::string(LMFORGE_BINARY_DIR) + "/electra_step_reference_" +
                          std::to_string(std::hash<std::string>{}(text + "\n" + args));
  if (!std::ifstream(dir + "/meta.json")) {
    const std::string tmp = dir + "." + std::to_string(::getpid());
    const auto r = testing::run_command("/usr/bin/python3 " + script + " --out " + tmp + " " + args);
    if (r.status != 0) throw std::runtime_error("reference script failed: " + r.output);
    std::rename(tmp.c_str(), dir.c_str());
  }
  return dir;
}

// The statement itself reproduces the shared float64 step (losses to 1e-12, decisions exactly, gradients to 1e-9),
// so the second configuration is checked against a statement checked independently of lmforge.
TEST(ElectraStep, TheTorchStatementReproducesTheSharedStep) {
  const auto r = testing::run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                                      "/tests/cli/electra_step_reference.py --replay " +
                                      testing::shared_path("data/electra/model_small"));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(ElectraStep, EmbeddingSizeEqualToHiddenMatchesTheTorchStatement) {
  // E = H = 64: the discriminator has no projection, the generator (32 wide) still has one; padding in two rows.
  expect_step_reproduced(reference_dir("--embedding 64 --hidden 64 --gen-hidden 32 --seed 7"));
}

TEST(ElectraStep, AWeightsFileWithoutAModelTensorNamesTheFileAndTensor) {
  testing::TempDir tmp;
  const std::string dir = testing::shared_path("data/electra/model_small");
  const auto r = testing::run_command(std::string(LMFORGE_EXE) + " check electra-step --config " + dir +
                                      "/meta.json --weights " + dir + "/grads.safetensors --batch " + dir +
                                      "/results.safetensors --output " + tmp.file("x.safetensors"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("results.safetensors"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("input_ids"), std::string::npos) << r.output;
  EXPECT_FALSE(std::ifstream(tmp.file("x.safetensors")));
}

}  // namespace
}  // namespace lmforge
