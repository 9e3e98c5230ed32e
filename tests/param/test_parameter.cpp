// param::Parameter and ParamTable: the local runs of every split kind cover each rank's piece exactly once and
// the ranks' pieces tile the whole tensor; slice and place are inverse; offsets follow add() order; bad splits and
// duplicate names are errors naming the tensor.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "param/parameter.h"
#include "util/error.h"

namespace lmforge::param {
namespace {

struct Split {
  std::vector<int64_t> shape;
  int split_dim;
  int blocks;
};

// For each tensor-parallel size, every whole element is held by exactly one rank (replicated: by all), each rank's
// runs fill its local piece 0..numel exactly once in order, and slice() then place() rebuilds the whole tensor.
TEST(Parameter, PiecesTileTheWholeTensorForEverySplit) {
  const std::vector<Split> splits = {
      {{12, 4}, 0, 1},   // row split (vocabulary-parallel embedding)
      {{4, 12}, 1, 1},   // column split (column-parallel linear, Conv1D layout)
      {{4, 24}, 1, 3},   // fused q|k|v: three blocks, each split
      {{24}, 0, 3},      // its bias
      {{6, 2, 4}, 1, 1}, // a middle dimension
      {{8}, -1, 1},      // replicated
  };
  for (const Split& s : splits)
    for (int T : {1, 2, 4}) {
      if (s.split_dim >= 0 && s.shape[(size_t)s.split_dim] % (s.blocks * T) != 0) continue;
      std::vector<int> holders;
      std::vector<float> whole;
      std::vector<std::vector<float>> pieces(T);
      for (int r = 0; r < T; r++) {
        ParamTable table(r, T);
        table.add("w", s.shape, true, s.split_dim, s.blocks);
        const Parameter& p = table[0];
        if (whole.empty()) {
          whole.resize(p.whole_numel());
          std::iota(whole.begin(), whole.end(), 0.0f);
          holders.assign(whole.size(), 0);
        }
        EXPECT_EQ(p.numel, s.split_dim < 0 ? p.whole_numel() : p.whole_numel() / (size_t)T);
        size_t expected_local = 0;
        for_each_local_run(p, r, T, [&](const LocalRun& run) {
          EXPECT_EQ(run.local_offset, expected_local) << "runs in local order";
          expected_local += run.length;
          for (size_t e = 0; e < run.length; e++) holders[run.whole_offset + e]++;
        });
        EXPECT_EQ(expected_local, p.numel);
        pieces[(size_t)r].resize(p.numel);
        table.slice(0, whole.data(), pieces[(size_t)r].data());
      }
      for (size_t e = 0; e < holders.size(); e++)
        ASSERT_EQ(holders[e], s.split_dim < 0 ? T : 1) << "element " << e << " split_dim " << s.split_dim << " T " << T;
      std::vector<float> rebuilt(whole.size(), -1.0f);
      ParamTable any(0, T);
      any.add("w", s.shape, true, s.split_dim, s.blocks);
      for (int r = 0; r < T; r++) any.place(0, r, pieces[(size_t)r].data(), rebuilt.data());
      EXPECT_EQ(rebuilt, whole) << "split_dim " << s.split_dim << " T " << T;
    }
}

// Fused q|k|v at T = 2: rank 1 holds the second half of each block, in block order.
TEST(Parameter, FusedBlocksGiveEachRankItsPieceOfEveryBlock) {
  ParamTable table(1, 2);
  table.add("qkv.bias", {12}, false, 0, 3);
  std::vector<float> whole(12), piece(6);
  std::iota(whole.begin(), whole.end(), 0.0f);
  table.slice(0, whole.data(), piece.data());
  EXPECT_EQ(piece, (std::vector<float>{2, 3, 6, 7, 10, 11}));
}

TEST(ParamTable, OffsetsFollowAddOrderAndNamesAreFound) {
  ParamTable table(0, 2);
  table.add("a", {4, 6}, true, 1);
  table.add("b", {6}, false);
  table.add("c", {8, 2}, true, 0);
  EXPECT_EQ(table[0].offset, 0u);
  EXPECT_EQ(table[1].offset, 12u);
  EXPECT_EQ(table[2].offset, 18u);
  EXPECT_EQ(table.local_numel(), 26u);
  EXPECT_EQ(table.whole_numel(), 24u + 6u + 16u);
  EXPECT_EQ(table.index_of("c"), 2u);
  EXPECT_TRUE(table.contains("b"));
  EXPECT_FALSE(table.contains("d"));
  EXPECT_EQ(table[0].local_shape, (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(table[1].replicated());
}

TEST(ParamTable, BadSplitsAndDuplicatesNameTheTensor) {
  ParamTable table(0, 4);
  try {
    table.add("h.0.attn.c_attn.weight", {8, 18}, true, 1, 3);  // blocks of 6 do not split over 4 ranks
    FAIL() << "an indivisible split was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("h.0.attn.c_attn.weight"), std::string::npos) << e.what();
  }
  table.add("x", {4}, false);
  EXPECT_THROW(table.add("x", {4}, false), Error);
  EXPECT_THROW(table.find("nope"), Error);
}

}  // namespace
}  // namespace lmforge::param
