// defines: Megatron (M23) GPTDataset index construction on plain arrays: --split parsing and bounds, samples per
//   split, epochs, final-epoch separation, document_index, sample_index, shuffle_index, sample windows
// Rules: ../shared/docs/megatron-data-format.md §6 (M23 megatron/core/datasets/gpt_dataset.py + helpers.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lmforge::datasets {

enum class Split : int { Train = 0, Valid = 1, Test = 2 };
constexpr int kNumSplits = 3;
const char* split_name(Split split);  // "train", "valid", "test" (Megatron's Split enum names)

// "949,50,1" → normalised weights. Every [.0-9]+ run is a number (any separator works, as in M23), padded with 0 to
// three, each ≥ 0, divided by their sum. Error on more than three numbers, a malformed number or a zero sum.
std::array<double, 3> parse_split(const std::string& split);
// Python's round() of a double: nearest, ties to even.
int64_t python_round(double x);
// M23's shift rule: b0 = 0, b_{k+1} = b_k + round(w_k·n), then every boundary after b0 moves by −(b3 − n).
// Split k is [b_k, b_{k+1}).
std::array<int64_t, 4> split_bounds(const std::array<double, 3>& weights, int64_t n);

// Samples requested per split by Megatron's trainer: train_iters·gbs, eval_iters·gbs·(train_iters/eval_interval + 1),
// eval_iters·gbs.
std::array<int64_t, 3> samples_per_split(int64_t train_iters, int64_t global_batch, int64_t eval_iters,
                                         int64_t eval_interval);

// Smallest E ≥ 1 with (E·T − 1) / L ≥ n (T = tokens per epoch, L = sequence length). Error when T < 2 (no sample
// can ever be formed) instead of looping forever as Megatron would.
int64_t num_epochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples);

struct EpochPlan {
  int64_t epochs = 1;
  bool separate_final_epoch = false;
  int64_t samples_before_final_epoch = 0;  // ((E−1)·T − 1) / L, meaningful when separated
  int64_t total_samples = 0;               // (E·T − 1) / L = rows of sample_index − 1
};
// E, and whether the final epoch is shuffled apart: from_last < int(0.80·per_epoch) (M23 threshold).
EpochPlan plan_epochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples);

// The three index arrays of one GPTDataset. shuffle_index is uint32 in Megatron unless total ≥ 2^32−2, then int64;
// it is kept as int64 here and shuffle_is_int64 says which dtype the cache files use.
struct GptIndices {
  std::vector<int32_t> document_index;  // sequence ids, E·|docs| entries
  std::vector<int32_t> sample_index;    // [(total_samples+1) × 2]: (position in document_index, token offset)
  std::vector<int64_t> shuffle_index;   // total_samples entries
  bool shuffle_is_int64 = false;
  EpochPlan plan;
  int64_t tokens_per_epoch = 0;
  int64_t num_samples() const { return int64_t(sample_index.size() / 2) - 1; }
};

// Build all three as Megatron does for documents = sequence ids [begin, end) of a dataset with the given sequence
// lengths: one RandomState(seed) shuffles the document index (first the E−1 block, then the last epoch when
// separated) and then the shuffle index.
GptIndices build_gpt_indices(std::span<const int32_t> sizes, int64_t begin, int64_t end, int64_t num_samples,
                             int32_t seq_length, uint32_t seed);

// Pieces (exposed for tests and for the BERT side).
class NumpyRandomState;
std::vector<int32_t> build_document_index(int64_t begin, int64_t end, int64_t epochs, bool separate_final_epoch,
                                          NumpyRandomState& rng);
// helpers.cpp build_sample_idx: walk document_index consuming L+1 tokens per sample, sharing the boundary token.
std::vector<int32_t> build_sample_index(std::span<const int32_t> sizes, std::span<const int32_t> document_index,
                                        int32_t seq_length, int64_t epochs, int64_t tokens_per_epoch);
// Shuffled [0, first) followed by a separately shuffled [first, total) (one block when first == total).
std::vector<int64_t> build_shuffle_index(int64_t first, int64_t total, NumpyRandomState& rng);

// One piece of a sample window: tokens [offset, offset+count) of sequence `sequence`.
struct SamplePiece {
  int64_t sequence;
  int64_t offset;
  int64_t count;
};
// Sample i (0 ≤ i < num_samples) as the pieces Megatron concatenates: rows shuffle_index[i] and +1 of sample_index,
// inclusive of the end offset, giving L+1 tokens in all.
void sample_pieces(std::span<const int32_t> sizes, std::span<const int32_t> document_index,
                   std::span<const int32_t> sample_index, std::span<const int64_t> shuffle_index, int64_t i,
                   std::vector<SamplePiece>& pieces);

}  // namespace lmforge::datasets
