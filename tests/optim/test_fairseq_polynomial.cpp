// defines: tests of the fairseq-polynomial-decay style of OptimizerParamScheduler (fairseq's --lr-scheduler
// polynomial_decay) against a Python transcription of fairseq's PolynomialDecayLRSchedule as fairseq's trainer steps
// it (fairseq_polynomial_reference.py): every update's learning rate equal to the double, with several global batch
// sizes (the schedule counts samples).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "optim/lr_schedule.h"
#include "test_util.h"
#include "util/error.h"

namespace lmforge::optim {
namespace {

struct Case {
  std::map<std::string, double> keys;
  std::vector<double> lrs;  // per update
};

std::vector<Case> reference_cases() {
  lmforge::testing::TempDir dir;
  const std::string path = dir.file("fairseq_poly.txt");
  const std::string cmd = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                          "/tests/optim/fairseq_polynomial_reference.py " + path;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("reference script failed: " + cmd);
  std::ifstream in(path);
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("case ", 0) == 0) {
      cases.emplace_back();
      std::istringstream fields(line.substr(5));
      for (std::string kv; fields >> kv;) {
        const size_t eq = kv.find('=');
        cases.back().keys[kv.substr(0, eq)] = std::strtod(kv.c_str() + eq + 1, nullptr);
      }
    } else {
      cases.back().lrs.push_back(std::strtod(line.c_str(), nullptr));
    }
  }
  return cases;
}

TEST(FairseqPolynomialDecay, EveryUpdateMatchesFairseqsScheduleBitForBit) {
  const std::vector<Case> cases = reference_cases();
  ASSERT_EQ(cases.size(), 5u);
  for (const Case& c : cases) {
    for (int64_t batch : {1, 8, 96}) {
      LrScheduleArgs a;
      a.lr = c.keys.at("lr");
      a.min_lr = c.keys.at("end");  // fairseq's --end-learning-rate
      a.lr_decay_power = c.keys.at("power");
      a.lr_decay_style = "fairseq-polynomial-decay";
      a.lr_warmup_iters = (int64_t)c.keys.at("warmup");
      a.lr_decay_iters = (int64_t)c.keys.at("total");
      a.train_iters = (int64_t)c.keys.at("updates");
      a.global_batch_size = batch;
      OptimizerParamScheduler sched(a);
      ASSERT_EQ(c.lrs.size(), (size_t)*a.train_iters);
      for (size_t u = 0; u < c.lrs.size(); u++) {
        ASSERT_EQ(sched.lr(), c.lrs[u]) << "update " << u + 1 << " of case lr=" << a.lr << " power="
                                        << a.lr_decay_power << " warmup=" << a.lr_warmup_iters << " batch=" << batch;
        sched.step(batch);
      }
    }
  }
}

TEST(FairseqPolynomialDecay, FirstUpdateHasLrZeroAndFlagsAreChecked) {
  LrScheduleArgs a;
  a.lr = 1e-3;
  a.lr_decay_style = "fairseq-polynomial-decay";
  a.lr_warmup_iters = 4;
  a.train_iters = 10;
  a.global_batch_size = 3;
  OptimizerParamScheduler sched(a);
  EXPECT_EQ(sched.lr(), 0.0);
  sched.step(3);
  EXPECT_EQ(sched.lr(), 0.25 * 1e-3);
  a.lr_decay_power = 0.0;
  EXPECT_THROW(OptimizerParamScheduler{a}, Error);
  a.lr_decay_power = 2.0;
  a.lr_decay_style = "linear";  // --power belongs to the fairseq schedule only
  EXPECT_THROW(OptimizerParamScheduler{a}, Error);
  a.lr_decay_style = "fairseq-polynomial-decay";
  a.lr_warmup_init = 1e-5;  // fairseq warms up from 0
  EXPECT_THROW(OptimizerParamScheduler{a}, Error);
}

}  // namespace
}  // namespace lmforge::optim
