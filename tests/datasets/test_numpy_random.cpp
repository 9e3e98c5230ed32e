// defines: tests of NumpyRandomState against numpy 1.24's legacy RandomState (shuffle, randint, random_sample)
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "reference.h"
#include "datasets/numpy_random.h"

using namespace lmforge::datasets;
using namespace lmforge::datasets::testing;

namespace {

// Seeds and sizes: tiny sizes, sizes where i crosses a power of two (mask edges: i = 2^k and 2^k+1 cost a full extra
// bit so rejections are frequent), and sizes above 2^16.
const std::vector<uint32_t> kSeeds = {0, 1, 1234, 4294967295u};
const std::vector<int64_t> kSizes = {0, 1, 2, 3, 5, 16, 17, 33, 1024, 1025, 65535, 65537, 70001, 131073};

class NumpyRandomTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = temp_dir("rng");
    std::string seeds, sizes;
    for (auto s : kSeeds) seeds += std::to_string(s) + ",";
    for (auto n : kSizes) sizes += std::to_string(n) + ",";
    const std::string script = R"PY(
import numpy, sys
out = sys.argv[1]
seeds = [int(x) for x in sys.argv[2].split(',') if x]
sizes = [int(x) for x in sys.argv[3].split(',') if x]
for s in seeds:
    for n in sizes:
        for dt in ('int32', 'uint32', 'int64'):
            a = numpy.arange(n, dtype=dt)
            numpy.random.RandomState(s).shuffle(a)
            a.astype(numpy.int64).tofile(f'{out}/shuffle_{s}_{n}_{dt}.bin')
    r = numpy.random.RandomState(s)
    vals = []
    for high in (1, 2, 3, 7, 8, 9, 1000, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**40 + 12345, 2**62):
        for _ in range(5):
            vals.append(int(r.randint(0, high)))
    vals.append(int(r.randint(-5, 17)))
    numpy.array(vals, dtype=numpy.int64).tofile(f'{out}/randint_{s}.bin')
    r = numpy.random.RandomState(s)
    numpy.array([r.random_sample() for _ in range(20)], dtype=numpy.float64).tofile(f'{out}/uniform_{s}.bin')
    r = numpy.random.RandomState(s)
    numpy.array([r.randint(0, 2**32, dtype=numpy.uint64) for _ in range(8)], dtype=numpy.uint64).tofile(f'{out}/raw_{s}.bin')
)PY";
    write_text(dir_ + "/rng.py", script);
    run_python(dir_ + "/rng.py " + dir_ + " " + seeds + " " + sizes);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
};
std::string NumpyRandomTest::dir_;

TEST_F(NumpyRandomTest, ShuffleMatchesNumpyForAllDtypesAndSizes) {
  for (auto seed : kSeeds)
    for (auto n : kSizes) {
      std::vector<int32_t> a32(static_cast<size_t>(n));
      std::vector<uint32_t> u32(static_cast<size_t>(n));
      std::vector<int64_t> a64(static_cast<size_t>(n));
      std::iota(a32.begin(), a32.end(), 0);
      std::iota(u32.begin(), u32.end(), 0u);
      std::iota(a64.begin(), a64.end(), int64_t(0));
      NumpyRandomState(seed).shuffle(std::span<int32_t>(a32));
      NumpyRandomState(seed).shuffle(std::span<uint32_t>(u32));
      NumpyRandomState(seed).shuffle(std::span<int64_t>(a64));
      const std::string base = dir_ + "/shuffle_" + std::to_string(seed) + "_" + std::to_string(n) + "_";
      const auto e32 = read_raw<int64_t>(base + "int32.bin");
      const auto eu32 = read_raw<int64_t>(base + "uint32.bin");
      const auto e64 = read_raw<int64_t>(base + "int64.bin");
      ASSERT_EQ(e32.size(), size_t(n));
      ASSERT_EQ(e64, std::vector<int64_t>(a64.begin(), a64.end())) << "seed " << seed << " n " << n;
      ASSERT_EQ(e32, std::vector<int64_t>(a32.begin(), a32.end())) << "seed " << seed << " n " << n;
      ASSERT_EQ(eu32, std::vector<int64_t>(u32.begin(), u32.end())) << "seed " << seed << " n " << n;
    }
}

TEST_F(NumpyRandomTest, RandintMatchesNumpyIncluding64BitRanges) {
  for (auto seed : kSeeds) {
    NumpyRandomState r(seed);
    std::vector<int64_t> got;
    for (int64_t high : {int64_t(1), int64_t(2), int64_t(3), int64_t(7), int64_t(8), int64_t(9), int64_t(1000),
                         int64_t(1) << 31, (int64_t(1) << 32) - 1, int64_t(1) << 32, (int64_t(1) << 32) + 1,
                         (int64_t(1) << 40) + 12345, int64_t(1) << 62})
      for (int k = 0; k < 5; ++k) got.push_back(r.randint(0, high));
    got.push_back(r.randint(-5, 17));
    EXPECT_EQ(got, read_raw<int64_t>(dir_ + "/randint_" + std::to_string(seed) + ".bin")) << "seed " << seed;
  }
}

TEST_F(NumpyRandomTest, RandomSampleAndRawDrawsMatchNumpy) {
  for (auto seed : kSeeds) {
    NumpyRandomState r(seed);
    std::vector<double> got;
    for (int k = 0; k < 20; ++k) got.push_back(r.random_sample());
    const auto expected = read_raw<double>(dir_ + "/uniform_" + std::to_string(seed) + ".bin");
    ASSERT_EQ(got.size(), expected.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(std::memcmp(&got[k], &expected[k], 8), 0) << k;
    // randint(0, 2**32, uint64) is a plain 32-bit output (mask 0xffffffff never rejects): the raw MT19937 stream.
    NumpyRandomState raw(seed);
    std::vector<uint64_t> words;
    for (int k = 0; k < 8; ++k) words.push_back(raw.next_uint32());
    EXPECT_EQ(words, read_raw<uint64_t>(dir_ + "/raw_" + std::to_string(seed) + ".bin"));
  }
}

TEST(NumpyRandom, KnownFirstOutputOfInitGenrand5489) {
  // MT19937 reference: init_genrand(5489) gives 3499211612 first (the generator's published test value).
  NumpyRandomState r(5489);
  EXPECT_EQ(r.next_uint32(), 3499211612u);
}

}  // namespace
