// defines: create_nvidia_instances(), check_nvidia_instance_options()
//
// One thread, by necessity: every draw depends on the draws before it (rejection sampling consumes a varying number
// of outputs), so the stream is replayed in the script's order. The replay only draws and records each instance's
// recipe (the runs of ids A and B, the masked positions and their replacements): the draws depend on the tokens'
// counts, never on their values, except where text holds [CLS]/[SEP] (looked up, not scanned). Copying the tokens,
// masking and labelling happen when the rows are built, with tokenizing before and deflating after, on every core.
#include "prep/nvidia_instances.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numeric>
#include <string>

#include "prep/python_random.h"
#include "util/error.h"

namespace lmforge::prep {

void check_nvidia_instance_options(const NvidiaInstanceOptions& o) {
  // randint(2, max_seq_length - 3) needs L - 3 >= 2; the script's tokenizer (max_len=512) refuses longer rows.
  if (o.max_seq_length < 5 || o.max_seq_length > 512)
    throw Error("--max-seq-length " + std::to_string(o.max_seq_length) +
                ": must be 5 to 512 ([CLS] A [SEP] B [SEP] needs 5; NVIDIA's tokenizer is built with max_len=512 and "
                "refuses longer sequences)");
  if (o.max_predictions_per_seq < 1 || o.max_predictions_per_seq > o.max_seq_length)
    throw Error("--max-predictions-per-seq " + std::to_string(o.max_predictions_per_seq) + ": must be 1 to " +
                "--max-seq-length (" + std::to_string(o.max_seq_length) + ")");
  if (!(o.masked_lm_prob >= 0 && o.masked_lm_prob <= 1))
    throw Error("--masked-lm-prob " + std::to_string(o.masked_lm_prob) + ": must be within [0, 1]");
  if (!(o.short_seq_prob >= 0 && o.short_seq_prob <= 1))
    throw Error("--short-seq-prob " + std::to_string(o.short_seq_prob) + ": must be within [0, 1]");
  if (o.dupe_factor < 1) throw Error("--dupe-factor " + std::to_string(o.dupe_factor) + ": must be at least 1");
}

namespace {

// A run of the documents' ids that loses tokens at either end (truncate_seq_pair's del x[0] / x.pop()).
struct Run {
  uint64_t begin = 0, end = 0;
  int64_t size() const { return static_cast<int64_t>(end - begin); }
};

class InstanceBuilder {
 public:
  InstanceBuilder(const SentenceDocuments& docs, size_t first, size_t end, const NvidiaVocabIds& vocab,
                  const NvidiaInstanceOptions& o, NvidiaInstances& out)
      : docs_(docs), first_(first), end_(end), vocab_(vocab), o_(o), out_(out), rng_(o.random_seed) {}

  void run() {
    // Where text itself holds [CLS] or [SEP] (a tokenizer's never_split token): those are no masking candidates.
    // Kept as sorted ids offsets so an instance without any (nearly all) builds its candidates without a scan.
    const uint64_t i0 = docs_.sentence_begin[docs_.document_begin[first_]];
    const uint64_t i1 = docs_.sentence_begin[docs_.document_begin[end_]];
    for (uint64_t i = i0; i < i1; ++i)
      if (docs_.ids[i] == vocab_.cls || docs_.ids[i] == vocab_.sep) specials_.push_back(i);
    // Room for every instance up front (each takes at least one sentence of its document, so a pass makes at most
    // one per sentence): reserved pages that stay unused cost nothing, where growing by copying touched each twice.
    const size_t most = size_t(o_.dupe_factor) * (docs_.document_begin[end_] - docs_.document_begin[first_]);
    made_.reserve(most);
    positions_.reserve(most * size_t(o_.max_predictions_per_seq));
    replacements_.reserve(most * size_t(o_.max_predictions_per_seq));
    // rng.shuffle(all_documents)
    order_.resize(end_ - first_);
    for (size_t d = 0; d < order_.size(); ++d) order_[d] = static_cast<uint32_t>(first_ + d);
    rng_.shuffle(order_);
    for (int dupe = 0; dupe < o_.dupe_factor; ++dupe)
      for (size_t di = 0; di < order_.size(); ++di) from_document(di);
    // rng.shuffle(instances), then the recipes permuted into that (the file's row) order; their masks stay where
    // they are (the rows point at them), which keeps that copy off this one thread.
    std::vector<uint32_t> order(made_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
    rng_.shuffle(order);
    out_.rows.reserve(made_.size());
    for (uint32_t i : order) out_.rows.push_back(made_[i]);
    out_.masked_positions = std::move(positions_);
    out_.replacements = std::move(replacements_);
  }

 private:
  size_t sentence_count(size_t shuffled_doc) const {
    const size_t d = order_[shuffled_doc];
    return docs_.document_begin[d + 1] - docs_.document_begin[d];
  }
  // Where sentence j of the document at shuffled position `shuffled_doc` begins in ids (j = count: where it ends).
  uint64_t sentence_begin(size_t shuffled_doc, size_t j) const {
    return docs_.sentence_begin[docs_.document_begin[order_[shuffled_doc]] + j];
  }
  bool has_special(const Run& r) const {
    const auto it = std::lower_bound(specials_.begin(), specials_.end(), r.begin);
    return it != specials_.end() && *it < r.end;
  }

  // create_instances_from_document(all_documents, di, ...)
  void from_document(size_t di) {
    const int64_t max_num_tokens = o_.max_seq_length - 3;
    int64_t target = max_num_tokens;
    if (rng_.random() < o_.short_seq_prob) target = rng_.randint(2, max_num_tokens);
    const size_t n = sentence_count(di);
    size_t chunk_begin = 0, chunk_size = 0;  // current_chunk: sentences [chunk_begin, chunk_begin + chunk_size)
    int64_t current_length = 0;
    for (size_t i = 0; i < n; ++i) {
      if (chunk_size == 0) chunk_begin = i;
      ++chunk_size;
      current_length += static_cast<int64_t>(sentence_begin(di, i + 1) - sentence_begin(di, i));
      if (i != n - 1 && current_length < target) continue;
      size_t a_end = 1;
      if (chunk_size >= 2) a_end = static_cast<size_t>(rng_.randint(1, static_cast<int64_t>(chunk_size) - 1));
      a_ = {sentence_begin(di, chunk_begin), sentence_begin(di, chunk_begin + a_end)};
      bool is_random_next = false;
      // `len(current_chunk) == 1 or rng.random() < 0.5`: no draw for a one-sentence chunk.
      if (chunk_size == 1 || rng_.random_below_half()) {
        is_random_next = true;
        const int64_t target_b = target - a_.size();
        int64_t r = 0;
        for (int attempt = 0; attempt < 10; ++attempt) {
          r = rng_.randint(0, static_cast<int64_t>(order_.size()) - 1);
          if (r != static_cast<int64_t>(di)) break;
        }
        // Ten draws all hit this document (likely only with one document): labelled actual next (DLE @ 7a4c4250;
        // Google's original keeps "random"), though B is still read from a random start in this document.
        if (r == static_cast<int64_t>(di)) is_random_next = false;
        const size_t rn = sentence_count(size_t(r));
        const auto start = static_cast<size_t>(rng_.randint(0, static_cast<int64_t>(rn) - 1));
        b_ = {sentence_begin(size_t(r), start), sentence_begin(size_t(r), start)};
        for (size_t j = start; j < rn; ++j) {  // whole sentences until B reaches target_b
          b_.end = sentence_begin(size_t(r), j + 1);
          if (b_.size() >= target_b) break;
        }
        i -= chunk_size - a_end;  // "put back" the unused sentences
      } else {
        b_ = {sentence_begin(di, chunk_begin + a_end), sentence_begin(di, chunk_begin + chunk_size)};
      }
      truncate(max_num_tokens);
      emit(is_random_next);
      chunk_size = 0;
      current_length = 0;
    }
  }

  // truncate_seq_pair: the longer of A and B (B on a tie) loses its first or last token, one draw per token.
  // The ends are kept in locals: through a reference to a_ or b_ every draw stored and reloaded one.
  void truncate(int64_t max_num_tokens) {
    uint64_t ab = a_.begin, ae = a_.end, bb = b_.begin, be = b_.end;
    while (int64_t((ae - ab) + (be - bb)) > max_num_tokens) {
      const bool front = rng_.random_below_half();
      if (ae - ab > be - bb) {
        if (front) ++ab;
        else --ae;
      } else {
        if (front) ++bb;
        else --be;
      }
    }
    a_ = {ab, ae};
    b_ = {bb, be};
  }

  // [CLS] A [SEP] B [SEP], then create_masked_lm_predictions()'s draws; the tokens are not touched here.
  void emit(bool is_random_next) {
    const size_t a = size_t(a_.size()), b = size_t(b_.size()), n = a + b + 3;
    candidates_.clear();
    if (!has_special(a_) && !has_special(b_)) {  // positions 1..a and a+2..a+b+1
      candidates_.resize(a + b);
      std::iota(candidates_.begin(), candidates_.begin() + long(a), uint16_t(1));
      std::iota(candidates_.begin() + long(a), candidates_.end(), static_cast<uint16_t>(a + 2));
    } else {
      for (size_t p = 1; p <= a; ++p)
        if (const int32_t t = docs_.ids[a_.begin + p - 1]; t != vocab_.cls && t != vocab_.sep)
          candidates_.push_back(static_cast<uint16_t>(p));
      for (size_t p = a + 2; p <= a + b + 1; ++p)
        if (const int32_t t = docs_.ids[b_.begin + p - a - 2]; t != vocab_.cls && t != vocab_.sep)
          candidates_.push_back(static_cast<uint16_t>(p));
    }
    rng_.shuffle(candidates_);
    // int(round(len(tokens) * masked_lm_prob)): the double product rounded half to even (nearbyint's default mode).
    const auto rounded = static_cast<int64_t>(std::nearbyint(static_cast<double>(n) * o_.masked_lm_prob));
    const size_t num = static_cast<size_t>(std::min<int64_t>(o_.max_predictions_per_seq, std::max<int64_t>(1, rounded)));
    // The first `num` candidates are masked; listed by position (ascending), which a bit per position gives
    // without sorting (positions are below max_seq_length <= 512).
    std::array<uint64_t, kPositionWords> chosen{};
    const size_t count = std::min(num, candidates_.size());
    for (size_t m = 0; m < count; ++m) {
      const uint16_t p = candidates_[m];
      int32_t replacement;
      if (rng_.random() < 0.8) {
        replacement = vocab_.mask;
      } else if (rng_.random_below_half()) {
        replacement = NvidiaInstances::kKeep;
      } else {
        replacement = vocab_.words[size_t(rng_.randint(0, static_cast<int64_t>(vocab_.words.size()) - 1))];
      }
      chosen[p >> 6] |= uint64_t(1) << (p & 63);
      replacement_at_[p] = replacement;
    }
    NvidiaInstance x;
    x.a_begin = a_.begin;
    x.b_begin = b_.begin;
    x.mask_begin = positions_.size();
    x.a_length = static_cast<uint16_t>(a);
    x.b_length = static_cast<uint16_t>(b);
    x.mask_count = static_cast<uint16_t>(count);
    x.is_random_next = is_random_next ? 1 : 0;
    made_.push_back(x);
    for (size_t w = 0; w <= (n - 1) >> 6; ++w)
      for (uint64_t bits = chosen[w]; bits != 0; bits &= bits - 1) {
        const auto p = static_cast<uint16_t>(w * 64 + size_t(std::countr_zero(bits)));
        positions_.push_back(p);
        replacements_.push_back(replacement_at_[p]);
      }
  }

  const SentenceDocuments& docs_;
  const size_t first_, end_;
  const NvidiaVocabIds& vocab_;
  const NvidiaInstanceOptions& o_;
  NvidiaInstances& out_;
  PythonRandom rng_;
  std::vector<uint32_t> order_;  // all_documents after the shuffle: order_[k] = index in docs of document k
  std::vector<uint64_t> specials_;
  Run a_, b_;
  std::vector<uint16_t> candidates_;
  static constexpr size_t kPositionWords = 8;  // bits for positions 0..511 (max_seq_length <= 512)
  std::array<int32_t, 64 * kPositionWords> replacement_at_{};  // the masked positions' replacements, by position
  // The instances in the order they are made, and their masks (gathered into row order at the end)
  std::vector<NvidiaInstance> made_;
  std::vector<uint16_t> positions_;
  std::vector<int32_t> replacements_;
};

}  // namespace

NvidiaInstances create_nvidia_instances(const SentenceDocuments& documents, size_t first_document, size_t end_document,
                                        const NvidiaVocabIds& vocab, const NvidiaInstanceOptions& options) {
  check_nvidia_instance_options(options);
  if (first_document > end_document || end_document > documents.documents())
    throw Error("create_nvidia_instances: documents [" + std::to_string(first_document) + ", " +
                std::to_string(end_document) + ") outside the " + std::to_string(documents.documents()) + " read");
  NvidiaInstances out;
  out.seq_length = options.max_seq_length;
  out.max_predictions = options.max_predictions_per_seq;
  out.cls = vocab.cls;
  out.sep = vocab.sep;
  out.ids = documents.ids.data();
  if (first_document == end_document) return out;
  InstanceBuilder(documents, first_document, end_document, vocab, options, out).run();
  return out;
}

}  // namespace lmforge::prep
