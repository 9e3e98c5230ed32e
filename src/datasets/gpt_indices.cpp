// defines: GPTDataset index construction (split, epochs, document/sample/shuffle indices) as Megatron M23 builds it
#include "datasets/gpt_indices.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "datasets/numpy_random.h"
#include "util/error.h"

namespace lmforge::datasets {

const char* split_name(Split split) {
  switch (split) {
    case Split::Train: return "train";
    case Split::Valid: return "valid";
    case Split::Test: return "test";
  }
  return "?";
}

std::array<double, 3> parse_split(const std::string& split) {
  // M23: list(map(float, re.findall(r"[.0-9]+", split))), padded to 3, normalised.
  std::vector<double> values;
  for (size_t i = 0; i < split.size();) {
    auto in_run = [&](char c) { return c == '.' || (c >= '0' && c <= '9'); };
    if (!in_run(split[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < split.size() && in_run(split[j])) ++j;
    const std::string run = split.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(run.c_str(), &end);
    if (end != run.c_str() + run.size() || run == "." || errno == ERANGE)
      throw Error("--split \"" + split + "\": \"" + run + "\" (at character " + std::to_string(i) + ") is not a number");
    values.push_back(v);
    i = j;
  }
  if (values.size() > 3)
    throw Error("--split \"" + split + "\": " + std::to_string(values.size()) + " numbers, at most 3 (train, valid, test)");
  values.resize(3, 0.0);
  // numpy.sum of three float64 is ((0 + a) + b) + c.
  double sum = 0.0;
  for (double v : values) sum += v;
  if (!(sum > 0.0) || !std::isfinite(sum)) throw Error("--split \"" + split + "\": the weights must have a positive sum");
  return {values[0] / sum, values[1] / sum, values[2] / sum};
}

int64_t python_round(double x) {
  // Python's round(): nearest integer, halves to even — nearbyint in the default rounding mode does exactly that.
  return int64_t(std::nearbyint(x));
}

std::array<int64_t, 4> split_bounds(const std::array<double, 3>& weights, int64_t n) {
  std::array<int64_t, 4> b{0, 0, 0, 0};
  for (int k = 0; k < 3; ++k) b[k + 1] = b[k] + python_round(weights[k] * double(n));
  const int64_t shift = b[3] - n;
  for (int k = 1; k < 4; ++k) b[k] -= shift;
  return b;
}

std::array<int64_t, 3> samples_per_split(int64_t train_iters, int64_t global_batch, int64_t eval_iters,
                                         int64_t eval_interval) {
  if (eval_interval <= 0) throw Error("--eval-interval must be positive, got " + std::to_string(eval_interval));
  return {train_iters * global_batch, eval_iters * global_batch * (train_iters / eval_interval + 1),
          eval_iters * global_batch};
}

int64_t num_epochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples) {
  if (seq_length < 1) throw Error("sequence length must be positive, got " + std::to_string(seq_length));
  if (tokens_per_epoch < 2)
    throw Error("the split holds " + std::to_string(tokens_per_epoch) +
                " token(s); a GPT sample needs at least 2 (sequence length + 1 tokens, shared across epochs)");
  // Each sample reads L+1 tokens and consecutive samples share one, so E epochs give (E·T − 1) / L samples.
  int64_t epochs = 0, tokens = 0;
  do {
    ++epochs;
    tokens += tokens_per_epoch;
  } while ((tokens - 1) / seq_length < num_samples);
  return epochs;
}

EpochPlan plan_epochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples) {
  EpochPlan p;
  p.epochs = num_epochs(tokens_per_epoch, seq_length, num_samples);
  p.total_samples = (p.epochs * tokens_per_epoch - 1) / seq_length;
  if (p.epochs > 1) {
    p.samples_before_final_epoch = ((p.epochs - 1) * tokens_per_epoch - 1) / seq_length;
    const int64_t from_last = num_samples - p.samples_before_final_epoch;
    const int64_t per_epoch = (tokens_per_epoch - 1) / seq_length;
    // A short last epoch is shuffled on its own so its few samples are not spread over (and drawn from) the whole
    // run; Megatron's threshold is int(0.80 · per_epoch) (BS used 0.95).
    p.separate_final_epoch = from_last < int64_t(0.80 * double(per_epoch));
  }
  return p;
}

std::vector<int32_t> build_document_index(int64_t begin, int64_t end, int64_t epochs, bool separate_final_epoch,
                                          NumpyRandomState& rng) {
  if (!separate_final_epoch || epochs == 1) {
    const int64_t count = end - begin;
    std::vector<int32_t> index(size_t(count * epochs));
    for (int64_t e = 0; e < epochs; ++e)
      for (int64_t d = 0; d < count; ++d) index[size_t(e * count + d)] = int32_t(begin + d);
    rng.shuffle(std::span<int32_t>(index));
    return index;
  }
  std::vector<int32_t> first = build_document_index(begin, end, epochs - 1, false, rng);
  const std::vector<int32_t> last = build_document_index(begin, end, 1, false, rng);
  first.insert(first.end(), last.begin(), last.end());
  return first;
}

std::vector<int32_t> build_sample_index(std::span<const int32_t> sizes, std::span<const int32_t> document_index,
                                        int32_t seq_length, int64_t epochs, int64_t tokens_per_epoch) {
  const int64_t num_samples = (epochs * tokens_per_epoch - 1) / seq_length;
  if (num_samples + 1 > int64_t(INT32_MAX) || int64_t(document_index.size()) > int64_t(INT32_MAX))
    throw Error("sample index too large for Megatron's int32 layout (" + std::to_string(num_samples) + " samples)");
  std::vector<int32_t> out(size_t(2 * (num_samples + 1)));
  int64_t doc_pos = 0;     // position in document_index
  int32_t doc_offset = 0;  // tokens of that document already behind the current sample start
  out[0] = 0;
  out[1] = 0;
  for (int64_t s = 1; s <= num_samples; ++s) {
    int32_t remaining = seq_length + 1;
    while (remaining != 0) {
      const int32_t doc_length = sizes[size_t(document_index[size_t(doc_pos)])] - doc_offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        // The sample ends inside this document; its last token (−1) is also the next sample's first.
        doc_offset += remaining + doc_length - 1;
        remaining = 0;
      } else {
        ++doc_pos;
        doc_offset = 0;
      }
    }
    out[size_t(2 * s)] = int32_t(doc_pos);
    out[size_t(2 * s + 1)] = doc_offset;
  }
  return out;
}

std::vector<int64_t> build_shuffle_index(int64_t first, int64_t total, NumpyRandomState& rng) {
  // The draws do not depend on the element type; shuffling 4-byte elements when they fit halves the memory traffic
  // of the random swaps (Megatron's array is uint32 too below 2^32−2 samples).
  if (total < int64_t(UINT32_MAX)) {
    std::vector<uint32_t> narrow(static_cast<size_t>(total));
    std::iota(narrow.begin(), narrow.end(), 0U);
    rng.shuffle(std::span<uint32_t>(narrow.data(), size_t(first)));
    if (first != total) rng.shuffle(std::span<uint32_t>(narrow.data() + first, size_t(total - first)));
    return std::vector<int64_t>(narrow.begin(), narrow.end());
  }
  std::vector<int64_t> index(static_cast<size_t>(total));
  std::iota(index.begin(), index.end(), int64_t(0));
  rng.shuffle(std::span<int64_t>(index.data(), size_t(first)));
  if (first != total) rng.shuffle(std::span<int64_t>(index.data() + first, size_t(total - first)));
  return index;
}

GptIndices build_gpt_indices(std::span<const int32_t> sizes, int64_t begin, int64_t end, int64_t num_samples,
                             int32_t seq_length, uint32_t seed) {
  if (begin < 0 || end > int64_t(sizes.size()) || begin >= end)
    throw Error("GPT split [" + std::to_string(begin) + ", " + std::to_string(end) + ") is empty or outside the " +
                std::to_string(sizes.size()) + " sequences of the dataset");
  if (seq_length < 1) throw Error("sequence length must be positive, got " + std::to_string(seq_length));
  GptIndices g;
  for (int64_t i = begin; i < end; ++i) g.tokens_per_epoch += sizes[size_t(i)];
  g.plan = plan_epochs(g.tokens_per_epoch, seq_length, num_samples);
  NumpyRandomState rng(seed);
  g.document_index = build_document_index(begin, end, g.plan.epochs, g.plan.separate_final_epoch, rng);
  g.sample_index = build_sample_index(sizes, g.document_index, seq_length, g.plan.epochs, g.tokens_per_epoch);
  const int64_t total = g.num_samples();
  g.shuffle_is_int64 = total >= int64_t(UINT32_MAX) - 1;
  g.shuffle_index = build_shuffle_index(g.plan.separate_final_epoch ? g.plan.samples_before_final_epoch : total,
                                        total, rng);
  return g;
}

void sample_pieces(std::span<const int32_t> sizes, std::span<const int32_t> document_index,
                   std::span<const int32_t> sample_index, std::span<const int64_t> shuffle_index, int64_t i,
                   std::vector<SamplePiece>& pieces) {
  pieces.clear();
  if (i < 0 || i >= int64_t(shuffle_index.size()))
    throw Error("GPT sample " + std::to_string(i) + " is out of range [0, " + std::to_string(shuffle_index.size()) + ")");
  const int64_t j = shuffle_index[size_t(i)];
  const int64_t p0 = sample_index[size_t(2 * j)], o0 = sample_index[size_t(2 * j + 1)];
  const int64_t p1 = sample_index[size_t(2 * j + 2)], o1 = sample_index[size_t(2 * j + 3)];
  if (p0 == p1) {
    pieces.push_back({document_index[size_t(p0)], o0, o1 - o0 + 1});
    return;
  }
  for (int64_t p = p0; p <= p1; ++p) {
    const int64_t seq = document_index[size_t(p)];
    const int64_t offset = p == p0 ? o0 : 0;
    const int64_t end = p == p1 ? o1 + 1 : sizes[size_t(seq)];
    pieces.push_back({seq, offset, end - offset});
  }
}

}  // namespace lmforge::datasets
