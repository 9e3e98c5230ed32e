// balanced_counts (parallel/balanced_schedule.h): whole micro-batches per data-parallel rank for
// --balance-data-parallel — every rank at least one, the total kept, shares proportional to speed, and the makespan no worse than any other
// split (checked by enumerating every split of small cases).
#include <gtest/gtest.h>

#include <algorithm>

#include "parallel/balanced_schedule.h"
#include "util/error.h"

namespace lmforge::parallel {
namespace {

double makespan(const std::vector<int64_t>& counts, const std::vector<double>& t) {
  double worst = 0.0;
  for (size_t r = 0; r < counts.size(); r++) worst = std::max(worst, (double)counts[r] * t[r]);
  return worst;
}

TEST(BalancedCounts, EqualSpeedsSplitEvenly) {
  EXPECT_EQ(balanced_counts({1.0, 1.0}, 8), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(balanced_counts({0.2, 0.2, 0.2, 0.2}, 4), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(BalancedCounts, HalfSpeedRankGetsAThird) {
  // Rank 1 takes twice as long per micro-batch: of 12 micro-batches it runs 4, rank 0 runs 8 (both 8 units).
  EXPECT_EQ(balanced_counts({1.0, 2.0}, 12), (std::vector<int64_t>{8, 4}));
  // Every rank keeps at least one, however slow.
  EXPECT_EQ(balanced_counts({1.0, 1000.0}, 6), (std::vector<int64_t>{5, 1}));
}

TEST(BalancedCounts, MinimisesTheMakespanOverEverySplit) {
  const std::vector<std::vector<double>> speeds = {{1.0, 1.7, 3.1}, {0.5, 0.5, 2.0}, {2.0, 1.0, 1.3}};
  for (const std::vector<double>& t : speeds)
    for (int64_t m = 3; m <= 14; m++) {
      const std::vector<int64_t> c = balanced_counts(t, m);
      ASSERT_EQ(c[0] + c[1] + c[2], m);
      double best = 1e300;
      for (int64_t a = 1; a <= m - 2; a++)
        for (int64_t b = 1; a + b <= m - 1; b++) best = std::min(best, makespan({a, b, m - a - b}, t));
      EXPECT_DOUBLE_EQ(makespan(c, t), best) << "m " << m;
    }
}

TEST(BalancedCounts, RefusesFewerMicroBatchesThanRanks) {
  EXPECT_THROW(balanced_counts({1.0, 1.0, 1.0}, 2), Error);
}

}  // namespace
}  // namespace lmforge::parallel
