// defines: tests of the numpy RandomState draws Megatron's BERT/T5 datasets make — geometric (numpy 1.24 legacy),
//   choice with Megatron's n-gram weights (the cdf bit for bit), randint(1, 2) without a draw, random() and the
//   shuffle of a Python list — against Debian's numpy run by /usr/bin/python3.
// Mutations tried: geometric inverting u instead of 1 − u, and the n-gram weights summed a0 + (a1 + a2) instead of
// numpy's (a0 + a1) + a2 (one ulp), each fail a test here. The search/inversion threshold and searchsorted's side
// were also mutated and are not observable (the two geometric methods agree but for rounding; u never hits a cdf
// entry exactly), so they are kept as numpy has them without a test that could tell.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "datasets/masked_lm.h"
#include "datasets/numpy_random.h"
#include "reference.h"

using namespace lmforge::datasets;
using namespace lmforge::datasets::testing;

namespace {

const std::vector<double> kGeometricP = {0.2, 0.05, 0.001, 0.3, 0.33, 1.0 / 3.0, 0.5, 0.9, 1.0};
constexpr int kDraws = 20000;

class NumpyDistributions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = temp_dir("dist");
    const std::string script = R"PY(
import numpy, sys
out = sys.argv[1]
ps = [0.2, 0.05, 0.001, 0.3, 0.33, 1.0 / 3.0, 0.5, 0.9, 1.0]
for k, p in enumerate(ps):
    r = numpy.random.RandomState(1234 + k)
    numpy.array([r.geometric(p) for _ in range(20000)], dtype=numpy.int64).tofile(f'{out}/geometric_{k}.bin')
# Megatron's n-gram weights (dataset_utils.create_masked_lm_predictions) and numpy choice's cdf of them.
for n in (1, 2, 3, 5, 8):
    pvals = 1. / numpy.arange(1, n + 1)
    pvals /= pvals.sum(keepdims=True)
    p = pvals[:n] / pvals[:n].sum(keepdims=True)
    cdf = p.cumsum()
    cdf /= cdf[-1]
    cdf.tofile(f'{out}/cdf_{n}.bin')
    r = numpy.random.RandomState(99 + n)
    numpy.array([r.choice(numpy.arange(1, n + 1), p=p) for _ in range(20000)], dtype=numpy.int64).tofile(f'{out}/choice_{n}.bin')
# randint(1, 2) draws nothing; random() is random_sample(); list shuffle = ndarray shuffle.
r = numpy.random.RandomState(7)
vals = []
for k in range(2000):
    vals.append(int(r.randint(1, 2)))
    vals.append(int(r.randint(1, 2 + k % 9)))
    vals.append(int(r.random() < 0.5))
lst = list(range(1000))
r.shuffle(lst)
numpy.array(vals + lst + [int(r.randint(0, 2**31))], dtype=numpy.int64).tofile(f'{out}/mixed.bin')
)PY";
    write_text(dir_ + "/dist.py", script);
    run_python(dir_ + "/dist.py " + dir_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
};
std::string NumpyDistributions::dir_;

TEST_F(NumpyDistributions, GeometricEqualsNumpy124OnBothBranches) {
  for (size_t k = 0; k < kGeometricP.size(); ++k) {
    NumpyRandomState r(uint32_t(1234 + k));
    std::vector<int64_t> got(kDraws);
    for (auto& g : got) g = r.geometric(kGeometricP[k]);
    EXPECT_EQ(got, read_raw<int64_t>(dir_ + "/geometric_" + std::to_string(k) + ".bin")) << "p " << kGeometricP[k];
  }
}

TEST_F(NumpyDistributions, NgramCdfIsNumpysBitForBitAndChoiceDrawsMatch) {
  for (int n : {1, 2, 3, 5, 8}) {
    double cdf[8];
    const auto got = ngram_cdf(n, cdf);
    const auto want = read_raw<double>(dir_ + "/cdf_" + std::to_string(n) + ".bin");
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(std::memcmp(&got[i], &want[i], 8), 0) << n << " " << i;
    NumpyRandomState r(uint32_t(99 + n));
    std::vector<int64_t> draws(kDraws);
    for (auto& d : draws) d = 1 + r.choice_index(got);
    EXPECT_EQ(draws, read_raw<int64_t>(dir_ + "/choice_" + std::to_string(n) + ".bin")) << n;
  }
}

TEST_F(NumpyDistributions, RandintWithoutDrawRandomAndListShuffle) {
  NumpyRandomState r(7);
  std::vector<int64_t> got;
  for (int k = 0; k < 2000; ++k) {
    got.push_back(r.randint(1, 2));
    got.push_back(r.randint(1, 2 + k % 9));
    got.push_back(r.random_sample() < 0.5 ? 1 : 0);
  }
  std::vector<int32_t> list(1000);
  std::iota(list.begin(), list.end(), 0);
  r.shuffle(std::span<int32_t>(list));
  got.insert(got.end(), list.begin(), list.end());
  got.push_back(r.randint(0, int64_t(1) << 31));
  EXPECT_EQ(got, read_raw<int64_t>(dir_ + "/mixed.bin"));
}

}  // namespace
