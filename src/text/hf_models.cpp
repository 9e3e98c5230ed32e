// defines: tokenizer.json models (BPE, WordPiece, Unigram, WordLevel), each as Hugging Face tokenizers runs it
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "text/hf_components.h"
#include "util/error.h"

namespace lmforge::text::hf {

using simdjson::dom::element;

void HfModel::index_vocab() {
  int32_t max_id = -1;
  for (const auto& [tok, id] : vocab_) max_id = std::max(max_id, id);
  id_to_token_.assign(size_t(max_id + 1), std::string());
  present_.assign(size_t(max_id + 1), 0);
  for (const auto& [tok, id] : vocab_) {
    id_to_token_[id] = tok;
    present_[id] = 1;
  }
}

namespace {

// Reads a {"token": id, ...} vocabulary.
void read_vocab_map(const element& e, const std::string& path, const Context& cx, Vocab& vocab) {
  auto f = opt_field(e, "vocab");
  simdjson::dom::object obj;
  if (!f || f->get(obj) != simdjson::SUCCESS) cx.fail(path + ".vocab", "expected an object of token: id");
  constexpr int64_t kMaxId = (int64_t{1} << 26);
  for (auto [key, value] : obj) {
    int64_t id;
    uint64_t u;
    if (value.get(id) != simdjson::SUCCESS) {
      if (value.get(u) != simdjson::SUCCESS) cx.fail(path + ".vocab", "token \"" + std::string(key) + "\": id is not an integer");
      id = int64_t(std::min<uint64_t>(u, kMaxId + 1));
    }
    if (id < 0 || id > kMaxId) cx.fail(path + ".vocab", "token \"" + std::string(key) + "\": id out of range");
    vocab.insert_or_assign(std::string(key), int32_t(id));  // a repeated key keeps its last id, as serde does
  }
}

// The f64 Hugging Face gets for a JSON number. serde_json (without its float_roundtrip feature) parses the
// digits into an integer significand, converts that to f64 and multiplies or divides by a power of ten: two
// roundings, so 17-digit numbers can land one ulp away from the correctly rounded value simdjson returns. Unigram
// ties between equal-score segmentations ("!" + "!!!" vs "!!!" + "!") are decided by that last ulp. tokenizer.json
// files store the shortest round-trip digits (serde_json writes with ryu), which std::to_chars reproduces.
double serde_json_f64(double v) {
  if (!std::isfinite(v) || v == 0) return v;
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string_view text(buf, size_t(r.ptr - buf));  // [-]d[.ddd]e[+-]xx
  const bool negative = text[0] == '-';
  uint64_t significand = 0;
  int exponent = 0;
  size_t i = negative ? 1 : 0;
  bool after_point = false;
  for (; i < text.size() && text[i] != 'e'; ++i) {
    if (text[i] == '.') {
      after_point = true;
      continue;
    }
    significand = significand * 10 + uint64_t(text[i] - '0');  // at most 17 digits: no overflow
    if (after_point) --exponent;
  }
  exponent += std::atoi(std::string(text.substr(i + 1)).c_str());
  static const auto pow10 = [] {
    std::vector<double> p(309);
    for (int k = 0; k <= 308; ++k) p[size_t(k)] = std::strtod(("1e" + std::to_string(k)).c_str(), nullptr);
    return p;
  }();
  double f = double(significand);
  while (true) {
    const int a = exponent < 0 ? -exponent : exponent;
    if (a <= 308) {
      if (exponent >= 0) f *= pow10[size_t(a)];
      else f /= pow10[size_t(a)];
      break;
    }
    if (f == 0) break;
    f /= 1e308;
    exponent += 308;
  }
  return negative ? -f : f;
}

std::string byte_token(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// ---------------------------------------------------------------------------------------------------------
// BPE

class BpeModel final : public HfModel {
 public:
  BpeModel(const element& e, const std::string& path, const Context& cx) {
    read_vocab_map(e, path, cx, vocab_);
    index_vocab();
    if (auto d = opt_double(e, "dropout", path, cx); d && *d != 0.0)
      cx.fail(path + ".dropout", "BPE dropout is random; only null or 0 is supported for reproducible ids");
    unk_token_ = opt_string(e, "unk_token", path, cx);
    prefix_ = opt_string(e, "continuing_subword_prefix", path, cx).value_or("");
    suffix_ = opt_string(e, "end_of_word_suffix", path, cx).value_or("");
    fuse_unk_ = get_bool(e, "fuse_unk", false, path, cx);
    byte_fallback_ = get_bool(e, "byte_fallback", false, path, cx);
    ignore_merges_ = get_bool(e, "ignore_merges", false, path, cx);
    if (byte_fallback_)
      for (int b = 0; b < 256; ++b) {
        auto id = token_to_id(byte_token(uint8_t(b)));
        byte_ids_[b] = id ? *id : -1;
      }
    size_t rank = 0;
    const std::string mpath = path + ".merges";
    std::vector<std::pair<uint64_t, Merge>> pairs;
    for (element m : get_array(e, "merges", path, cx)) {
      std::string a, b;
      std::string_view s;
      simdjson::dom::array pair;
      if (m.get(s) == simdjson::SUCCESS) {
        const size_t sp = s.find(' ');
        if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos)
          cx.fail(mpath + "[" + std::to_string(rank) + "]", "expected \"left right\", got \"" + std::string(s) + "\"");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.get(pair) == simdjson::SUCCESS && pair.size() == 2) {
        std::string_view x, y;
        if (pair.at(0).get(x) != simdjson::SUCCESS || pair.at(1).get(y) != simdjson::SUCCESS)
          cx.fail(mpath + "[" + std::to_string(rank) + "]", "expected two strings");
        a = x;
        b = y;
      } else {
        cx.fail(mpath + "[" + std::to_string(rank) + "]", "expected \"left right\" or [\"left\", \"right\"]");
      }
      auto ia = token_to_id(a), ib = token_to_id(b);
      // HF forms the merged token as a + b without the continuing-subword prefix's length of bytes.
      const std::string merged = a + (b.size() >= prefix_.size() ? b.substr(prefix_.size()) : std::string());
      auto im = token_to_id(merged);
      if (!ia || !ib || !im)
        cx.fail(mpath + "[" + std::to_string(rank) + "]",
                "merge token \"" + (!ia ? a : !ib ? b : merged) + "\" is not in the vocabulary");
      pairs.push_back({key(*ia, *ib), Merge{uint32_t(rank), *im}});
      ++rank;
    }
    build_merge_table(pairs);
    if (unk_token_) unk_id_ = token_to_id(*unk_token_);
    // Ids of single characters (with the continuing-subword prefix for the non-first ones): most lookups.
    for (const auto& [tok, id] : vocab_) {
      int len;
      if (tok.empty()) continue;
      uint32_t cp = next_char(tok, 0, len);
      if (size_t(len) == tok.size()) set_char(first_char_, cp, id);
      if (!prefix_.empty() && tok.size() > prefix_.size() && tok.compare(0, prefix_.size(), prefix_) == 0) {
        cp = next_char(tok, prefix_.size(), len);
        if (prefix_.size() + size_t(len) == tok.size()) set_char(next_char_, cp, id);
      }
    }
  }

  std::string type() const override { return "BPE"; }

  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    if (w.empty()) return;
    if (ignore_merges_) {
      if (auto id = token_to_id(w)) {
        out.push_back(*id);
        return;
      }
    }
    thread_local std::vector<int32_t> sym;
    sym.clear();
    std::optional<int32_t> unk;  // pending unknown, fused or not
    std::string s;
    for (size_t i = 0; i < w.size();) {
      int len;
      const uint32_t cp = next_char(w, i, len);
      const bool first = i == 0, last = i + size_t(len) == w.size();
      if (!last || suffix_.empty()) {  // fast: a single character (after the prefix) from the table
        const int32_t id = get_char(first || prefix_.empty() ? first_char_ : next_char_, cp);
        if (id >= 0) {
          i += size_t(len);
          if (unk) {
            sym.push_back(*unk);
            unk.reset();
          }
          sym.push_back(id);
          continue;
        }
      }
      s.clear();
      if (!first) s += prefix_;
      s.append(w.substr(i, size_t(len)));
      if (last) s += suffix_;
      i += size_t(len);
      if (auto id = token_to_id(s)) {
        if (unk) {
          sym.push_back(*unk);
          unk.reset();
        }
        sym.push_back(*id);
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (const char c : s) all &= byte_ids_[static_cast<unsigned char>(c)] >= 0;
        if (all) {  // as HF: a pending unknown is not flushed first
          for (const char c : s) sym.push_back(byte_ids_[static_cast<unsigned char>(c)]);
          continue;
        }
      }
      if (unk_token_) {
        if (!unk_id_) throw Error("BPE: unk_token \"" + *unk_token_ + "\" is not in the vocabulary");
        if (unk && !fuse_unk_) sym.push_back(*unk);
        unk = *unk_id_;
      }
      // No unk_token: HF drops the character.
    }
    if (unk) sym.push_back(*unk);
    merge_all(sym, out);
  }

 private:
  struct Merge {
    uint32_t rank;
    int32_t merged;
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  // Open addressing, linear probing, load <= 1/2: the lookups of BPE on words the cache has not seen.
  const Merge* find(int32_t a, int32_t b) const {
    const uint64_t k = key(a, b);
    for (size_t h = (k * 0x9E3779B97F4A7C15ull) >> shift_;; h = (h + 1) & mask_) {
      if (keys_[h] == k) return &vals_[h];
      if (keys_[h] == kEmpty) return nullptr;
    }
  }
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  void build_merge_table(const std::vector<std::pair<uint64_t, Merge>>& pairs) {
    size_t cap = 16;
    while (cap < pairs.size() * 2) cap <<= 1;
    mask_ = cap - 1;
    shift_ = 64 - std::countr_zero(cap);
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, Merge{});
    for (const auto& [k, m] : pairs) {  // a repeated pair keeps its last rank
      size_t h = (k * 0x9E3779B97F4A7C15ull) >> shift_;
      while (keys_[h] != kEmpty && keys_[h] != k) h = (h + 1) & mask_;
      keys_[h] = k;
      vals_[h] = m;
    }
  }
  // Character -> id: a direct table below U+0800, a hash map above.
  struct CharIds {
    std::vector<int32_t> low = std::vector<int32_t>(0x800, -1);
    std::unordered_map<uint32_t, int32_t> high;
  };
  static void set_char(CharIds& t, uint32_t cp, int32_t id) {
    if (cp < 0x800) t.low[cp] = id;
    else t.high[cp] = id;
  }
  static int32_t get_char(const CharIds& t, uint32_t cp) {
    if (cp < 0x800) return t.low[cp];
    auto it = t.high.find(cp);
    return it == t.high.end() ? -1 : it->second;
  }

  // Lowest rank first, leftmost among equal ranks (HF's Word::merge_all with its (rank, position) heap).
  void merge_all(std::vector<int32_t>& sym, std::vector<int32_t>& out) const {
    const size_t n = sym.size();
    if (n <= 1) {
      out.insert(out.end(), sym.begin(), sym.end());
      return;
    }
    thread_local std::vector<int32_t> next, prev;  // per-thread scratch: no allocation per word
    thread_local std::vector<uint64_t> heap;
    next.resize(n);
    prev.resize(n);
    heap.clear();
    for (size_t k = 0; k < n; ++k) {
      next[k] = k + 1 < n ? int32_t(k + 1) : -1;
      prev[k] = int32_t(k) - 1;
    }
    auto push = [&](int32_t left) {
      if (left < 0 || next[left] < 0) return;
      if (const Merge* m = find(sym[left], sym[next[left]])) {
        heap.push_back((uint64_t(m->rank) << 32) | uint32_t(left));
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      }
    };
    for (size_t k = 0; k + 1 < n; ++k) push(int32_t(k));
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      const uint64_t top = heap.back();
      heap.pop_back();
      const int32_t left = int32_t(uint32_t(top));
      if (sym[left] < 0 || next[left] < 0) continue;
      const int32_t right = next[left];
      const Merge* m = find(sym[left], sym[right]);
      if (m == nullptr || m->rank != uint32_t(top >> 32)) continue;
      sym[left] = m->merged;
      sym[right] = -1;
      next[left] = next[right];
      if (next[left] >= 0) prev[next[left]] = left;
      push(prev[left]);
      push(left);
    }
    for (int32_t k = 0; k >= 0; k = next[k]) out.push_back(sym[k]);
  }

  std::optional<std::string> unk_token_;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256] = {};
  std::vector<uint64_t> keys_;
  std::vector<Merge> vals_;
  size_t mask_ = 0;
  int shift_ = 60;
  CharIds first_char_, next_char_;
};

// ---------------------------------------------------------------------------------------------------------
// WordPiece: greedy longest match from the left; a word too long or not coverable is one unk.

class WordPieceModel final : public HfModel {
 public:
  WordPieceModel(const element& e, const std::string& path, const Context& cx) {
    read_vocab_map(e, path, cx, vocab_);
    index_vocab();
    unk_token = opt_string(e, "unk_token", path, cx).value_or("[UNK]");
    prefix = opt_string(e, "continuing_subword_prefix", path, cx).value_or("##");
    max_chars = size_t(opt_int(e, "max_input_chars_per_word", path, cx).value_or(100));
  }
  std::string type() const override { return "WordPiece"; }

  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    size_t chars = 0;
    for (const char c : w) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (chars > max_chars) {
      out.push_back(unk());
      return;
    }
    const size_t before = out.size();
    std::string sub;
    size_t start = 0;
    while (start < w.size()) {
      size_t end = w.size();
      std::optional<int32_t> found;
      while (start < end) {
        sub.clear();
        if (start > 0) sub += prefix;
        sub.append(w.substr(start, end - start));
        if ((found = token_to_id(sub))) break;
        do --end;  // back one character
        while (end > start && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80);
      }
      if (!found) {
        out.resize(before);
        out.push_back(unk());
        return;
      }
      out.push_back(*found);
      start = end;
    }
  }

  std::string unk_token, prefix;
  size_t max_chars = 100;

 private:
  int32_t unk() const {
    auto id = token_to_id(unk_token);
    if (!id) throw Error("WordPiece: unk_token \"" + unk_token + "\" is not in the vocabulary");
    return *id;
  }
};

class WordLevelModel final : public HfModel {
 public:
  WordLevelModel(const element& e, const std::string& path, const Context& cx) {
    read_vocab_map(e, path, cx, vocab_);
    index_vocab();
    unk_token_ = opt_string(e, "unk_token", path, cx).value_or("<unk>");
  }
  std::string type() const override { return "WordLevel"; }
  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    if (auto id = token_to_id(w)) {
      out.push_back(*id);
    } else if (auto unk = token_to_id(unk_token_)) {
      out.push_back(*unk);
    } else {
      throw Error("WordLevel: \"" + std::string(w) + "\" is not in the vocabulary and unk_token \"" + unk_token_ +
                  "\" is not either");
    }
  }

 private:
  std::string unk_token_;
};

// ---------------------------------------------------------------------------------------------------------
// Unigram: Viterbi over the pieces that start at each character (HF's encode_optimized, same tie-breaking:
// candidates in order of start position then length, a later one replaces only with a strictly higher score).

class UnigramModel final : public HfModel {
 public:
  UnigramModel(const element& e, const std::string& path, const Context& cx) {
    size_t i = 0;
    nodes_.push_back(TrieNode{});
    for (element item : get_array(e, "vocab", path, cx)) {
      simdjson::dom::array pair;
      std::string_view piece;
      double score;
      const std::string ipath = path + ".vocab[" + std::to_string(i) + "]";
      if (item.get(pair) != simdjson::SUCCESS || pair.size() != 2 || pair.at(0).get(piece) != simdjson::SUCCESS ||
          pair.at(1).get(score) != simdjson::SUCCESS)
        cx.fail(ipath, "expected [\"piece\", score]");
      vocab_.insert_or_assign(std::string(piece), int32_t(i));
      scores_.push_back(serde_json_f64(score));
      insert(piece);
      ++i;
    }
    if (scores_.empty()) cx.fail(path + ".vocab", "the Unigram vocabulary is empty");
    build_edge_table();
    index_vocab();
    if (auto u = opt_int(e, "unk_id", path, cx)) {
      if (*u < 0 || size_t(*u) >= scores_.size()) cx.fail(path + ".unk_id", "out of range");
      unk_id_ = int32_t(*u);
    }
    byte_fallback_ = get_bool(e, "byte_fallback", false, path, cx);
    min_score_ = *std::min_element(scores_.begin(), scores_.end());
  }
  std::string type() const override { return "Unigram"; }

  void tokenize(std::string_view s, std::vector<int32_t>& out) const override {
    if (s.empty()) return;
    constexpr double kUnkPenalty = 10.0;
    const double unk_score = min_score_ - kUnkPenalty;
    const size_t n = s.size();
    struct Best {
      int32_t id = -1;
      double score = 0;
      int64_t starts_at = -1;
    };
    thread_local std::vector<Best> best;
    best.assign(n + 1, Best{});
    best[0].score = 0;
    for (size_t at = 0; at < n;) {
      const double here = best[at].score;
      int mblen;
      next_char(s, at, mblen);
      bool single = false;
      uint32_t node = 0;
      for (size_t k = at; k < n; ++k) {
        node = child(node, static_cast<unsigned char>(s[k]));
        if (node == 0) break;
        const int32_t id = nodes_[node].id;
        if (id < 0) continue;
        const size_t end = k + 1;
        const double cand = scores_[id] + here;
        Best& t = best[end];
        if (t.starts_at < 0 || cand > t.score) t = Best{id, cand, int64_t(at)};
        if (end - at == size_t(mblen)) single = true;
      }
      if (!single) {
        if (!unk_id_) throw Error("Unigram: a character has no piece and the model has no unk_id");
        Best& t = best[at + size_t(mblen)];
        const double cand = unk_score + here;
        if (t.starts_at < 0 || cand > t.score) t = Best{*unk_id_, cand, int64_t(at)};
      }
      at += size_t(mblen);
    }
    // Back-track; consecutive unknowns are fused into one piece (HF's Unigram always fuses).
    std::vector<std::pair<size_t, size_t>> pieces;  // [b, e), reversed
    size_t end = n;
    size_t fuse_end = 0;
    bool fusing = false;
    while (end > 0) {
      const Best& b = best[end];
      const size_t start = size_t(b.starts_at);
      if (unk_id_ && b.id == *unk_id_) {
        if (!fusing) fuse_end = end;
        fusing = true;
      } else {
        if (fusing) pieces.emplace_back(end, fuse_end);
        fusing = false;
        pieces.emplace_back(start, end);
      }
      end = start;
    }
    if (fusing) pieces.emplace_back(0, fuse_end);
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
      const std::string_view p = s.substr(it->first, it->second - it->first);
      if (auto id = token_to_id(p)) {
        out.push_back(*id);
        continue;
      }
      if (byte_fallback_) {
        std::vector<int32_t> bytes;
        for (const char c : p) {
          auto id = token_to_id(byte_token(static_cast<unsigned char>(c)));
          if (!id) break;
          bytes.push_back(*id);
        }
        if (bytes.size() == p.size()) {
          out.insert(out.end(), bytes.begin(), bytes.end());
          continue;
        }
      }
      if (!unk_id_) throw Error("Unigram: a piece is not in the vocabulary and the model has no unk_id");
      out.push_back(*unk_id_);
    }
  }

 private:
  struct TrieNode {
    int32_t id = -1;
  };
  // Trie edges in an open-addressing table (key = node << 8 | byte; 0 = empty, as no edge leads to the root).
  uint32_t child(uint32_t node, uint8_t byte) const {
    const uint64_t k = (uint64_t(node) << 8) | byte;
    for (size_t h = (k * 0x9E3779B97F4A7C15ull) >> shift_;; h = (h + 1) & mask_) {
      if (table_[h].key == k) return table_[h].child;
      if (table_[h].child == 0) return 0;
    }
  }
  void build_edge_table() {
    size_t cap = 16;
    while (cap < edges_.size() * 2) cap <<= 1;
    mask_ = cap - 1;
    shift_ = 64 - std::countr_zero(cap);
    table_.assign(cap, Edge{});
    for (const auto& [k, c] : edges_) {
      size_t h = (k * 0x9E3779B97F4A7C15ull) >> shift_;
      while (table_[h].child != 0) h = (h + 1) & mask_;
      table_[h] = Edge{k, c};
    }
    edges_.clear();
  }
  struct Edge {
    uint64_t key = 0;
    uint32_t child = 0;
  };
  std::vector<Edge> table_;
  size_t mask_ = 0;
  int shift_ = 60;
  void insert(std::string_view piece) {
    uint32_t node = 0;
    for (const char c : piece) {
      const uint64_t k = (uint64_t(node) << 8) | static_cast<unsigned char>(c);
      auto it = edges_.find(k);
      if (it == edges_.end()) {
        nodes_.push_back(TrieNode{});
        it = edges_.emplace(k, uint32_t(nodes_.size() - 1)).first;
      }
      node = it->second;
    }
    if (node != 0) nodes_[node].id = vocab_.at(std::string(piece));
  }

  std::vector<double> scores_;
  std::vector<TrieNode> nodes_;
  std::unordered_map<uint64_t, uint32_t> edges_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  double min_score_ = 0;
};

}  // namespace

std::unique_ptr<HfModel> make_model(const element& e, const std::string& path, const Context& cx) {
  std::string type;
  if (auto t = opt_string(e, "type", path, cx)) {
    type = *t;
  } else if (opt_field(e, "merges")) {  // old files omit the model type
    type = "BPE";
  } else if (opt_field(e, "vocab") && opt_field(e, "vocab")->type() == simdjson::dom::element_type::ARRAY) {
    type = "Unigram";
  } else {
    cx.fail(path, "missing \"type\"");
  }
  if (type == "BPE") return std::make_unique<BpeModel>(e, path, cx);
  if (type == "WordPiece") return std::make_unique<WordPieceModel>(e, path, cx);
  if (type == "Unigram") return std::make_unique<UnigramModel>(e, path, cx);
  if (type == "WordLevel") return std::make_unique<WordLevelModel>(e, path, cx);
  cx.fail(path, "model type \"" + type + "\" is not supported (supported: BPE, WordPiece, Unigram, WordLevel)");
}

}  // namespace lmforge::text::hf
