// defines: BertDataset (Megatron's build_training_sample per row of the samples map), build_bert_datasets, JSON line
#include "datasets/bert_dataset.h"

#include <algorithm>

#include "util/error.h"

namespace lmforge::datasets {

namespace {

// Appends sentences [first, end) to `out`.
void append_sentences(const data::IndexedDataset& dataset, uint64_t first, uint64_t end, std::vector<int32_t>& scratch,
                      std::vector<int32_t>& out) {
  for (uint64_t s = first; s < end; ++s) {
    dataset.read_sequence(s, scratch);
    out.insert(out.end(), scratch.begin(), scratch.end());
  }
}

// A token range [lo, hi) of a segment that truncation trims from either end.
struct Segment {
  const std::vector<int32_t>* tokens;
  size_t lo, hi;
  size_t size() const { return hi - lo; }
};

// truncate_segments: while |A| + |B| > target, trim the longer (B on a tie): front if random() < 0.5, else back.
bool truncate_segments(Segment& a, Segment& b, uint64_t target, NumpyRandomState& rng) {
  if (a.size() == 0) throw Error("BertDataset: segment A is empty (an empty sentence in the data; Megatron asserts)");
  if (a.size() + b.size() <= target) return false;
  while (a.size() + b.size() > target) {
    Segment& s = a.size() > b.size() ? a : b;
    if (rng.random_sample() < 0.5) ++s.lo;
    else --s.hi;
  }
  return true;
}

}  // namespace

BertDataset::BertDataset(std::shared_ptr<const SentenceSplits> data, Split split, int64_t num_samples,
                         const BertDatasetConfig& config)
    : SentenceDataset(std::move(data), split), config_(config) {
  // [CLS], [SEP] and [SEP] take 3 positions and Megatron's build_mapping asserts a target length > 1.
  if (config_.seq_length < 5)
    throw Error("--seq-length " + std::to_string(config_.seq_length) + " is too short for train bert: the minimum is 5 "
                "([CLS] A [SEP] B [SEP] takes 3 positions, and Megatron's samples map needs a target length of at "
                "least 2)");
  if (!(config_.mask_prob >= 0 && config_.mask_prob <= 1))
    throw Error("BertDataset: --mask-prob must be in [0, 1], got " + std::to_string(config_.mask_prob));
  if (config_.vocab.continuation.empty() || config_.vocab.random_ids.empty())
    throw Error("BertDataset: no vocabulary given (load_bert_vocab)");
  SamplesMapOptions o;
  o.max_num_samples = num_samples;
  o.max_len = config_.seq_length - 3;
  o.short_seq_prob = config_.short_seq_prob;
  o.seed = config_.seed;
  o.min_sentences = config_.binary_head ? 2 : 1;
  load_samples_map(config_.cache_dir, o);
  if (config_.binary_head)
    for (int64_t i = 0; i < map_.map.size(); ++i) {
      const SamplesMapRow r = map_.map.row(i);
      if (r.end - r.first < 2)
        throw Error(map_.path + ": row " + std::to_string(i) + " holds one sentence, so this map was built "
                    "without the binary head (Megatron's cache name does not record it); delete the file or pass "
                    "--bert-no-binary-head");
    }
}

void BertDataset::sample(int64_t i, BertSample& out) const {
  if (i < 0 || i >= size())
    throw Error("BertDataset: sample " + std::to_string(i) + " outside [0, " + std::to_string(size()) + ")");
  const SamplesMapRow row = map_.map.row(i);
  const data::IndexedDataset& dataset = *data_->dataset;
  // RandomState((seed + idx) mod 2^32).
  NumpyRandomState rng(uint32_t(uint64_t(int64_t(config_.seed) + i)));
  // The sentences go to scratch_a (A) and scratch_b (B); a swap exchanges the segments' roles, not the buffers, so
  // each buffer keeps its capacity and a warm BertSample allocates nothing.
  std::vector<int32_t>& a = out.scratch_a;
  std::vector<int32_t>& b = out.scratch_b;
  a.clear();
  b.clear();
  out.is_random = 0;
  if (config_.binary_head) {
    // A = the first a_end sentences (a_end uniform in 1..n−1, 1 without a draw for n = 2), B = the rest; swapped
    // with probability 1/2 (is_random). B always comes from the same document: sentence-order prediction.
    const uint64_t n = row.end - row.first;
    const uint64_t a_end = n >= 3 ? uint64_t(rng.randint(1, int64_t(n))) : 1;
    append_sentences(dataset, row.first, row.first + a_end, out.scratch_sentence, a);
    append_sentences(dataset, row.first + a_end, row.end, out.scratch_sentence, b);
    out.is_random = rng.random_sample() < 0.5 ? 1 : 0;
  } else {
    append_sentences(dataset, row.first, row.end, out.scratch_sentence, a);
  }
  Segment sa{&a, 0, a.size()}, sb{&b, 0, b.size()};
  if (out.is_random) std::swap(sa, sb);
  out.truncated = truncate_segments(sa, sb, row.target, rng) ? 1 : 0;

  // [CLS] A [SEP] (types 0), then B [SEP] (types 1) when B is non-empty, then padding.
  const MaskedLmVocab& v = config_.vocab;
  const size_t L = size_t(config_.seq_length);
  out.text.assign(L, v.pad);
  out.types.assign(L, v.pad);  // Megatron pads types with the pad *token* id
  size_t len = 0;
  auto put = [&](int32_t token, int32_t type) {
    out.text[len] = token;
    out.types[len++] = type;
  };
  put(v.cls, 0);
  for (size_t k = sa.lo; k < sa.hi; ++k) put((*sa.tokens)[k], 0);
  put(v.sep, 0);
  if (sb.size()) {
    for (size_t k = sb.lo; k < sb.hi; ++k) put((*sb.tokens)[k], 1);
    put(v.sep, 1);
  }

  MaskingOptions mo;
  mo.mask_prob = config_.mask_prob;
  create_masked_lm_predictions(std::span<int32_t>(out.text.data(), len), config_.mask_prob * double(row.target), v,
                               mo, rng, out.scratch_masking);

  out.labels.assign(L, -1);
  out.loss_mask.assign(L, 0);
  out.padding_mask.assign(L, 0);
  std::fill(out.padding_mask.begin(), out.padding_mask.begin() + std::ptrdiff_t(len), 1);
  const MaskingWorkspace& m = out.scratch_masking;
  for (size_t k = 0; k < m.positions.size(); ++k) {
    out.labels[size_t(m.positions[k])] = m.labels[k];
    out.loss_mask[size_t(m.positions[k])] = 1;
  }
}

BertDatasets build_bert_datasets(const BertDatasetConfig& config, const std::array<int64_t, 3>& samples_per_split) {
  return build_sentence_datasets<BertDataset>(config, samples_per_split);
}

void append_json_array(std::string& out, const char* name, const std::vector<int32_t>& values) {
  out += ", \"";
  out += name;
  out += "\": [";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(values[i]);
  }
  out += "]";
}

std::string bert_sample_json(Split split, int64_t index, const BertSample& s) {
  std::string out = "{\"split\": \"" + std::string(split_name(split)) + "\", \"index\": " + std::to_string(index);
  append_json_array(out, "text", s.text);
  append_json_array(out, "types", s.types);
  append_json_array(out, "labels", s.labels);
  out += ", \"is_random\": " + std::to_string(s.is_random);
  append_json_array(out, "loss_mask", s.loss_mask);
  append_json_array(out, "padding_mask", s.padding_mask);
  out += ", \"truncated\": " + std::to_string(s.truncated) + "}\n";
  return out;
}

}  // namespace lmforge::datasets
