// The BPE merge loop of bpe_trainer.h. Data layout: every word is a run of symbol ids in one flat array (merges
// shrink runs in place), pair counts live in an open-addressing table keyed by (left << 32 | right), and the
// queue is a binary heap of entries that own their word lists, as HF's BinaryHeap<Merge> does.
#include "tokenizer_train/bpe_trainer.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "util/error.h"

namespace lmforge::tokenizer_train {
namespace {

// Decodes the code point at s[i] (valid UTF-8: words come from repaired text) and advances i.
uint32_t next_code_point(std::string_view s, size_t& i) {
  const uint8_t b = uint8_t(s[i]);
  if (b < 0x80) { ++i; return b; }
  int len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  uint32_t cp = b & (0x7F >> len);
  for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }

// Pair -> signed count. Counts can only be read back for pairs once added; entries are never removed (HF keeps
// a merged pair's count too). Linear probing at load <= 1/2.
class PairCounts {
 public:
  PairCounts() { rehash(1 << 16); }
  int64_t& at(uint64_t key) {
    size_t h = slot(key);
    while (keys_[h] != key) {
      if (keys_[h] == kEmpty) {
        if (2 * (size_ + 1) > keys_.size()) {
          rehash(keys_.size() * 2);
          return at(key);
        }
        keys_[h] = key;
        values_[h] = 0;
        ++size_;
        return values_[h];
      }
      h = (h + 1) & mask_;
    }
    return values_[h];
  }
  template <class F>
  void for_each(F&& f) const {
    for (size_t h = 0; h < keys_.size(); ++h)
      if (keys_[h] != kEmpty) f(keys_[h], values_[h]);
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  size_t slot(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t capacity) {
    std::vector<uint64_t> keys(capacity, kEmpty);
    std::vector<int64_t> values(capacity, 0);
    keys.swap(keys_);
    values.swap(values_);
    mask_ = capacity - 1;
    shift_ = 64 - __builtin_ctzll(capacity);
    size_ = 0;
    for (size_t h = 0; h < keys.size(); ++h)
      if (keys[h] != kEmpty) at(keys[h]) = values[h];
  }
  std::vector<uint64_t> keys_;
  std::vector<int64_t> values_;
  size_t size_ = 0, mask_ = 0;
  int shift_ = 48;
};

// One queue entry (HF's Merge): the pair, its count when pushed, the words to apply it in.
struct QueueEntry {
  uint64_t count;
  uint64_t pair;
  std::vector<uint32_t> words;
};
// std heap order: a "less" entry is popped later. Higher count first; equal counts: smaller pair first.
bool popped_later(const QueueEntry& a, const QueueEntry& b) {
  if (a.count != b.count) return a.count < b.count;
  return a.pair > b.pair;
}

// Words as runs of symbols in one array.
struct Words {
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> begin;
  std::vector<uint32_t> length;
  std::vector<uint64_t> count;
};

// Pairs formed in one step, with the words where each was formed (HF's where_to_update), in first-seen order.
class Formed {
 public:
  void add(uint64_t pair, uint32_t word) {
    auto [it, fresh] = index_.try_emplace(pair, uint32_t(pairs_.size()));
    if (fresh) {
      pairs_.push_back(pair);
      words_.emplace_back();
    }
    std::vector<uint32_t>& w = words_[it->second];
    if (w.empty() || w.back() != word) w.push_back(word);  // a word is visited once per step
  }
  size_t size() const { return pairs_.size(); }
  uint64_t pair(size_t i) const { return pairs_[i]; }
  std::vector<uint32_t>& words(size_t i) { return words_[i]; }
  void clear() {
    index_.clear();
    pairs_.clear();
    words_.clear();
  }

 private:
  std::unordered_map<uint64_t, uint32_t> index_;
  std::vector<uint64_t> pairs_;
  std::vector<std::vector<uint32_t>> words_;
};

class Trainer {
 public:
  explicit Trainer(const BpeTrainerOptions& options) : options_(options) {}

  BpeModel run(const std::vector<WordCount>& words, const BpeProgress& progress) {
    for (const std::string& token : options_.special_tokens) add_token(token);
    model_.specials = model_.vocab.size();
    compute_alphabet(words);
    model_.alphabet = model_.vocab.size() - model_.specials;
    tokenize_words(words);
    count_pairs();
    merge_loop(progress);
    finish_merges();
    return std::move(model_);
  }

 private:
  // Id of `token`, adding it at the end when new.
  uint32_t add_token(const std::string& token) {
    auto [it, fresh] = ids_.try_emplace(token, uint32_t(model_.vocab.size()));
    if (fresh) model_.vocab.push_back(token);
    return it->second;
  }

  void compute_alphabet(const std::vector<WordCount>& words) {
    std::unordered_map<uint32_t, uint64_t> counts;
    for (const WordCount& w : words) {
      if (w.count == 0) continue;
      for (size_t i = 0; i < w.word.size();) counts[next_code_point(w.word, i)] += w.count;
    }
    constexpr uint64_t kAlways = ~uint64_t{0};  // HF's usize::MAX for the initial alphabet
    for (uint32_t cp : options_.initial_alphabet) counts[cp] = kAlways;
    std::vector<std::pair<uint32_t, uint64_t>> kept(counts.begin(), counts.end());
    if (options_.limit_alphabet && kept.size() > *options_.limit_alphabet) {
      // HF drops the lowest counts with an unstable sort, so ties at the cut are unordered there; here the
      // higher code point goes first among equal counts.
      std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second < b.second : a.first > b.first;
      });
      kept.erase(kept.begin(), kept.begin() + long(kept.size() - *options_.limit_alphabet));
    }
    std::sort(kept.begin(), kept.end());
    std::string s;
    for (const auto& [cp, count] : kept) {
      s.clear();
      append_utf8(cp, s);
      add_token(s);
    }
  }

  void tokenize_words(const std::vector<WordCount>& words) {
    const std::string& prefix = options_.continuing_subword_prefix;
    std::string s;
    if (!prefix.empty()) {
      // Number the "##c" symbols before any word needs them (see bpe_trainer.h for why not HF's order).
      std::vector<uint32_t> needed;
      for (const WordCount& w : words) {
        if (w.count == 0) continue;
        for (size_t i = 0; i < w.word.size();) {
          const bool first = i == 0;
          const uint32_t cp = next_code_point(w.word, i);
          s.clear();
          append_utf8(cp, s);
          if (!first && ids_.count(s)) needed.push_back(cp);
        }
      }
      std::sort(needed.begin(), needed.end());
      needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
      std::vector<uint32_t> order;
      for (uint32_t cp : options_.continuing_order)
        if (std::binary_search(needed.begin(), needed.end(), cp) &&
            std::find(order.begin(), order.end(), cp) == order.end())
          order.push_back(cp);
      for (uint32_t cp : needed)
        if (std::find(order.begin(), order.end(), cp) == order.end()) order.push_back(cp);
      for (uint32_t cp : order) {
        s = prefix;
        append_utf8(cp, s);
        add_token(s);
      }
    }
    for (const WordCount& w : words) {
      if (w.count == 0) continue;
      words_.begin.push_back(words_.symbols.size());
      words_.count.push_back(w.count);
      for (size_t i = 0; i < w.word.size();) {
        const bool first = i == 0;
        const uint32_t cp = next_code_point(w.word, i);
        s.clear();
        append_utf8(cp, s);
        if (!ids_.count(s)) continue;  // dropped by limit_alphabet: HF removes the character from the word
        if (!first && !prefix.empty()) s.insert(0, prefix);
        words_.symbols.push_back(add_token(s));
      }
      words_.length.push_back(uint32_t(words_.symbols.size() - words_.begin.back()));
    }
  }

  void count_pairs() {
    // Initial entries: each pair with every word that holds it (HF's count_pairs + first queue fill).
    Formed formed;
    for (uint32_t w = 0; w < words_.begin.size(); ++w) {
      const uint32_t* s = &words_.symbols[words_.begin[w]];
      for (uint32_t k = 0; k + 1 < words_.length[w]; ++k) {
        const uint64_t key = pair_key(s[k], s[k + 1]);
        pairs_.at(key) += int64_t(words_.count[w]);
        formed.add(key, w);
      }
    }
    push_formed(formed);
  }

  void push_formed(Formed& formed) {
    for (size_t i = 0; i < formed.size(); ++i) {
      const int64_t count = pairs_.at(formed.pair(i));
      if (count > 0) {
        queue_.push_back(QueueEntry{uint64_t(count), formed.pair(i), std::move(formed.words(i))});
        std::push_heap(queue_.begin(), queue_.end(), popped_later);
      }
    }
    formed.clear();
  }

  // HF's Word::merge on word w: left to right, non-overlapping; the neighbours' pair counts move from the old
  // symbols to the new one.
  void merge_word(uint32_t w, uint32_t c1, uint32_t c2, uint32_t replacement, Formed& formed) {
    uint32_t* s = &words_.symbols[words_.begin[w]];
    const uint32_t n = words_.length[w];
    const int64_t count = int64_t(words_.count[w]);
    uint32_t out = 0;
    for (uint32_t r = 0; r < n;) {
      if (s[r] == c1 && r + 1 < n && s[r + 1] == c2) {
        if (out > 0) {
          pairs_.at(pair_key(s[out - 1], c1)) -= count;
          const uint64_t added = pair_key(s[out - 1], replacement);
          pairs_.at(added) += count;
          formed.add(added, w);
        }
        if (r + 2 < n) {
          pairs_.at(pair_key(c2, s[r + 2])) -= count;
          const uint64_t added = pair_key(replacement, s[r + 2]);
          pairs_.at(added) += count;
          formed.add(added, w);
        }
        s[out++] = replacement;
        r += 2;
      } else {
        s[out++] = s[r++];
      }
    }
    words_.length[w] = out;
  }

  void merge_loop(const BpeProgress& progress) {
    Formed formed;
    const std::string& prefix = options_.continuing_subword_prefix;
    while (model_.vocab.size() < options_.vocab_size && !queue_.empty()) {
      std::pop_heap(queue_.begin(), queue_.end(), popped_later);
      QueueEntry& top = queue_.back();
      const int64_t current = pairs_.at(top.pair);
      if (top.count != uint64_t(current)) {  // stale: counts only went down since it was pushed
        top.count = uint64_t(current);
        std::push_heap(queue_.begin(), queue_.end(), popped_later);
        continue;
      }
      if (top.count < 1 || options_.min_frequency > top.count) break;
      const uint32_t left = uint32_t(top.pair >> 32), right = uint32_t(top.pair);
      std::string_view part_b = model_.vocab[right];
      if (!prefix.empty() && part_b.substr(0, prefix.size()) == prefix) part_b.remove_prefix(prefix.size());
      const uint32_t id = add_token(model_.vocab[left] + std::string(part_b));
      model_.trace.push_back(BpeModel::Step{left, right, id, top.count});
      const std::vector<uint32_t> words = std::move(top.words);
      queue_.pop_back();
      for (uint32_t w : words) merge_word(w, left, right, id, formed);
      push_formed(formed);
      if (progress && model_.trace.size() % 256 == 0) progress(model_.vocab.size(), options_.vocab_size);
    }
    if (progress) progress(model_.vocab.size(), options_.vocab_size);
  }

  // HF's model keeps merges in a map pair -> (rank, id): a pair merged twice keeps the rank of its last merge.
  void finish_merges() {
    std::unordered_map<uint64_t, size_t> last;
    for (size_t i = 0; i < model_.trace.size(); ++i)
      last[pair_key(model_.trace[i].left, model_.trace[i].right)] = i;
    for (size_t i = 0; i < model_.trace.size(); ++i) {
      const uint64_t key = pair_key(model_.trace[i].left, model_.trace[i].right);
      if (last[key] == i) model_.merges.emplace_back(model_.trace[i].left, model_.trace[i].right);
    }
  }

  const BpeTrainerOptions& options_;
  BpeModel model_;
  std::unordered_map<std::string, uint32_t> ids_;
  Words words_;
  PairCounts pairs_;
  std::vector<QueueEntry> queue_;
};

}  // namespace

BpeModel train_bpe(const std::vector<WordCount>& words, const BpeTrainerOptions& options,
                   const BpeProgress& progress) {
  if (options.vocab_size == 0) throw Error("vocabulary size must be at least 1");
  return Trainer(options).run(words, progress);
}

}  // namespace lmforge::tokenizer_train
