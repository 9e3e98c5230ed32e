// defines: T5Dataset (Megatron's T5 build_training_sample per row of the samples map), its masks, JSON line
#include "datasets/t5_dataset.h"

#include <algorithm>

#include "datasets/bert_dataset.h"
#include "util/error.h"

namespace lmforge::datasets {

// ---- masks (token id ≥ 1 is a real token) ----

namespace {

void pair_mask(const std::vector<int32_t>& rows, const std::vector<int32_t>& cols, bool causal,
               std::vector<int32_t>& out) {
  out.assign(rows.size() * cols.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 1) continue;
    const size_t end = causal ? std::min(i + 1, cols.size()) : cols.size();
    for (size_t j = 0; j < end; ++j) out[i * cols.size() + j] = cols[j] >= 1 ? 1 : 0;
  }
}

}  // namespace

void T5Sample::enc_mask(std::vector<int32_t>& out) const { pair_mask(text_enc, text_enc, false, out); }
void T5Sample::dec_mask(std::vector<int32_t>& out) const { pair_mask(text_dec, text_dec, true, out); }
void T5Sample::enc_dec_mask(std::vector<int32_t>& out) const { pair_mask(text_dec, text_enc, false, out); }

// ---- dataset ----

T5Dataset::T5Dataset(std::shared_ptr<const SentenceSplits> data, Split split, int64_t num_samples,
                     const T5DatasetConfig& config)
    : SentenceDataset(std::move(data), split), config_(config) {
  // The encoder's text gets 2 positions fewer than --encoder-seq-length as its target, and Megatron's build_mapping
  // asserts a target length > 1; the decoder holds [BOS] and at least one token.
  if (config_.encoder_seq_length < 4)
    throw Error("--encoder-seq-length (--seq-length) " + std::to_string(config_.encoder_seq_length) +
                " is too short for train t5: the minimum is 4 (the samples map's target length, 2 less, must be at "
                "least 2, as Megatron asserts)");
  if (config_.decoder_seq_length < 2)
    throw Error("--decoder-seq-length " + std::to_string(config_.decoder_seq_length) +
                " is too short for train t5: the minimum is 2 ([BOS] and one token)");
  if (!(config_.mask_prob >= 0 && config_.mask_prob <= 1))
    throw Error("T5Dataset: --mask-prob must be in [0, 1], got " + std::to_string(config_.mask_prob));
  if (config_.vocab.continuation.empty()) throw Error("T5Dataset: no vocabulary given (load_bert_vocab)");
  if (config_.vocab.sentinels.empty())
    throw Error("T5Dataset: the vocabulary has no sentinel tokens: pass --vocab-extra-ids (Megatron uses 100)");
  if (config_.vocab.bos < 0 || config_.vocab.eos < 0) throw Error("T5Dataset: the vocabulary has no [BOS]/[EOS]");
  SamplesMapOptions o;
  o.max_num_samples = num_samples;
  o.max_len = config_.encoder_seq_length - 2;
  o.short_seq_prob = config_.short_seq_prob;
  o.seed = config_.seed;
  o.min_sentences = 1;
  load_samples_map(config_.cache_dir, o);
}

void T5Dataset::sample(int64_t i, T5Sample& out) const {
  if (i < 0 || i >= size())
    throw Error("T5Dataset: sample " + std::to_string(i) + " outside [0, " + std::to_string(size()) + ")");
  // RandomState(seed + idx), not reduced: numpy rejects a seed ≥ 2^32.
  const int64_t seed = int64_t(config_.seed) + i;
  if (seed > int64_t(UINT32_MAX))
    throw Error("T5Dataset: seed + index = " + std::to_string(seed) + " ≥ 2^32 (Megatron's RandomState raises here)");
  NumpyRandomState rng{uint32_t(seed)};
  const SamplesMapRow row = map_.map.row(i);

  // The row's sentences concatenated and cut to the target (no randomness).
  std::vector<int32_t>& tokens = out.scratch_tokens;
  tokens.clear();
  for (uint64_t s = row.first; s < row.end; ++s) {
    data_->dataset->read_sequence(s, out.scratch_sentence);
    tokens.insert(tokens.end(), out.scratch_sentence.begin(), out.scratch_sentence.end());
  }
  out.truncated = tokens.size() > row.target ? 1 : 0;
  if (out.truncated) tokens.resize(size_t(row.target));

  MaskingOptions mo;
  mo.mask_prob = config_.mask_prob;
  mo.max_ngrams = 10;
  mo.geometric = true;
  mo.t5_style = true;
  const MaskingWorkspace& m = out.scratch_masking;
  create_masked_lm_predictions(tokens, config_.mask_prob * double(row.target), config_.vocab, mo, rng,
                               out.scratch_masking);

  // Spans in order of their first position; span s gets sentinel s.
  const size_t spans = m.span_begin.size() - 1;
  const MaskedLmVocab& v = config_.vocab;
  if (spans > v.sentinels.size())
    throw Error("T5Dataset: sample " + std::to_string(i) + " has " + std::to_string(spans) + " spans but only " +
                std::to_string(v.sentinels.size()) + " sentinels (--vocab-extra-ids)");
  std::vector<int32_t>& order = out.scratch_span_order;
  order.resize(spans);
  for (size_t s = 0; s < spans; ++s) order[s] = int32_t(s);
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return m.span_positions[size_t(m.span_begin[size_t(x)])] < m.span_positions[size_t(m.span_begin[size_t(y)])];
  });

  const size_t Le = size_t(config_.encoder_seq_length), Ld = size_t(config_.decoder_seq_length);
  out.text_enc.clear();
  out.text_dec.assign(1, v.bos);
  size_t start = 0;
  for (size_t k = 0; k < spans; ++k) {
    const size_t s = size_t(order[k]);
    const size_t b = size_t(m.span_begin[s]), e = size_t(m.span_begin[s + 1]);
    const int32_t sentinel = v.sentinels[k];
    // encoder: tokens before the span, then its sentinel; decoder: the sentinel, then the span's original tokens.
    const size_t first = size_t(m.span_positions[b]);
    if (first > start) out.text_enc.insert(out.text_enc.end(), tokens.begin() + std::ptrdiff_t(start),
                                           tokens.begin() + std::ptrdiff_t(first));
    out.text_enc.push_back(sentinel);
    out.text_dec.push_back(sentinel);
    out.text_dec.insert(out.text_dec.end(), m.labels.begin() + std::ptrdiff_t(b), m.labels.begin() + std::ptrdiff_t(e));
    start = size_t(m.span_positions[e - 1]) + 1;
  }
  if (start < tokens.size())
    out.text_enc.insert(out.text_enc.end(), tokens.begin() + std::ptrdiff_t(start), tokens.end());
  const size_t enc_len = out.text_enc.size(), dec_len = out.text_dec.size();
  if (enc_len > Le || dec_len > Ld)
    throw Error("T5Dataset: sample " + std::to_string(i) + " needs " + std::to_string(enc_len) + " encoder and " +
                std::to_string(dec_len) + " decoder positions, more than --encoder-seq-length " + std::to_string(Le) +
                " / --decoder-seq-length " + std::to_string(Ld) + " (Megatron asserts here)");

  // labels = decoder input shifted left, then [EOS]; loss on the dec_len real positions.
  out.labels.assign(Ld, -1);
  std::copy(out.text_dec.begin() + 1, out.text_dec.end(), out.labels.begin());
  out.labels[dec_len - 1] = v.eos;
  out.loss_mask.assign(Ld, 0);
  std::fill(out.loss_mask.begin(), out.loss_mask.begin() + std::ptrdiff_t(dec_len), 1);
  out.text_enc.resize(Le, v.pad);
  out.text_dec.resize(Ld, v.pad);
}

T5Datasets build_t5_datasets(const T5DatasetConfig& config, const std::array<int64_t, 3>& samples_per_split) {
  return build_sentence_datasets<T5Dataset>(config, samples_per_split);
}

namespace {

void append_json_matrix(std::string& out, const char* name, const std::vector<int32_t>& m, size_t rows, size_t cols) {
  out += ", \"";
  out += name;
  out += "\": [";
  for (size_t i = 0; i < rows; ++i) {
    out += i ? ", [" : "[";
    for (size_t j = 0; j < cols; ++j) {
      if (j) out += ", ";
      out += m[i * cols + j] ? '1' : '0';
    }
    out += "]";
  }
  out += "]";
}

}  // namespace

std::string t5_sample_json(Split split, int64_t index, const T5Sample& s, bool with_masks) {
  std::string out = "{\"split\": \"" + std::string(split_name(split)) + "\", \"index\": " + std::to_string(index);
  append_json_array(out, "text_enc", s.text_enc);
  append_json_array(out, "text_dec", s.text_dec);
  append_json_array(out, "labels", s.labels);
  append_json_array(out, "loss_mask", s.loss_mask);
  out += ", \"truncated\": " + std::to_string(s.truncated);
  if (with_masks) {
    std::vector<int32_t> m;
    const size_t le = s.text_enc.size(), ld = s.text_dec.size();
    s.enc_mask(m);
    append_json_matrix(out, "enc_mask", m, le, le);
    s.dec_mask(m);
    append_json_matrix(out, "dec_mask", m, ld, ld);
    s.enc_dec_mask(m);
    append_json_matrix(out, "enc_dec_mask", m, ld, le);
  }
  out += "}\n";
  return out;
}

}  // namespace lmforge::datasets
