// defines: MaskedLmVocab (what Megatron's BERT/T5 datasets need of the tokenizer), load_bert_vocab(),
//   MaskingOptions, MaskingWorkspace and create_masked_lm_predictions() — Megatron's whole-word n-gram masking
// Rules: ../shared/docs/bert-t5-reference-notes.md §2.5 (BERT: n ∈ {1,2,3} by 1/n weights, 80/10/10) and §3.2
// (T5: n = min(geometric(0.2), 10), every position [MASK], spans). Every RNG draw happens in Megatron's order, so
// one NumpyRandomState per sample gives Megatron's masks bit for bit.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datasets/numpy_random.h"

namespace lmforge::datasets {

// The tokenizer as Megatron's BertWordPieceLowerCase/Case presents it to the datasets.
struct MaskedLmVocab {
  // list(tokenizer.inv_vocab.keys()): random replacements are random_ids[randint(0, size)]. For a vocab.txt without
  // repeated lines this is 0 .. n−1 plus [BOS], [EOS] and the sentinels: 30524 ids for bert-base-uncased.
  std::vector<int32_t> random_ids;
  // continuation[id] = 1 when the token's string starts with "##" (not a word start: joins the previous word).
  std::vector<uint8_t> continuation;
  int32_t cls = 101, sep = 102, mask = 103, pad = 0;
  int32_t bos = -1, eos = -1;       // [BOS], [EOS] (T5's decoder start and end)
  std::vector<int32_t> sentinels;   // <extra_id_0>, <extra_id_1>, … (T5: one per span, ascending)

  bool is_continuation(int32_t id) const { return continuation[size_t(id)] != 0; }
  size_t size() const { return continuation.size(); }  // ids 0 .. size()−1 are valid token ids
};

// Megatron's BertWordPieceTokenizer vocabulary: vocab.txt line n (stripped) is id n (a repeated line keeps its
// first position and its last id, as Python's OrderedDict), then [BOS], [EOS] and <extra_id_0..k−1> are appended
// when absent. Error for an unreadable file or a missing [CLS]/[SEP]/[MASK]/[PAD].
MaskedLmVocab load_bert_vocab(const std::string& vocab_txt, int vocab_extra_ids = 0);
// The same from the token strings (tokens[id]) with the extra tokens already appended by the caller.
MaskedLmVocab masked_lm_vocab(const std::vector<std::string>& tokens, const std::vector<int32_t>& random_ids,
                              int vocab_extra_ids, const std::string& origin);

struct MaskingOptions {
  double mask_prob = 0.15;
  int max_ngrams = 3;      // BERT 3, T5 10
  bool geometric = false;  // T5: n = min(geometric(0.2), max_ngrams); BERT: n ~ 1/n weights
  bool t5_style = false;   // T5: every chosen position becomes [MASK] without a draw; BERT: 80/10/10
};

// Reused buffers (one per sample slot or thread): masking allocates only while they grow.
struct MaskingWorkspace {
  std::vector<int32_t> cand_begin;      // candidate k = positions cand_positions[cand_begin[k] .. cand_begin[k+1])
  std::vector<int32_t> cand_positions;
  std::vector<int32_t> order;           // the shuffled candidate list (ngram_indexes by their first candidate)
  std::vector<uint8_t> covered;
  // Results: masked positions with their original tokens (in masking order), and the accepted spans (positions
  // span_positions[span_begin[s] .. span_begin[s+1]), in acceptance order).
  std::vector<int32_t> positions, labels;
  std::vector<int32_t> span_begin, span_positions;
};

// The cdf of Megatron's n draw, np_rng.choice([1..N], p=pvals / pvals.sum()) with pvals = 1/[1..N] normalised once
// before, written to cdf[0..N) (N ≤ 8) exactly as numpy computes it (sums in order, divisions elementwise).
std::span<const double> ngram_cdf(int max_ngrams, double* cdf);

// Megatron's create_masked_lm_predictions on `tokens` (changed in place), with max_predictions = mask_prob·target
// (a float: the budget is min(it, max(1, round(mask_prob·len(tokens))))). Candidates are whole words ([CLS] and
// [SEP] excluded, "##" pieces join the previous word even across a [SEP]); the candidate list is shuffled, n is drawn
// per entry before any check, shrunk to fit, and entries overlapping earlier ones are skipped. Megatron shuffles the
// list once more at the end; nothing reads the stream afterwards, so that draw is left out. Error for a token id
// outside the vocabulary (Megatron: KeyError).
void create_masked_lm_predictions(std::span<int32_t> tokens, double max_predictions, const MaskedLmVocab& vocab,
                                  const MaskingOptions& options, NumpyRandomState& rng, MaskingWorkspace& ws);

}  // namespace lmforge::datasets
