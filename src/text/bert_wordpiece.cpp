// defines: BertWordPieceTokenizer and its per-thread encoder (see bert_wordpiece.h for the two flavours)
#include "text/bert_wordpiece.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>

#include "text/bert_unicode.h"
#include "util/error.h"

namespace lmforge::text {
namespace {

using bert::CharKind;
using bert::CharNorm;

// Decodes one UTF-8 sequence at p (< end); malformed input reads as U+FFFD over one byte.
inline uint32_t next_code_point(const uint8_t*& p, const uint8_t* end) {
  const uint8_t b0 = *p;
  if (b0 < 0x80) {
    ++p;
    return b0;
  }
  int len;
  uint32_t cp, min;
  if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, cp = b0 & 0x07, min = 0x10000;
  else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, cp = b0 & 0x0F, min = 0x800;
  else if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, cp = b0 & 0x1F, min = 0x80;
  else {
    ++p;
    return 0xFFFD;
  }
  if (end - p < len) {
    ++p;
    return 0xFFFD;
  }
  for (int i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) {
      ++p;
      return 0xFFFD;
    }
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) {
    ++p;
    return 0xFFFD;
  }
  p += len;
  return cp;
}

inline int encode_utf8(uint32_t cp, char* out) {
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    if (*p < 0x80) {
      ++p;
      continue;
    }
    const uint8_t* before = p;
    if (next_code_point(p, end) == 0xFFFD && !(p - before == 3 && before[0] == 0xEF && before[1] == 0xBF &&
                                           before[2] == 0xBD))
      return false;
  }
  return true;
}

// Hash of a short byte string, 8 bytes at a time (vocabulary pieces are at most a few dozen bytes).
inline uint64_t hash_bytes(const char* s, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, s, 8);
    h = (h ^ v) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    s += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t v = 0;
    std::memcpy(&v, s, n);
    h = (h ^ v) * 0xFF51AFD7ED558CCDull;
  }
  h ^= h >> 29;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 32);
}

// Open-addressing map from vocabulary strings to ids; lookups take (pointer, length) without building strings.
class PieceMap {
 public:
  void build(const std::vector<std::string>& tokens) {
    size_t cap = 16;
    while (cap < tokens.size() * 2 + 16) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (size_t id = 0; id < tokens.size(); ++id) {
      const std::string& t = tokens[id];
      const uint64_t h = hash_bytes(t.data(), t.size());
      size_t i = h & mask_;
      for (;; i = (i + 1) & mask_) {
        Slot& s = slots_[i];
        if (s.id < 0) {
          s = Slot{static_cast<uint32_t>(h >> 32), static_cast<int32_t>(id), static_cast<uint32_t>(pool_.size()),
                   static_cast<uint32_t>(t.size())};
          pool_ += t;
          ++size_;
          break;
        }
        if (s.len == t.size() && std::memcmp(pool_.data() + s.off, t.data(), t.size()) == 0) {
          s.id = static_cast<int32_t>(id);  // repeated token: the last line wins, as in a Python dict
          break;
        }
      }
    }
  }
  int32_t find(const char* key, size_t n) const {
    const uint64_t h = hash_bytes(key, n);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && s.len == n && std::memcmp(pool_.data() + s.off, key, n) == 0) return s.id;
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t tag = 0;
    int32_t id = -1;
    uint32_t off = 0;
    uint32_t len = 0;
  };
  std::vector<Slot> slots_;
  std::string pool_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// Byte trie of the vocabulary for the greedy longest match: one walk from `start` finds the longest piece in
// O(its length), where trying every shorter candidate with a hash lookup costs O(length^2). Transitions live in
// one open-addressing table keyed by (node << 8 | byte); each node knows the id of the token ending there.
class PieceTrie {
 public:
  void build(const std::vector<std::string>& tokens) {
    // Edges go straight into an open-addressing table (building through a std::unordered_map, a node allocation
    // and a bucket miss per edge, was most of the tokenizer's construction, which every prep and train run pays).
    // It starts at half the vocabulary's bytes and doubles whenever it would be more than half full: a vocabulary's
    // tokens share prefixes (bert-base-uncased: 201k bytes, 65k edges), so it usually never grows, where a table
    // sized for every byte an edge (4 MB) spent the build in cache misses and page faults.
    size_t bytes = 0;
    for (const std::string& t : tokens) bytes += t.size();
    size_t cap = 1024;
    while (cap < bytes / 2) cap <<= 1;
    resize_table(cap);
    ids_.assign(1, -1);
    ids_.reserve(bytes / 2 + 1);
    size_t edges = 0;
    for (size_t id = 0; id < tokens.size(); ++id) {
      uint32_t node = 0;
      for (unsigned char c : tokens[id]) {
        if (ids_.size() >= (1u << 24) - 1) throw Error("WordPiece vocabulary too large for the trie");
        const uint32_t key = node << 8 | c;
        size_t i = slot_of(key);
        while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (slots_.size() - 1);
        if (slots_[i].key == kEmpty) {
          slots_[i] = Edge{key, static_cast<uint32_t>(ids_.size())};
          ids_.push_back(-1);
          if (++edges * 2 > slots_.size()) resize_table(slots_.size() * 2);
          node = static_cast<uint32_t>(ids_.size() - 1);
          continue;
        }
        node = slots_[i].child;
      }
      if (node != 0) ids_[node] = static_cast<int32_t>(id);  // a repeated token keeps its last id
    }
    cont_root_ = child(child(0, '#'), '#');
  }
  // Child of `node` by byte c, or kNone.
  uint32_t child(uint32_t node, unsigned char c) const {
    if (node == kNone) return kNone;
    const uint32_t key = node << 8 | c;
    for (size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return slots_[i].child;
      if (slots_[i].key == kEmpty) return kNone;
    }
  }
  // Longest vocabulary piece that is a prefix of w[0, n) (after "##" when `continuation`): its id and length.
  int32_t longest(const char* w, size_t n, bool continuation, size_t& len) const {
    uint32_t node = continuation ? cont_root_ : 0;
    int32_t best = -1;
    for (size_t i = 0; i < n && node != kNone; ++i) {
      node = child(node, static_cast<unsigned char>(w[i]));
      if (node != kNone && ids_[node] >= 0) {
        best = ids_[node];
        len = i + 1;  // vocabulary pieces are whole UTF-8 sequences, so this is a character boundary
      }
    }
    return best;
  }

 private:
  static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
  static constexpr uint32_t kNone = 0xFFFFFFFFu;  // the root (0) is never a child
  struct Edge {
    uint32_t key, child;
  };
  // A table of `cap` slots (a power of two) holding the edges so far.
  void resize_table(size_t cap) {
    std::vector<Edge> old = std::move(slots_);
    shift_ = 64 - __builtin_ctzll(cap);
    slots_.assign(cap, Edge{kEmpty, 0});
    for (const Edge& e : old) {
      if (e.key == kEmpty) continue;
      size_t i = slot_of(e.key);
      while (slots_[i].key != kEmpty) i = (i + 1) & (cap - 1);
      slots_[i] = e;
    }
  }
  size_t slot_of(uint32_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  std::vector<Edge> slots_;
  std::vector<int32_t> ids_;
  unsigned shift_ = 54;
  uint32_t cont_root_ = kNone;
};

// What the encoder needs per BMP code point, precomputed: 8 bytes, so the whole table is 512 KB.
struct BmpEntry {
  CharKind kind;
  uint8_t n;
  uint8_t punct_mask;
  uint32_t data;  // n == 1: the code point; n > 1: offset into its page's pool
};

// The entries of 256 code points (U+xx00-U+xxFF), made when a text first holds one of them: making all 256 pages
// (65,536 Unicode lookups) at construction was a few percent of a small prep run, and most text touches a handful.
struct BmpPage {
  BmpEntry entries[256];
  std::vector<uint32_t> pool;  // the outputs of more than one code point
};

enum AsciiKind : uint8_t { kAsciiWord, kAsciiSpace, kAsciiPunct, kAsciiDelete };

class BertWordPieceTokenizer final : public Tokenizer {
 public:
  BertWordPieceTokenizer(std::vector<std::string> tokens, const WordPieceOptions& options, const std::string& origin)
      : tokens_(std::move(tokens)),
        flavor_(options.flavor == WordPieceFlavor::kMegatron  ? bert::Flavor::kGoogle
                : options.flavor == WordPieceFlavor::kNvidia  ? bert::Flavor::kNvidia
                                                              : bert::Flavor::kHuggingFace),
        lower_case_(options.lower_case),
        strip_accents_(options.strip_accents.value_or(options.lower_case)),
        megatron_(options.flavor == WordPieceFlavor::kMegatron),
        never_split_(options.never_split.value_or(options.flavor == WordPieceFlavor::kNvidia)) {
    if (flavor_ != bert::Flavor::kHuggingFace && strip_accents_ != lower_case_)
      throw Error(origin + ": Megatron's and NVIDIA's BERT tokenizers strip accents exactly when they lower-case");
    max_chars_ = options.max_input_chars_per_word ? options.max_input_chars_per_word : (megatron_ ? 200 : 100);
    for (size_t i = 0; i < tokens_.size(); ++i)
      if (!valid_utf8(tokens_[i]))
        throw Error(origin + ": token " + std::to_string(i) + " (line " + std::to_string(i + 1) +
                    ") is not valid UTF-8");
    pieces_.build(tokens_);
    trie_.build(tokens_);
    unk_id_ = pieces_.find(options.unk_token.data(), options.unk_token.size());
    if (unk_id_ < 0) throw Error(origin + ": the vocabulary has no unknown-word token " + options.unk_token);
    inv_ = tokens_;
    vocab_size_ = pieces_.size();
    if (megatron_) {
      // Megatron's _BertWordPieceTokenizer.add_token: [BOS] then [EOS] get id len(vocab) when absent.
      // --vocab-extra-ids: <extra_id_i> the same way (Megatron's add_additional_special_tokens).
      std::vector<std::string> extras = {"[BOS]", "[EOS]"};
      for (int i = 0; i < options.vocab_extra_ids; i++) extras.push_back("<extra_id_" + std::to_string(i) + ">");
      for (const std::string& extra : extras) {
        if (pieces_.find(extra.data(), extra.size()) >= 0) continue;
        if (inv_.size() <= vocab_size_) inv_.resize(vocab_size_ + 1);
        inv_[vocab_size_++] = extra;
      }
    } else if (options.vocab_extra_ids != 0) {
      throw Error(origin + ": --vocab-extra-ids applies to Megatron's BERT tokenizers (BertWordPieceLowerCase, "
                  "BertWordPieceCase) and SentencePieceTokenizer");
    }
    for (int c = 0; c < 128; ++c) {
      const CharNorm r = bert::normalize_char(static_cast<uint32_t>(c), flavor_, lower_case_, strip_accents_);
      ascii_map_[c] = static_cast<char>(r.n == 1 ? r.out[0] : c);
      ascii_kind_[c] = r.kind == CharKind::kSpace                         ? kAsciiSpace
                       : r.kind == CharKind::kDelete || r.n == 0          ? kAsciiDelete
                       : (r.punct_mask & 1)                              ? kAsciiPunct
                                                                         : kAsciiWord;
    }
  }
  ~BertWordPieceTokenizer() override {
    for (auto& page : bmp_pages_) delete page.load(std::memory_order_acquire);
  }
  BertWordPieceTokenizer(const BertWordPieceTokenizer&) = delete;
  BertWordPieceTokenizer& operator=(const BertWordPieceTokenizer&) = delete;

  std::unique_ptr<TextEncoder> make_encoder() const override;

  std::string decode(std::span<const int32_t> ids) const override {
    // BERT's convert_tokens_to_string: " ".join(tokens).replace(" ##", "").strip()
    std::string joined;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int32_t id = ids[i];
      if (id < 0 || static_cast<size_t>(id) >= inv_.size() ||
          (inv_[id].empty() && (static_cast<size_t>(id) >= tokens_.size())))
        throw Error("decode: id " + std::to_string(id) + " is outside the vocabulary (size " +
                    std::to_string(vocab_size_) + ")");
      if (i) joined += ' ';
      joined += inv_[id];
    }
    std::string out;
    out.reserve(joined.size());
    for (size_t i = 0; i < joined.size(); ++i) {
      if (joined.compare(i, 3, " ##") == 0) {
        i += 2;
        continue;
      }
      out += joined[i];
    }
    const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
                                              c == '\f'; };
    size_t b = 0, e = out.size();
    while (b < e && is_space(out[b])) ++b;
    while (e > b && is_space(out[e - 1])) --e;
    return out.substr(b, e - b);
  }

  size_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> eod_id() const override { return std::nullopt; }
  std::string type_name() const override {
    if (never_split_) return "NVIDIA BertTokenizer";
    return lower_case_ ? "BertWordPieceLowerCase" : "BertWordPieceCase";
  }

  // --- used by the encoder ---
  CharNorm lookup(uint32_t cp) const {
    if (cp >= 0x10000) return bert::normalize_char(cp, flavor_, lower_case_, strip_accents_);
    const BmpPage& page = bmp_page(cp);
    const BmpEntry& e = page.entries[cp & 0xFF];
    CharNorm r;
    r.kind = e.kind;
    r.n = e.n;
    r.punct_mask = e.punct_mask;
    if (e.n == 1) r.out[0] = e.data;
    else std::copy(page.pool.begin() + e.data, page.pool.begin() + e.data + e.n, r.out);
    return r;
  }
  CharKind kind_of(uint32_t cp) const { return cp < 0x10000 ? bmp(cp).kind : lookup(cp).kind; }
  const BmpEntry& bmp(uint32_t cp) const { return bmp_page(cp).entries[cp & 0xFF]; }
  // The page of BMP code point cp, made by the first thread that needs it (another thread that made it at the same
  // time drops its copy): the encoders share the tokenizer.
  const BmpPage& bmp_page(uint32_t cp) const {
    std::atomic<const BmpPage*>& slot = bmp_pages_[cp >> 8];
    if (const BmpPage* page = slot.load(std::memory_order_acquire)) return *page;
    auto page = std::make_unique<BmpPage>();
    for (uint32_t low = 0; low < 256; ++low) {
      const uint32_t c = (cp & 0xFF00) | low;
      BmpEntry& e = page->entries[low];
      if (c >= 0xD800 && c < 0xE000) {
        e = BmpEntry{CharKind::kDelete, 0, 0, 0};
        continue;
      }
      const CharNorm r = bert::normalize_char(c, flavor_, lower_case_, strip_accents_);
      e.kind = r.kind;
      e.n = r.n;
      e.punct_mask = r.punct_mask;
      if (r.n == 1) {
        e.data = r.out[0];
      } else {
        e.data = static_cast<uint32_t>(page->pool.size());
        page->pool.insert(page->pool.end(), r.out, r.out + r.n);
      }
    }
    const BmpPage* expected = nullptr;
    if (slot.compare_exchange_strong(expected, page.get(), std::memory_order_acq_rel, std::memory_order_acquire))
      return *page.release();
    return *expected;
  }

  PieceMap pieces_;
  PieceTrie trie_;
  std::vector<std::string> tokens_;
  std::vector<std::string> inv_;
  bert::Flavor flavor_;
  bool lower_case_;
  bool strip_accents_;
  bool megatron_;
  bool never_split_;  // kNvidia: BasicTokenizer's never_split words are kept whole
  size_t max_chars_ = 200;
  size_t vocab_size_ = 0;
  int32_t unk_id_ = -1;
  char ascii_map_[128] = {};
  uint8_t ascii_kind_[128] = {};
  mutable std::array<std::atomic<const BmpPage*>, 256> bmp_pages_{};  // owned; null until bmp_page() makes one
};

class BertEncoder final : public TextEncoder {
 public:
  explicit BertEncoder(const BertWordPieceTokenizer& t) : t_(t) {}

  void encode(std::string_view text, std::vector<int32_t>& ids) override {
    // NVIDIA's never_split words all start with '[': text without one takes the one-pass path.
    if (t_.never_split_ && std::memchr(text.data(), '[', text.size()) != nullptr) encode_never_split(text, ids);
    else encode_plain(text, ids);
  }

 private:
  // NVIDIA's BasicTokenizer: a whitespace-delimited word (after clean text and CJK padding) that is exactly one of
  // the never_split words is neither lower-cased nor split at punctuation; WordPiece then finds it whole. Other
  // words go through encode_plain(), one word at a time (a word's final-sigma context ends at its boundaries).
  void encode_never_split(std::string_view text, std::vector<int32_t>& ids) {
    static constexpr std::string_view kNeverSplit[] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"};
    const auto* begin = reinterpret_cast<const uint8_t*>(text.data());
    const auto* end = begin + text.size();
    const uint8_t* word = begin;  // start of the current word's raw bytes
    std::string cleaned;          // the word's characters that clean text keeps
    size_t cleaned_chars = 0;
    auto finish_word = [&](const uint8_t* word_end) {
      if (word == word_end) return;
      bool kept = false;
      for (std::string_view special : kNeverSplit) kept = kept || cleaned == special;
      if (kept) {
        word_ = cleaned;
        chars_ = cleaned_chars;
        flush(ids);
      } else {
        encode_plain(std::string_view(reinterpret_cast<const char*>(word), size_t(word_end - word)), ids);
      }
      cleaned.clear();
      cleaned_chars = 0;
    };
    for (const uint8_t* p = begin; p < end;) {
      const uint8_t* at = p;
      const uint32_t cp = next_code_point(p, end);
      const CharKind k = t_.kind_of(cp);
      if (k == CharKind::kSpace || k == CharKind::kCjk) {
        finish_word(at);
        if (k == CharKind::kCjk) encode_plain(std::string_view(reinterpret_cast<const char*>(at), size_t(p - at)), ids);
        word = p;
      } else if (k != CharKind::kDelete) {
        cleaned.append(reinterpret_cast<const char*>(at), size_t(p - at));
        ++cleaned_chars;
      }
    }
    finish_word(end);
  }

  void encode_plain(std::string_view text, std::vector<int32_t>& ids) {
    const auto* begin = reinterpret_cast<const uint8_t*>(text.data());
    const auto* end = begin + text.size();
    const uint8_t* kind = t_.ascii_kind_;
    const char* lower = t_.ascii_map_;
    const uint8_t* p = begin;
    while (p < end) {
      const uint8_t b = *p;
      if (b < 0x80) {
        switch (kind[b]) {
          case kAsciiWord: {
            // Fast path: a run of ASCII word characters is copied (lower-cased) in one go.
            const uint8_t* q = p + 1;
            while (q < end && *q < 0x80 && kind[*q] == kAsciiWord) ++q;
            const size_t n = static_cast<size_t>(q - p), old = word_.size();
            word_.resize(old + n);
            char* dst = word_.data() + old;
            for (size_t i = 0; i < n; ++i) dst[i] = lower[p[i]];
            chars_ += n;
            p = q;
            break;
          }
          case kAsciiSpace:
            flush(ids);
            ++p;
            break;
          case kAsciiPunct:
            flush(ids);
            single(reinterpret_cast<const char*>(p), 1, ids);
            ++p;
            break;
          default:
            ++p;
        }
        continue;
      }
      const uint8_t* at = p;
      const uint32_t cp = next_code_point(p, end);
      if (cp < 0x10000) {
        // Common case: a BMP character that stays one character (a letter continues the word).
        const BmpEntry& e = t_.bmp(cp);
        if (e.kind == CharKind::kText && e.n == 1) {
          if (e.punct_mask) {
            flush(ids);
            char buf[4];
            single(buf, static_cast<size_t>(encode_utf8(e.data, buf)), ids);
          } else {
            append(e.data);
          }
          continue;
        }
        if (e.kind == CharKind::kDelete) continue;
        if (e.kind == CharKind::kSpace) {
          flush(ids);
          continue;
        }
      }
      const CharNorm r = t_.lookup(cp);
      switch (r.kind) {
        case CharKind::kDelete:
          break;
        case CharKind::kSpace:
          flush(ids);
          break;
        case CharKind::kCjk: {
          flush(ids);
          char buf[4 * CharNorm::kMaxOut];
          int len = 0;
          for (int i = 0; i < r.n; ++i) len += encode_utf8(r.out[i], buf + len);
          if (len) single(buf, static_cast<size_t>(len), ids);
          break;
        }
        case CharKind::kSigma:
          append(final_sigma(begin, at, p, end) ? 0x3C2 : 0x3C3);
          break;
        case CharKind::kText:
          for (int i = 0; i < r.n; ++i) {
            if (r.punct_mask & (1u << i)) {
              flush(ids);
              char buf[4];
              single(buf, static_cast<size_t>(encode_utf8(r.out[i], buf)), ids);
            } else {
              append(r.out[i]);
            }
          }
          break;
      }
    }
    flush(ids);
  }

  void append(uint32_t cp) {
    char buf[4];
    word_.append(buf, static_cast<size_t>(encode_utf8(cp, buf)));
    ++chars_;
  }

  // Python's Final_Sigma test on the whitespace-delimited token around Σ (text[at, after)): characters that clean
  // text deletes are not in the token, and whitespace or a CJK ideograph (padded with spaces) ends it.
  bool final_sigma(const uint8_t* begin, const uint8_t* at, const uint8_t* after, const uint8_t* end) const {
    bool cased_before = false;
    for (const uint8_t* q = at; q > begin;) {
      const uint8_t* s = q - 1;
      while (s > begin && (*s & 0xC0) == 0x80 && q - s < 4) --s;
      const uint8_t* r = s;
      const uint32_t cp = next_code_point(r, end);
      q = s;
      const CharKind k = t_.kind_of(cp);
      if (k == CharKind::kDelete) continue;
      if (k == CharKind::kSpace || k == CharKind::kCjk) break;
      if (bert::py_case_ignorable(cp)) continue;
      cased_before = bert::py_cased(cp);
      break;
    }
    if (!cased_before) return false;
    for (const uint8_t* q = after; q < end;) {
      const uint32_t cp = next_code_point(q, end);
      const CharKind k = t_.kind_of(cp);
      if (k == CharKind::kDelete) continue;
      if (k == CharKind::kSpace || k == CharKind::kCjk) break;
      if (bert::py_case_ignorable(cp)) continue;
      return !bert::py_cased(cp);
    }
    return true;
  }

  // A punctuation character or CJK ideograph: a word of one character.
  void single(const char* s, size_t n, std::vector<int32_t>& ids) {
    const int32_t id = t_.pieces_.find(s, n);
    ids.push_back(id >= 0 ? id : t_.unk_id_);
  }

  void flush(std::vector<int32_t>& ids) {
    if (!word_.empty()) wordpiece(ids);
    word_.clear();
    chars_ = 0;
  }

  // Greedy longest-match-first: the longest vocabulary piece at `start` ("##" + piece after the first), then go
  // on after it; a word with a remainder no piece starts becomes one [UNK] as a whole.
  void wordpiece(std::vector<int32_t>& ids) {
    if (chars_ > t_.max_chars_) {
      ids.push_back(t_.unk_id_);
      return;
    }
    const char* w = word_.data();
    const size_t n = word_.size();
    // Most words are pieces themselves: one hash probe instead of a walk of the trie (a cache miss per byte).
    if (const int32_t whole = t_.pieces_.find(w, n); whole >= 0) {
      ids.push_back(whole);
      return;
    }
    const size_t mark = ids.size();
    for (size_t start = 0; start < n;) {
      size_t len = 0;
      const int32_t id = t_.trie_.longest(w + start, n - start, start > 0, len);
      if (id < 0) {
        ids.resize(mark);
        ids.push_back(t_.unk_id_);
        return;
      }
      ids.push_back(id);
      start += len;
    }
  }

  const BertWordPieceTokenizer& t_;
  std::string word_;
  size_t chars_ = 0;
};

std::unique_ptr<TextEncoder> BertWordPieceTokenizer::make_encoder() const {
  return std::make_unique<BertEncoder>(*this);
}

std::vector<std::string> read_vocab(const std::string& path, bool megatron) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the WordPiece vocabulary (--vocab-file)");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path + ": read error");
  const std::string data = ss.str();
  std::vector<std::string> tokens;
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
                                            c == '\f'; };
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) nl = data.size();
    size_t b = pos, e = nl;
    // Google's load_vocab: token.strip(); HF's WordPiece::read_file: trim_end().
    if (megatron)
      while (b < e && is_space(data[b])) ++b;
    while (e > b && is_space(data[e - 1])) --e;
    tokens.emplace_back(data, b, e - b);
    if (!valid_utf8(tokens.back()))
      throw Error(input_location(path, tokens.size()) + ": the vocabulary line is not valid UTF-8");
    pos = nl + 1;
  }
  if (tokens.empty()) throw Error(path + ": the WordPiece vocabulary is empty");
  return tokens;
}

}  // namespace

std::vector<std::string> read_wordpiece_vocab(const std::string& vocab_file, WordPieceFlavor flavor) {
  // NVIDIA's load_vocab strips each line as Google's does.
  return read_vocab(vocab_file, flavor != WordPieceFlavor::kHuggingFace);
}

std::unique_ptr<Tokenizer> make_bert_wordpiece_tokenizer(std::vector<std::string> tokens,
                                                         const WordPieceOptions& options, const std::string& origin) {
  return std::make_unique<BertWordPieceTokenizer>(std::move(tokens), options, origin);
}

std::unique_ptr<Tokenizer> make_bert_wordpiece_tokenizer(const std::string& vocab_file,
                                                         const WordPieceOptions& options) {
  return make_bert_wordpiece_tokenizer(read_wordpiece_vocab(vocab_file, options.flavor), options, vocab_file);
}

std::unique_ptr<Tokenizer> make_bert_wordpiece_tokenizer(const std::string& vocab_file, bool lower_case,
                                                         WordPieceFlavor flavor, int vocab_extra_ids) {
  WordPieceOptions options;
  options.flavor = flavor;
  options.lower_case = lower_case;
  options.vocab_extra_ids = vocab_extra_ids;
  return make_bert_wordpiece_tokenizer(vocab_file, options);
}

}  // namespace lmforge::text
