// defines: create_nvidia_instances(), check_nvidia_instance_options()
//
// One thread, by necessity: every draw depends on the draws before it (rejection sampling consumes a varying number
// of outputs), so the stream is replayed in the script's order. The work done here per instance is small (copying at
// most L ids, ~30 draws); tokenizing before and building/compressing the rows after run on every core.
#include "prep/nvidia_instances.h"

#include <algorithm>
#include <cmath>
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

// A run of ids that loses tokens at either end (truncate_seq_pair's del x[0] / x.pop()).
struct Span {
  std::vector<int32_t> ids;
  size_t begin = 0;
  size_t size() const { return ids.size() - begin; }
  void clear() {
    ids.clear();
    begin = 0;
  }
};

class InstanceBuilder {
 public:
  InstanceBuilder(const SentenceDocuments& docs, const NvidiaVocabIds& vocab, const NvidiaInstanceOptions& o,
                  NvidiaInstances& out)
      : docs_(docs), vocab_(vocab), o_(o), out_(out), rng_(o.random_seed) {}

  void run() {
    // Room for every pass's tokens up front (half again for random next sentences and the specials): reserved pages
    // that stay unused cost nothing, where growing by copying touched every page again.
    const size_t passes = size_t(o_.dupe_factor);
    out_.tokens.reserve(passes * (docs_.ids.size() * 3 / 2 + 3 * docs_.sentences()));
    // rng.shuffle(all_documents)
    order_.resize(docs_.documents());
    for (size_t d = 0; d < order_.size(); ++d) order_[d] = static_cast<uint32_t>(d);
    rng_.shuffle(order_);
    for (int dupe = 0; dupe < o_.dupe_factor; ++dupe)
      for (size_t di = 0; di < order_.size(); ++di) from_document(di);
    // rng.shuffle(instances)
    out_.order.resize(out_.size());
    for (size_t i = 0; i < out_.order.size(); ++i) out_.order[i] = static_cast<uint32_t>(i);
    rng_.shuffle(out_.order);
  }

 private:
  size_t sentence_count(size_t shuffled_doc) const {
    const size_t d = order_[shuffled_doc];
    return docs_.document_begin[d + 1] - docs_.document_begin[d];
  }
  // Sentence j of the document at shuffled position `shuffled_doc`.
  std::pair<const int32_t*, size_t> sentence(size_t shuffled_doc, size_t j) const {
    const size_t s = docs_.document_begin[order_[shuffled_doc]] + j;
    const uint64_t b = docs_.sentence_begin[s], e = docs_.sentence_begin[s + 1];
    return {docs_.ids.data() + b, size_t(e - b)};
  }
  static void extend(Span& span, std::pair<const int32_t*, size_t> s) {
    span.ids.insert(span.ids.end(), s.first, s.first + s.second);
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
      current_length += static_cast<int64_t>(sentence(di, i).second);
      if (i != n - 1 && current_length < target) continue;
      size_t a_end = 1;
      if (chunk_size >= 2) a_end = static_cast<size_t>(rng_.randint(1, static_cast<int64_t>(chunk_size) - 1));
      a_.clear();
      b_.clear();
      for (size_t j = 0; j < a_end; ++j) extend(a_, sentence(di, chunk_begin + j));
      bool is_random_next = false;
      // `len(current_chunk) == 1 or rng.random() < 0.5`: no draw for a one-sentence chunk.
      if (chunk_size == 1 || rng_.random() < 0.5) {
        is_random_next = true;
        const int64_t target_b = target - static_cast<int64_t>(a_.size());
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
        for (size_t j = start; j < rn; ++j) {
          extend(b_, sentence(size_t(r), j));
          if (static_cast<int64_t>(b_.size()) >= target_b) break;
        }
        i -= chunk_size - a_end;  // "put back" the unused sentences
      } else {
        for (size_t j = a_end; j < chunk_size; ++j) extend(b_, sentence(di, chunk_begin + j));
      }
      truncate(max_num_tokens);
      emit(is_random_next);
      chunk_size = 0;
      current_length = 0;
    }
  }

  // truncate_seq_pair: the longer of A and B (B on a tie) loses its first or last token, one draw per token.
  void truncate(int64_t max_num_tokens) {
    while (static_cast<int64_t>(a_.size() + b_.size()) > max_num_tokens) {
      Span& t = a_.size() > b_.size() ? a_ : b_;
      if (rng_.random() < 0.5) ++t.begin;
      else t.ids.pop_back();
    }
  }

  // [CLS] A [SEP] B [SEP], then create_masked_lm_predictions().
  void emit(bool is_random_next) {
    const size_t first = out_.tokens.size();
    out_.tokens.push_back(vocab_.cls);
    out_.tokens.insert(out_.tokens.end(), a_.ids.begin() + long(a_.begin), a_.ids.end());
    out_.tokens.push_back(vocab_.sep);
    const size_t a_length = out_.tokens.size() - first;
    out_.tokens.insert(out_.tokens.end(), b_.ids.begin() + long(b_.begin), b_.ids.end());
    out_.tokens.push_back(vocab_.sep);
    int32_t* tokens = out_.tokens.data() + first;
    const size_t n = out_.tokens.size() - first;

    candidates_.clear();
    for (size_t p = 0; p < n; ++p)
      if (tokens[p] != vocab_.cls && tokens[p] != vocab_.sep) candidates_.push_back(static_cast<int32_t>(p));
    rng_.shuffle(candidates_);
    // int(round(len(tokens) * masked_lm_prob)): the double product rounded half to even (nearbyint's default mode).
    const auto rounded = static_cast<int64_t>(std::nearbyint(static_cast<double>(n) * o_.masked_lm_prob));
    const size_t num = static_cast<size_t>(std::min<int64_t>(o_.max_predictions_per_seq, std::max<int64_t>(1, rounded)));
    masked_.clear();
    for (int32_t p : candidates_) {
      if (masked_.size() >= num) break;
      const int32_t original = tokens[p];
      int32_t replacement;
      if (rng_.random() < 0.8) {
        replacement = vocab_.mask;
      } else if (rng_.random() < 0.5) {
        replacement = original;
      } else {
        replacement = vocab_.words[size_t(rng_.randint(0, static_cast<int64_t>(vocab_.words.size()) - 1))];
      }
      tokens[p] = replacement;
      masked_.emplace_back(p, original);
    }
    std::sort(masked_.begin(), masked_.end());
    for (const auto& [p, original] : masked_) {
      out_.masked_positions.push_back(p);
      out_.masked_ids.push_back(original);
    }
    out_.token_begin.push_back(out_.tokens.size());
    out_.mask_begin.push_back(out_.masked_positions.size());
    out_.a_length.push_back(static_cast<uint16_t>(a_length));
    out_.is_random_next.push_back(is_random_next ? 1 : 0);
  }

  const SentenceDocuments& docs_;
  const NvidiaVocabIds& vocab_;
  const NvidiaInstanceOptions& o_;
  NvidiaInstances& out_;
  PythonRandom rng_;
  std::vector<uint32_t> order_;  // all_documents after the shuffle: order_[k] = input index of document k
  Span a_, b_;
  std::vector<int32_t> candidates_;
  std::vector<std::pair<int32_t, int32_t>> masked_;  // (position, original id)
};

}  // namespace

NvidiaInstances create_nvidia_instances(const SentenceDocuments& documents, const NvidiaVocabIds& vocab,
                                        const NvidiaInstanceOptions& options) {
  check_nvidia_instance_options(options);
  NvidiaInstances out;
  out.seq_length = options.max_seq_length;
  out.max_predictions = options.max_predictions_per_seq;
  if (documents.documents() == 0) return out;
  InstanceBuilder(documents, vocab, options, out).run();
  return out;
}

}  // namespace lmforge::prep
