// defines: load_bert_vocab / masked_lm_vocab (Megatron's BERT tokenizer tables) and create_masked_lm_predictions
#include "datasets/masked_lm.h"

#include <cmath>
#include <fstream>
#include <unordered_map>

#include "datasets/gpt_indices.h"
#include "util/error.h"
#include "util/strings.h"

namespace lmforge::datasets {

// ---- vocabulary ----

MaskedLmVocab masked_lm_vocab(const std::vector<std::string>& tokens, const std::vector<int32_t>& random_ids,
                              int vocab_extra_ids, const std::string& origin) {
  MaskedLmVocab v;
  v.random_ids = random_ids;
  v.continuation.resize(tokens.size());
  std::unordered_map<std::string, int32_t> id;
  for (size_t i = 0; i < tokens.size(); ++i) {
    v.continuation[i] = tokens[i].rfind("##", 0) == 0 ? 1 : 0;
    id[tokens[i]] = int32_t(i);
  }
  auto need = [&](const std::string& t) {
    const auto it = id.find(t);
    if (it == id.end()) throw Error(origin + ": the vocabulary has no " + t + " token");
    return it->second;
  };
  v.cls = need("[CLS]");
  v.sep = need("[SEP]");
  v.mask = need("[MASK]");
  v.pad = need("[PAD]");
  v.bos = need("[BOS]");
  v.eos = need("[EOS]");
  for (int i = 0; i < vocab_extra_ids; ++i) v.sentinels.push_back(need("<extra_id_" + std::to_string(i) + ">"));
  for (const int32_t r : v.random_ids)
    if (r < 0 || size_t(r) >= tokens.size()) throw Error(origin + ": random id " + std::to_string(r) + " outside");
  return v;
}

MaskedLmVocab load_bert_vocab(const std::string& vocab_txt, int vocab_extra_ids) {
  std::ifstream f(vocab_txt, std::ios::binary);
  if (!f) throw Error(vocab_txt + ": cannot open the vocabulary");
  // load_vocab: an OrderedDict token → line number; a repeated token keeps its first place and its last id.
  std::vector<std::string> order;
  std::unordered_map<std::string, int32_t> vocab;
  std::string line;
  int32_t index = 0;
  while (std::getline(f, line)) {
    const std::string token = python_strip(line);
    if (vocab.emplace(token, index).second) order.push_back(token);
    else vocab[token] = index;
    ++index;
  }
  // inv_vocab = {id: token} in that order; add_token appends [BOS], [EOS], <extra_id_i> (when absent) with
  // id = len(vocab) at the time.
  std::vector<std::pair<int32_t, std::string>> inv;
  for (const auto& t : order) inv.emplace_back(vocab[t], t);
  auto add = [&](const std::string& t) {
    if (vocab.count(t)) return;
    const int32_t id = int32_t(vocab.size());
    vocab[t] = id;
    inv.emplace_back(id, t);
  };
  add("[BOS]");
  add("[EOS]");
  for (int i = 0; i < vocab_extra_ids; ++i) add("<extra_id_" + std::to_string(i) + ">");
  int32_t max_id = 0;
  for (const auto& [i, t] : inv) max_id = std::max(max_id, i);
  std::vector<std::string> tokens(size_t(max_id) + 1);
  std::vector<int32_t> random_ids;
  std::unordered_map<int32_t, size_t> seen;  // a dict keeps one entry per id: the last token written wins
  for (const auto& [i, t] : inv) {
    tokens[size_t(i)] = t;
    if (seen.emplace(i, random_ids.size()).second) random_ids.push_back(i);
  }
  return masked_lm_vocab(tokens, random_ids, vocab_extra_ids, vocab_txt);
}

// ---- masking ----

namespace {

// numpy's sum of a short float64 array: in order from 0 (its pairwise sum is a plain loop below 8 elements).
// Checked bit for bit against numpy in test_numpy_distributions (a0 + (a1 + a2) is one ulp off for 1/[1,2,3]).
double numpy_small_sum(std::span<const double> a) {
  double sum = 0;
  for (const double x : a) sum += x;
  return sum;
}

// Whole-word candidates: [CLS]/[SEP] skipped; a "##" piece joins the last candidate (if any), else starts one.
void collect_candidates(std::span<const int32_t> tokens, const MaskedLmVocab& vocab, MaskingWorkspace& ws) {
  ws.cand_begin.clear();
  ws.cand_positions.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t == vocab.cls || t == vocab.sep) continue;
    if (t < 0 || size_t(t) >= vocab.size())
      throw Error("masking: token id " + std::to_string(t) + " is not in the vocabulary of " +
                  std::to_string(vocab.size()) + " tokens");
    if (ws.cand_begin.empty() || !vocab.is_continuation(t)) ws.cand_begin.push_back(int32_t(ws.cand_positions.size()));
    ws.cand_positions.push_back(int32_t(i));
  }
  ws.cand_begin.push_back(int32_t(ws.cand_positions.size()));
}

// The masked token for one chosen position (BERT: 80 % [MASK], 10 % kept, 10 % random id; T5: [MASK], no draw).
int32_t masked_token(int32_t original, const MaskedLmVocab& vocab, const MaskingOptions& o, NumpyRandomState& rng) {
  if (o.t5_style) return vocab.mask;
  if (rng.random_sample() < 0.8) return vocab.mask;
  if (rng.random_sample() < 0.5) return original;
  return vocab.random_ids[size_t(rng.randint(0, int64_t(vocab.random_ids.size())))];
}

}  // namespace

// The cdf of np_rng.choice(ngrams, p=pvals / pvals.sum()) where pvals = 1/[1..N], pvals /= pvals.sum(), into cdf[N]
// (numpy's choice: cumsum, then divided by its last entry). No allocation: this runs once per sample.
std::span<const double> ngram_cdf(int max_ngrams, double* cdf) {
  if (max_ngrams < 1 || max_ngrams > 8)
    throw Error("masking: max_ngrams " + std::to_string(max_ngrams) + " outside 1..8 for 1/n weights");
  double p[8];
  const std::span<double> ps(p, size_t(max_ngrams));
  for (int n = 1; n <= max_ngrams; ++n) p[n - 1] = 1.0 / double(n);
  for (int pass = 0; pass < 2; ++pass) {
    const double s = numpy_small_sum(ps);
    for (double& x : ps) x /= s;
  }
  double running = 0;
  for (int i = 0; i < max_ngrams; ++i) cdf[i] = running += p[i];
  for (int i = 0; i < max_ngrams; ++i) cdf[i] /= running;
  return std::span<const double>(cdf, size_t(max_ngrams));
}

void create_masked_lm_predictions(std::span<int32_t> tokens, double max_predictions, const MaskedLmVocab& vocab,
                                  const MaskingOptions& o, NumpyRandomState& rng, MaskingWorkspace& ws) {
  ws.positions.clear();
  ws.labels.clear();
  ws.span_begin.assign(1, 0);
  ws.span_positions.clear();
  collect_candidates(tokens, vocab, ws);
  if (o.mask_prob == 0) return;  // Megatron returns before any draw

  // num_to_predict = min(mask_prob·target, max(1, round(len·mask_prob))): a float when the first term wins.
  const double budget =
      std::min(max_predictions, double(std::max<int64_t>(1, python_round(double(tokens.size()) * o.mask_prob))));
  const int32_t cands = int32_t(ws.cand_begin.size()) - 1;
  // ngram_indexes[k] = [cand[k:k+1], …, cand[k:k+N]] is fully determined by k, so the list shuffled is just k.
  ws.order.resize(size_t(cands));
  for (int32_t k = 0; k < cands; ++k) ws.order[size_t(k)] = k;
  rng.shuffle(std::span<int32_t>(ws.order));
  ws.covered.assign(tokens.size(), 0);
  double cdf_buf[8];
  const std::span<const double> cdf = o.geometric ? std::span<const double>() : ngram_cdf(o.max_ngrams, cdf_buf);

  for (const int32_t k : ws.order) {
    if (double(ws.positions.size()) >= budget) break;
    int64_t n = o.geometric ? std::min<int64_t>(rng.geometric(0.2), o.max_ngrams) : 1 + rng.choice_index(cdf);
    // The n-gram cand[k : k+n] (shorter at the end of the list), shrunk one word at a time to fit the budget.
    auto ngram_size = [&](int64_t m) {
      const int32_t last = int32_t(std::min<int64_t>(k + m, cands));
      return ws.cand_begin[size_t(last)] - ws.cand_begin[size_t(k)];
    };
    while (double(ws.positions.size()) + ngram_size(n) > budget && n > 1) --n;
    const int32_t size = ngram_size(n);
    if (double(ws.positions.size()) + size > budget) continue;
    const int32_t* pos = ws.cand_positions.data() + ws.cand_begin[size_t(k)];
    bool any_covered = false;
    for (int32_t i = 0; i < size && !any_covered; ++i) any_covered = ws.covered[size_t(pos[i])] != 0;
    if (any_covered) continue;
    for (int32_t i = 0; i < size; ++i) {
      const int32_t p = pos[i];
      ws.covered[size_t(p)] = 1;
      const int32_t original = tokens[size_t(p)];
      tokens[size_t(p)] = masked_token(original, vocab, o, rng);
      ws.positions.push_back(p);
      ws.labels.push_back(original);
      ws.span_positions.push_back(p);
    }
    ws.span_begin.push_back(int32_t(ws.span_positions.size()));
  }
}

}  // namespace lmforge::datasets
