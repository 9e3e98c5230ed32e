// defines: tokenizer.json normalizers, pre-tokenizers and decoders, each as Hugging Face tokenizers runs it
#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include "text/bert_unicode.h"
#include "text/gpt2_bpe.h"
#include "text/gpt2_pretokenizer.h"
#include "text/hf_components.h"
#include "text/hf_regex.h"
#include "text/unicode_classes.h"
#include "text/utf8_repair.h"
#include "util/error.h"

namespace lmforge::text::hf {

using simdjson::dom::element;

// ---------------------------------------------------------------------------------------------------------
// JSON and UTF-8 helpers

void Context::fail(const std::string& path, const std::string& reason) const {
  throw Error(origin + ": " + path + ": " + reason);
}

std::optional<element> opt_field(const element& e, std::string_view key) {
  element v;
  if (e.type() != simdjson::dom::element_type::OBJECT) return std::nullopt;
  if (e[key].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  return v;
}

std::string get_type(const element& e, const std::string& path, const Context& cx) {
  if (e.type() != simdjson::dom::element_type::OBJECT) cx.fail(path, "expected an object");
  return get_string(e, "type", path, cx);
}

std::string get_string(const element& e, std::string_view key, const std::string& path, const Context& cx) {
  auto s = opt_string(e, key, path, cx);
  if (!s) cx.fail(path, "missing string field \"" + std::string(key) + "\"");
  return *s;
}

std::optional<std::string> opt_string(const element& e, std::string_view key, const std::string& path,
                                      const Context& cx) {
  auto f = opt_field(e, key);
  if (!f) return std::nullopt;
  std::string_view s;
  if (f->get(s) != simdjson::SUCCESS) cx.fail(path + "." + std::string(key), "expected a string");
  return std::string(s);
}

bool get_bool(const element& e, std::string_view key, bool def, const std::string& path, const Context& cx) {
  auto f = opt_field(e, key);
  if (!f) return def;
  bool b;
  if (f->get(b) != simdjson::SUCCESS) cx.fail(path + "." + std::string(key), "expected true or false");
  return b;
}

std::optional<int64_t> opt_int(const element& e, std::string_view key, const std::string& path, const Context& cx) {
  auto f = opt_field(e, key);
  if (!f) return std::nullopt;
  int64_t v;
  uint64_t u;
  if (f->get(v) == simdjson::SUCCESS) return v;
  if (f->get(u) == simdjson::SUCCESS && u <= uint64_t(INT64_MAX)) return int64_t(u);
  cx.fail(path + "." + std::string(key), "expected an integer");
}

std::optional<double> opt_double(const element& e, std::string_view key, const std::string& path,
                                 const Context& cx) {
  auto f = opt_field(e, key);
  if (!f) return std::nullopt;
  double d;
  if (f->get(d) != simdjson::SUCCESS) cx.fail(path + "." + std::string(key), "expected a number");
  return d;
}

simdjson::dom::array get_array(const element& e, std::string_view key, const std::string& path, const Context& cx) {
  auto f = opt_field(e, key);
  simdjson::dom::array a;
  if (!f || f->get(a) != simdjson::SUCCESS) cx.fail(path + "." + std::string(key), "expected an array");
  return a;
}

uint32_t next_char(std::string_view s, size_t i, int& len) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  if (*p < 0x80) {
    len = 1;
    return *p;
  }
  uint32_t cp;
  len = decode_utf8(p, reinterpret_cast<const uint8_t*>(s.data()) + s.size(), cp);
  if (len == 0) {
    len = 1;
    return 0xFFFD;
  }
  return cp;
}

namespace {

// Rust's char::is_whitespace: the White_Space property.
bool is_whitespace(uint32_t cp) { return char_class(cp) == kSpace; }
// Rust's char::is_numeric: categories Nd, Nl, No.
bool is_numeric(uint32_t cp) { return char_class(cp) == kNumber; }
// HF's is_punc / is_bert_punc: ASCII punctuation or category P* (of HF's unicode_categories tables).
bool is_punctuation(uint32_t cp) {
  const bert::CharNorm n = bert::normalize_char(cp, bert::Flavor::kHuggingFace, false);
  return n.kind == bert::CharKind::kText && n.n > 0 && (n.punct_mask & 1);
}
int category(uint32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }
// Rust regex's \w: Alphabetic, marks, Nd, Pc, Join_Control (Alphabetic = letters, Nl and Other_Alphabetic,
// whose non-mark members are the circled/squared Latin letters).
bool is_word_char(uint32_t cp) {
  if (cp < 128) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  const CharClass cls = char_class(cp);  // Unicode 16, as Rust's regex tables
  if (cls == kLetter) return true;
  const int c = category(cp);
  if (cls == kNumber && c == UTF8PROC_CATEGORY_CN) return true;  // digits new in Unicode 16 (all Nd)
  if ((c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_ME) || c == UTF8PROC_CATEGORY_ND ||
      c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_PC)
    return true;
  return cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
         (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189);
}

template <class F>
void for_each_char(std::string_view s, F&& f) {
  for (size_t i = 0; i < s.size();) {
    int len;
    const uint32_t cp = next_char(s, i, len);
    f(cp, i, len);
    i += size_t(len);
  }
}

// Either a literal string or a regex: HF's {"String": ...} / {"Regex": ...} patterns.
struct Pattern {
  std::string literal;
  std::unique_ptr<HfRegex> regex;
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& m) const {
    if (regex) {
      regex->find_all(s, m);
      return;
    }
    m.clear();
    if (literal.empty()) return;
    for (size_t at = s.find(literal); at != std::string_view::npos; at = s.find(literal, at + literal.size()))
      m.emplace_back(at, at + literal.size());
  }
};

Pattern read_pattern(const element& e, const std::string& path, const Context& cx) {
  auto f = opt_field(e, "pattern");
  if (!f) cx.fail(path, "missing \"pattern\"");
  Pattern p;
  if (auto s = opt_string(*f, "String", path + ".pattern", cx)) {
    p.literal = *s;
  } else if (auto r = opt_string(*f, "Regex", path + ".pattern", cx)) {
    p.regex = std::make_unique<HfRegex>(*r, cx.origin + ": " + path + ".pattern.Regex");
  } else {
    cx.fail(path + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  return p;
}

// ---------------------------------------------------------------------------------------------------------
// Normalizers

class SequenceNormalizer final : public HfNormalizer {
 public:
  std::vector<std::unique_ptr<HfNormalizer>> steps;
  void normalize(std::string& s) const override {
    for (const auto& n : steps) n->normalize(s);
  }
};

class UnicodeNormalizer final : public HfNormalizer {
 public:
  explicit UnicodeNormalizer(int options) : options_(options) {}
  void normalize(std::string& s) const override {
    if (s.empty()) return;
    bool ascii = true;
    for (const char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (ascii) return;  // every normal form leaves ASCII unchanged
    utf8proc_uint8_t* out = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()), &out,
                                static_cast<utf8proc_option_t>(options_));
    if (n < 0) throw Error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
    s.assign(reinterpret_cast<const char*>(out), size_t(n));
    std::free(out);
  }

 private:
  int options_;
};

// Rust's char::to_lowercase (Unicode 16): the simple mapping, plus İ -> i + U+0307, plus the Unicode 16 pairs
// utf8proc (Unicode 15) lacks.
void append_lower(uint32_t cp, std::string& out) {
  if (cp < 128) {
    out.push_back(char(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  if (cp == 0x130) {
    out += "i\xCC\x87";
    return;
  }
  uint32_t l = static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
  if (l == cp) {
    if (cp >= 0x10D50 && cp <= 0x10D65) l = cp + 0x20;
    else if (cp == 0x1C89) l = 0x1C8A;
    else if (cp == 0xA7CB) l = 0x264;
    else if (cp == 0xA7CC || cp == 0xA7DA) l = cp + 1;
    else if (cp == 0xA7DC) l = 0x19B;
  }
  append_utf8(l, out);
}

class LowercaseNormalizer final : public HfNormalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for_each_char(s, [&](uint32_t cp, size_t, int) { append_lower(cp, out); });
    s.swap(out);
  }
};

// StripAccents: drops every combining mark (Mn, Mc, Me) of HF's tables (older than Unicode 11).
class StripAccentsNormalizer final : public HfNormalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for_each_char(s, [&](uint32_t cp, size_t i, int len) {
      if (cp < 0x300 || !hf_is_combining_mark(cp)) out.append(s, i, size_t(len));
    });
    s.swap(out);
  }
};

// BertNormalizer with clean_text and handle_chinese_chars on, accents stripped exactly when lower-casing: the
// HF flavour of BERT's per-character pipeline (bert_unicode.h), written back as text.
class BertNormalizer final : public HfNormalizer {
 public:
  explicit BertNormalizer(bool lower) : lower_(lower) {}
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size() + 8);
    for_each_char(s, [&](uint32_t cp, size_t, int) {
      const bert::CharNorm n = bert::normalize_char(cp, bert::Flavor::kHuggingFace, lower_);
      switch (n.kind) {
        case bert::CharKind::kDelete: break;
        case bert::CharKind::kSpace: out.push_back(' '); break;
        case bert::CharKind::kCjk:
          out.push_back(' ');
          for (int k = 0; k < n.n; ++k) append_utf8(n.out[k], out);
          out.push_back(' ');
          break;
        default:
          for (int k = 0; k < n.n; ++k) append_utf8(n.out[k], out);
      }
    });
    s.swap(out);
  }

 private:
  bool lower_;
};

class ReplaceNormalizer final : public HfNormalizer {
 public:
  Pattern pattern;
  std::string content;
  void normalize(std::string& s) const override {
    std::vector<std::pair<size_t, size_t>> m;
    pattern.find_all(s, m);
    if (m.empty()) return;
    std::string out;
    size_t prev = 0;
    for (auto [b, e] : m) {
      out.append(s, prev, b - prev);
      out += content;
      prev = e;
    }
    out.append(s, prev, std::string::npos);
    s.swap(out);
  }
};

// Nmt: SentencePiece's NMT clean-up: drops C0 controls other than \t \n \f \r, DEL and two C1 controls; turns
// \t \n \f \r, U+1680, U+200B..U+200F, U+2028/2029, U+2581, U+FEFF and U+FFFD into a space.
class NmtNormalizer final : public HfNormalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for_each_char(s, [&](uint32_t c, size_t i, int len) {
      if ((c >= 0x1 && c <= 0x8) || c == 0xB || (c >= 0xE && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F) return;
      if (c == 0x9 || c == 0xA || c == 0xC || c == 0xD || c == 0x1680 || (c >= 0x200B && c <= 0x200F) || c == 0x2028 ||
          c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD)
        out.push_back(' ');
      else
        out.append(s, i, size_t(len));
    });
    s.swap(out);
  }
};

class PrependNormalizer final : public HfNormalizer {
 public:
  std::string prepend;
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend);
  }
};

class StripNormalizer final : public HfNormalizer {
 public:
  bool left = true, right = true;
  void normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left)
      while (b < e) {
        int len;
        if (!is_whitespace(next_char(s, b, len))) break;
        b += size_t(len);
      }
    if (right)
      while (e > b) {
        size_t k = e - 1;
        while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        int len;
        if (!is_whitespace(next_char(s, k, len))) break;
        e = k;
      }
    s = s.substr(b, e - b);
  }
};

// Precompiled: SentencePiece's normalization rules (e.g. nmt_nfkc) as HF's spm_precompiled runs them. The charsmap
// is a darts-clone double-array trie over UTF-8 byte strings whose values index NUL-terminated replacements. Each
// extended grapheme cluster shorter than 6 bytes is looked up whole; otherwise (or when it has no entry) each of
// its characters is. As in spm_precompiled, a lookup takes the shortest entry that is a prefix of the chunk.
class PrecompiledNormalizer final : public HfNormalizer {
 public:
  PrecompiledNormalizer(const std::string& charsmap, const std::string& path, const Context& cx) {
    if (charsmap.size() < 4) cx.fail(path, "precompiled_charsmap is too short");
    uint32_t trie_size;
    std::memcpy(&trie_size, charsmap.data(), 4);
    if (trie_size % 4 != 0 || trie_size == 0 || 4 + size_t(trie_size) > charsmap.size())
      cx.fail(path, "precompiled_charsmap: bad trie size " + std::to_string(trie_size));
    array_.resize(trie_size / 4);
    std::memcpy(array_.data(), charsmap.data() + 4, trie_size);
    normalized_ = charsmap.substr(4 + trie_size);
  }
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size() + 8);
    size_t g = 0;  // start of the current grapheme
    utf8proc_int32_t state = 0;
    int len0;
    uint32_t prev = s.empty() ? 0 : next_char(s, 0, len0);
    for (size_t i = s.empty() ? 0 : size_t(len0);; ) {
      bool boundary = i >= s.size();
      int len = 0;
      uint32_t cp = 0;
      if (!boundary) {
        cp = next_char(s, i, len);
        boundary = utf8proc_grapheme_break_stateful(utf8proc_int32_t(prev), utf8proc_int32_t(cp), &state);
      }
      if (boundary && i > g) {
        emit_grapheme(std::string_view(s).substr(g, i - g), out);
        g = i;
      }
      if (i >= s.size()) break;
      prev = cp;
      i += size_t(len);
    }
    s.swap(out);
  }

 private:
  void emit_grapheme(std::string_view grapheme, std::string& out) const {
    if (grapheme.size() < 6 && transform(grapheme, out)) return;
    for (size_t k = 0; k < grapheme.size();) {
      int len;
      next_char(grapheme, k, len);
      const std::string_view part = grapheme.substr(k, size_t(len));
      if (!transform(part, out)) out.append(part);
      k += size_t(len);
    }
  }
  // Appends the replacement of the shortest entry that prefixes `chunk`; false when none does.
  bool transform(std::string_view chunk, std::string& out) const {
    auto offset = [](uint32_t u) { return size_t(u >> 10) << ((u & (1u << 9)) >> 6); };
    size_t node = offset(array_[0]);
    for (const char ch : chunk) {
      const auto c = static_cast<uint8_t>(ch);
      if (c == 0) return false;
      node ^= c;
      if (node >= array_.size()) return false;
      const uint32_t unit = array_[node];
      if ((unit & ((1u << 31) | 0xFF)) != c) return false;
      node ^= offset(unit);
      if (node >= array_.size()) return false;
      if ((unit >> 8) & 1) {
        const size_t at = array_[node] & ((1u << 31) - 1);
        if (at > normalized_.size()) return false;
        const size_t end = normalized_.find('\0', at);
        out.append(normalized_, at, (end == std::string::npos ? normalized_.size() : end) - at);
        return true;
      }
    }
    return false;
  }
  std::vector<uint32_t> array_;
  std::string normalized_;
};

std::string base64_decode(std::string_view in, const std::string& path, const Context& cx) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    if (c == '=') break;
    const int v = val(c);
    if (v < 0) cx.fail(path, "precompiled_charsmap is not base64");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Pre-tokenizers

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior read_behavior(const element& e, const std::string& path, const Context& cx, Behavior def) {
  auto b = opt_string(e, "behavior", path, cx);
  if (!b) return def;
  if (*b == "Removed") return Behavior::kRemoved;
  if (*b == "Isolated") return Behavior::kIsolated;
  if (*b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (*b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (*b == "Contiguous") return Behavior::kContiguous;
  cx.fail(path + ".behavior", "unknown split behavior \"" + *b + "\"");
}

struct Span {
  size_t b, e;
  bool is_match;
};

// HF's NormalizedString::split: `spans` tile the piece (pattern matches and the text between them).
void split_piece(const Piece& piece, std::vector<Span>& spans, Behavior behavior, bool invert, Pieces& out) {
  if (invert)
    for (Span& s : spans) s.is_match = !s.is_match;
  thread_local std::vector<Span> acc;  // scratch kept per thread: no allocation per piece
  acc.clear();
  bool prev = false;
  switch (behavior) {
    case Behavior::kIsolated:
      for (Span s : spans) acc.push_back({s.b, s.e, false});
      break;
    case Behavior::kRemoved:
      acc = spans;
      break;
    case Behavior::kContiguous:
      for (Span s : spans) {
        if (s.is_match == prev && !acc.empty()) acc.back().e = s.e;
        else acc.push_back({s.b, s.e, false});
        prev = s.is_match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (Span s : spans) {
        if (s.is_match && !prev && !acc.empty()) acc.back().e = s.e;
        else acc.push_back({s.b, s.e, false});
        prev = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !prev && !acc.empty()) acc.back().b = it->b;
        else acc.push_back({it->b, it->e, false});
        prev = it->is_match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
  }
  for (const Span& s : acc) {
    if (s.is_match || s.e == s.b) continue;  // removed, or empty (HF drops empty splits)
    out.push_back(Piece{piece.text.substr(s.b, s.e - s.b), piece.at_start && s.b == 0});
  }
}

// Every character for which `pred` holds is a match of its own (HF's Pattern for Fn(char) -> bool).
template <class Pred>
void char_spans(std::string_view s, Pred&& pred, std::vector<Span>& spans) {
  spans.clear();
  size_t last = 0;
  for_each_char(s, [&](uint32_t cp, size_t i, int len) {
    if (!pred(cp)) return;
    if (last < i) spans.push_back({last, i, false});
    spans.push_back({i, i + size_t(len), true});
    last = i + size_t(len);
  });
  if (last < s.size()) spans.push_back({last, s.size(), false});
}

void match_spans(std::string_view s, const std::vector<std::pair<size_t, size_t>>& m, std::vector<Span>& spans) {
  spans.clear();
  size_t prev = 0;
  for (auto [b, e] : m) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.size()) spans.push_back({prev, s.size(), false});
}

template <class Pred>
void split_by_char(Pieces& pieces, Pred&& pred, Behavior behavior) {
  thread_local Pieces out;  // per-thread scratch, swapped with `pieces`
  out.clear();
  out.reserve(pieces.size() * 2);
  thread_local std::vector<Span> spans;
  for (const Piece& p : pieces) {
    char_spans(p.text, pred, spans);
    split_piece(p, spans, behavior, false, out);
  }
  pieces.swap(out);
}

class SequencePreTokenizer final : public HfPreTokenizer {
 public:
  std::vector<std::unique_ptr<HfPreTokenizer>> steps;
  void pre_tokenize(Pieces& pieces) const override {
    for (const auto& s : steps) s->pre_tokenize(pieces);
  }
};

class ByteLevelPreTokenizer final : public HfPreTokenizer {
 public:
  bool add_prefix_space = true, use_regex = true;
  ByteLevelPreTokenizer() {
    for (int b = 0; b < 256; ++b) append_utf8(gpt2_byte_to_unicode(uint8_t(b)), byte_chars_[b]);
  }
  void pre_tokenize(Pieces& pieces) const override {
    thread_local Pieces out;  // per-thread scratch, swapped with `pieces`
    out.clear();
    out.reserve(pieces.size() * 4);
    for (Piece& p : pieces) {
      if (p.text.empty()) continue;
      if (add_prefix_space && p.text[0] != ' ') p.text.insert(0, " ");
      if (!use_regex) {
        out.push_back(Piece{map_bytes(p.text), p.at_start});
        continue;
      }
      const char* base = p.text.data();
      for_each_gpt2_piece(p.text, [&](const uint8_t* d, size_t n) {
        const auto* s = reinterpret_cast<const char*>(d);
        out.push_back(Piece{map_bytes(std::string_view(s, n)), p.at_start && s == base});
      });
    }
    pieces.swap(out);
  }

 private:
  std::string map_bytes(std::string_view s) const {
    std::string r;
    r.reserve(s.size() * 2);
    for (const char c : s) r += byte_chars_[static_cast<unsigned char>(c)];
    return r;
  }
  std::string byte_chars_[256];
};

class BertPreTokenizer final : public HfPreTokenizer {
 public:
  void pre_tokenize(Pieces& pieces) const override {
    split_by_char(pieces, is_whitespace, Behavior::kRemoved);
    split_by_char(pieces, is_punctuation, Behavior::kIsolated);
  }
};

class WhitespaceSplitPreTokenizer final : public HfPreTokenizer {
 public:
  void pre_tokenize(Pieces& pieces) const override { split_by_char(pieces, is_whitespace, Behavior::kRemoved); }
};

// Whitespace: the matches of \w+|[^\w\s]+ (Rust regex, Unicode), everything else removed.
class WhitespacePreTokenizer final : public HfPreTokenizer {
 public:
  void pre_tokenize(Pieces& pieces) const override {
    thread_local Pieces out;  // per-thread scratch, swapped with `pieces`
    out.clear();
    for (const Piece& p : pieces) {
      const std::string& s = p.text;
      size_t i = 0;
      while (i < s.size()) {
        int len;
        uint32_t cp = next_char(s, i, len);
        if (is_whitespace(cp)) {
          i += size_t(len);
          continue;
        }
        const bool word = is_word_char(cp);
        size_t j = i + size_t(len);
        while (j < s.size()) {
          cp = next_char(s, j, len);
          if (word ? !is_word_char(cp) : (is_word_char(cp) || is_whitespace(cp))) break;
          j += size_t(len);
        }
        out.push_back(Piece{s.substr(i, j - i), p.at_start && i == 0});
        i = j;
      }
    }
    pieces.swap(out);
  }
};

class MetaspacePreTokenizer final : public HfPreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  uint32_t replacement = 0x2581;
  std::string rep;
  Prepend prepend = Prepend::kAlways;
  bool split = true;
  void pre_tokenize(Pieces& pieces) const override {
    thread_local Pieces out;  // per-thread scratch, swapped with `pieces`
    out.clear();
    thread_local std::vector<Span> spans;
    for (Piece& p : pieces) {
      std::string t;
      t.reserve(p.text.size() + 8);
      for (const char c : p.text) {
        if (c == ' ') t += rep;
        else t.push_back(c);
      }
      const bool starts = t.compare(0, rep.size(), rep) == 0;
      if (!t.empty() && !starts && (prepend == Prepend::kAlways || (prepend == Prepend::kFirst && p.at_start)))
        t.insert(0, rep);
      Piece q{std::move(t), p.at_start};
      if (!split) {
        if (!q.text.empty()) out.push_back(std::move(q));
        continue;
      }
      const uint32_t r = replacement;
      char_spans(q.text, [r](uint32_t cp) { return cp == r; }, spans);
      split_piece(q, spans, Behavior::kMergedWithNext, false, out);
    }
    pieces.swap(out);
  }
};

class SplitPreTokenizer final : public HfPreTokenizer {
 public:
  Pattern pattern;
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  void pre_tokenize(Pieces& pieces) const override {
    thread_local Pieces out;  // per-thread scratch, swapped with `pieces`
    out.clear();
    thread_local std::vector<std::pair<size_t, size_t>> m;
    thread_local std::vector<Span> spans;
    for (const Piece& p : pieces) {
      if (p.text.empty()) continue;
      pattern.find_all(p.text, m);
      match_spans(p.text, m, spans);
      split_piece(p, spans, behavior, invert, out);
    }
    pieces.swap(out);
  }
};

// Split with exactly GPT-2's pattern: the hand-written matcher (Unicode 16, as HF's Oniguruma build).
class Gpt2SplitPreTokenizer final : public HfPreTokenizer {
 public:
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  void pre_tokenize(Pieces& pieces) const override {
    thread_local Pieces out;  // per-thread scratch, swapped with `pieces`
    out.clear();
    thread_local std::vector<std::pair<size_t, size_t>> m;
    thread_local std::vector<Span> spans;
    for (const Piece& p : pieces) {
      if (p.text.empty()) continue;
      m.clear();
      const auto* base = reinterpret_cast<const uint8_t*>(p.text.data());
      for_each_gpt2_piece(p.text, [&](const uint8_t* d, size_t n) { m.emplace_back(d - base, d - base + n); });
      match_spans(p.text, m, spans);
      split_piece(p, spans, behavior, invert, out);
    }
    pieces.swap(out);
  }
};

class CharDelimiterPreTokenizer final : public HfPreTokenizer {
 public:
  uint32_t delimiter = ' ';
  void pre_tokenize(Pieces& pieces) const override {
    const uint32_t d = delimiter;
    split_by_char(pieces, [d](uint32_t cp) { return cp == d; }, Behavior::kRemoved);
  }
};

class DigitsPreTokenizer final : public HfPreTokenizer {
 public:
  bool individual = false;
  void pre_tokenize(Pieces& pieces) const override {
    split_by_char(pieces, is_numeric, individual ? Behavior::kIsolated : Behavior::kContiguous);
  }
};

class PunctuationPreTokenizer final : public HfPreTokenizer {
 public:
  Behavior behavior = Behavior::kIsolated;
  void pre_tokenize(Pieces& pieces) const override { split_by_char(pieces, is_punctuation, behavior); }
};

// ---------------------------------------------------------------------------------------------------------
// Decoders

class SequenceDecoder final : public HfDecoder {
 public:
  std::vector<std::unique_ptr<HfDecoder>> steps;
  void decode_chain(std::vector<std::string>& t) const override {
    for (const auto& d : steps) d->decode_chain(t);
  }
};

class ByteLevelDecoder final : public HfDecoder {
 public:
  ByteLevelDecoder() {
    std::fill(std::begin(to_byte_), std::end(to_byte_), int16_t{-1});
    for (int b = 0; b < 256; ++b) to_byte_[gpt2_byte_to_unicode(uint8_t(b))] = int16_t(b);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string tb;
      bool ok = true;
      for_each_char(t, [&](uint32_t cp, size_t, int) {
        if (cp < 324 && to_byte_[cp] >= 0) tb.push_back(char(to_byte_[cp]));
        else ok = false;
      });
      bytes += ok ? tb : t;
    }
    std::string out;
    append_repaired_utf8(bytes, out);
    tokens.assign(1, out);
  }

 private:
  int16_t to_byte_[324];
};

class MetaspaceDecoder final : public HfDecoder {
 public:
  std::string rep;
  bool prepend = true;  // prepend_scheme != never
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, rep.size(), rep) == 0) {
          out.push_back(' ');
          k += rep.size();
        } else {
          out.push_back(t[k++]);
        }
      }
      if (i == 0 && prepend && !out.empty() && out[0] == ' ') out.erase(0, 1);
      tokens[i] = std::move(out);
    }
  }
};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t prev = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) {
    out.append(s, prev, at - prev);
    out += to;
    prev = at + from.size();
  }
  if (prev == 0) return;
  out.append(s, prev, std::string::npos);
  s.swap(out);
}

class WordPieceDecoder final : public HfDecoder {
 public:
  std::string prefix = "##";
  bool cleanup = true;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix.size(), prefix) == 0) t.erase(0, prefix.size());
        else t.insert(0, " ");
      }
      if (cleanup) {
        // HF's cleanup(): tokenization spaces before punctuation and contractions.
        replace_all(t, " .", ".");
        replace_all(t, " ?", "?");
        replace_all(t, " !", "!");
        replace_all(t, " ,", ",");
        replace_all(t, " ' ", "'");
        replace_all(t, " n't", "n't");
        replace_all(t, " 'm", "'m");
        replace_all(t, " do not", " don't");
        replace_all(t, " 's", "'s");
        replace_all(t, " 've", "'ve");
        replace_all(t, " 're", "'re");
      }
    }
  }
};

class BpeDecoder final : public HfDecoder {
 public:
  std::string suffix = "</w>";
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
  }
};

class ByteFallbackDecoder final : public HfDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t count = 0;
    auto flush = [&] {
      if (count == 0) return;
      std::string valid;
      const size_t replaced = repair_count(bytes, valid);
      if (replaced == 0) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < count; ++k) out.push_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      count = 0;
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        auto hex = [](char c) -> int {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          return -1;
        };
        const int hi = hex(t[3]), lo = hex(t[4]);
        if (hi >= 0 && lo >= 0) byte = hi * 16 + lo;
      }
      if (byte >= 0) {
        bytes.push_back(char(byte));
        ++count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }

 private:
  static size_t repair_count(const std::string& bytes, std::string& out) {
    append_repaired_utf8(bytes, out);
    return out == bytes ? 0 : 1;
  }
};

class FuseDecoder final : public HfDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

class StripDecoder final : public HfDecoder {
 public:
  std::string content;
  size_t start = 0, stop = 0;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      for (size_t k = 0; k < start && t.compare(0, content.size(), content) == 0 && !content.empty(); ++k)
        t.erase(0, content.size());
      for (size_t k = 0; k < stop && !content.empty() && t.size() >= content.size() &&
                         t.compare(t.size() - content.size(), content.size(), content) == 0;
           ++k)
        t.erase(t.size() - content.size());
    }
  }
};

class ReplaceDecoder final : public HfDecoder {
 public:
  ReplaceNormalizer impl;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) impl.normalize(t);
  }
};

std::string single_char(const element& e, std::string_view key, const std::string& path, const Context& cx,
                        uint32_t& cp) {
  const std::string s = get_string(e, key, path, cx);
  int len = 0;
  if (s.empty() || (cp = next_char(s, 0, len), size_t(len) != s.size()))
    cx.fail(path + "." + std::string(key), "expected a single character");
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Builders

std::unique_ptr<HfNormalizer> make_normalizer(const element& e, const std::string& path, const Context& cx) {
  const std::string type = get_type(e, path, cx);
  if (type == "Sequence") {
    auto seq = std::make_unique<SequenceNormalizer>();
    size_t i = 0;
    for (element sub : get_array(e, "normalizers", path, cx)) {
      seq->steps.push_back(make_normalizer(sub, path + ".normalizers[" + std::to_string(i) + "]", cx));
      ++i;
    }
    return seq;
  }
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD")
    return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "BertNormalizer") {
    const bool clean = get_bool(e, "clean_text", true, path, cx);
    const bool chinese = get_bool(e, "handle_chinese_chars", true, path, cx);
    const bool lower = get_bool(e, "lowercase", true, path, cx);
    auto strip = opt_field(e, "strip_accents");
    bool strip_accents = lower;
    if (strip && strip->get(strip_accents) != simdjson::SUCCESS)
      cx.fail(path + ".strip_accents", "expected true, false or null");
    if (!clean || !chinese || strip_accents != lower)
      cx.fail(path, "BertNormalizer with clean_text=" + std::string(clean ? "true" : "false") +
                        ", handle_chinese_chars=" + (chinese ? "true" : "false") + ", strip_accents=" +
                        (strip_accents ? "true" : "false") + ", lowercase=" + (lower ? "true" : "false") +
                        " is not supported (supported: clean_text and handle_chinese_chars true, strip_accents "
                        "null or equal to lowercase)");
    return std::make_unique<BertNormalizer>(lower);
  }
  if (type == "Replace") {
    auto r = std::make_unique<ReplaceNormalizer>();
    r->pattern = read_pattern(e, path, cx);
    r->content = get_string(e, "content", path, cx);
    return r;
  }
  if (type == "Nmt") return std::make_unique<NmtNormalizer>();
  if (type == "Prepend") {
    auto p = std::make_unique<PrependNormalizer>();
    p->prepend = get_string(e, "prepend", path, cx);
    return p;
  }
  if (type == "Strip") {
    auto s = std::make_unique<StripNormalizer>();
    s->left = get_bool(e, "strip_left", true, path, cx);
    s->right = get_bool(e, "strip_right", true, path, cx);
    return s;
  }
  if (type == "Precompiled") {
    const std::string b64 = get_string(e, "precompiled_charsmap", path, cx);
    return std::make_unique<PrecompiledNormalizer>(base64_decode(b64, path + ".precompiled_charsmap", cx), path, cx);
  }
  cx.fail(path, "normalizer type \"" + type +
                    "\" is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, "
                    "BertNormalizer, Replace, Prepend, Strip, Precompiled, Nmt, Sequence)");
}

std::unique_ptr<HfPreTokenizer> make_pre_tokenizer(const element& e, const std::string& path, const Context& cx) {
  const std::string type = get_type(e, path, cx);
  if (type == "Sequence") {
    auto seq = std::make_unique<SequencePreTokenizer>();
    size_t i = 0;
    for (element sub : get_array(e, "pretokenizers", path, cx)) {
      seq->steps.push_back(make_pre_tokenizer(sub, path + ".pretokenizers[" + std::to_string(i) + "]", cx));
      ++i;
    }
    return seq;
  }
  if (type == "ByteLevel") {
    auto b = std::make_unique<ByteLevelPreTokenizer>();
    b->add_prefix_space = get_bool(e, "add_prefix_space", true, path, cx);
    b->use_regex = get_bool(e, "use_regex", true, path, cx);
    return b;
  }
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPreTokenizer>();
  if (type == "Metaspace") {
    auto m = std::make_unique<MetaspacePreTokenizer>();
    m->rep = single_char(e, "replacement", path, cx, m->replacement);
    m->split = get_bool(e, "split", true, path, cx);
    if (auto scheme = opt_string(e, "prepend_scheme", path, cx)) {
      if (*scheme == "always") m->prepend = MetaspacePreTokenizer::Prepend::kAlways;
      else if (*scheme == "first") m->prepend = MetaspacePreTokenizer::Prepend::kFirst;
      else if (*scheme == "never") m->prepend = MetaspacePreTokenizer::Prepend::kNever;
      else cx.fail(path + ".prepend_scheme", "unknown prepend_scheme \"" + *scheme + "\"");
    } else {  // files from tokenizers < 0.19: add_prefix_space
      m->prepend = get_bool(e, "add_prefix_space", true, path, cx) ? MetaspacePreTokenizer::Prepend::kAlways
                                                                    : MetaspacePreTokenizer::Prepend::kNever;
    }
    return m;
  }
  if (type == "Split") {
    const Behavior behavior = read_behavior(e, path, cx, Behavior::kIsolated);
    const bool invert = get_bool(e, "invert", false, path, cx);
    Pattern p = read_pattern(e, path, cx);
    static constexpr std::string_view kGpt2 =
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    if (p.regex && opt_field(e, "pattern") && opt_string(*opt_field(e, "pattern"), "Regex", path, cx) == kGpt2) {
      auto g = std::make_unique<Gpt2SplitPreTokenizer>();
      g->behavior = behavior;
      g->invert = invert;
      return g;
    }
    auto s = std::make_unique<SplitPreTokenizer>();
    s->pattern = std::move(p);
    s->behavior = behavior;
    s->invert = invert;
    return s;
  }
  if (type == "CharDelimiterSplit") {
    auto d = std::make_unique<CharDelimiterPreTokenizer>();
    single_char(e, "delimiter", path, cx, d->delimiter);
    return d;
  }
  if (type == "Digits") {
    auto d = std::make_unique<DigitsPreTokenizer>();
    d->individual = get_bool(e, "individual_digits", false, path, cx);
    return d;
  }
  if (type == "Punctuation") {
    auto p = std::make_unique<PunctuationPreTokenizer>();
    p->behavior = read_behavior(e, path, cx, Behavior::kIsolated);
    return p;
  }
  cx.fail(path, "pre-tokenizer type \"" + type +
                    "\" is not supported (supported: ByteLevel, BertPreTokenizer, Whitespace, WhitespaceSplit, "
                    "Metaspace, Split, CharDelimiterSplit, Digits, Punctuation, Sequence)");
}

std::unique_ptr<HfDecoder> make_decoder(const element& e, const std::string& path, const Context& cx) {
  const std::string type = get_type(e, path, cx);
  if (type == "Sequence") {
    auto seq = std::make_unique<SequenceDecoder>();
    size_t i = 0;
    for (element sub : get_array(e, "decoders", path, cx)) {
      seq->steps.push_back(make_decoder(sub, path + ".decoders[" + std::to_string(i) + "]", cx));
      ++i;
    }
    return seq;
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    auto m = std::make_unique<MetaspaceDecoder>();
    uint32_t cp;
    m->rep = single_char(e, "replacement", path, cx, cp);
    if (auto scheme = opt_string(e, "prepend_scheme", path, cx)) m->prepend = *scheme != "never";
    else m->prepend = get_bool(e, "add_prefix_space", true, path, cx);
    return m;
  }
  if (type == "WordPiece") {
    auto w = std::make_unique<WordPieceDecoder>();
    w->prefix = opt_string(e, "prefix", path, cx).value_or("##");
    w->cleanup = get_bool(e, "cleanup", true, path, cx);
    return w;
  }
  if (type == "BPEDecoder") {
    auto b = std::make_unique<BpeDecoder>();
    b->suffix = opt_string(e, "suffix", path, cx).value_or("</w>");
    return b;
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto s = std::make_unique<StripDecoder>();
    s->content = get_string(e, "content", path, cx);
    s->start = size_t(opt_int(e, "start", path, cx).value_or(0));
    s->stop = size_t(opt_int(e, "stop", path, cx).value_or(0));
    return s;
  }
  if (type == "Replace") {
    auto r = std::make_unique<ReplaceDecoder>();
    r->impl.pattern = read_pattern(e, path, cx);
    r->impl.content = get_string(e, "content", path, cx);
    return r;
  }
  cx.fail(path, "decoder type \"" + type +
                    "\" is not supported (supported: ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback, "
                    "Fuse, Strip, Replace, Sequence)");
}

}  // namespace lmforge::text::hf
