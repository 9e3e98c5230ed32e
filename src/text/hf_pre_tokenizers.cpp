// defines: make_pre_tokenizer() and the tokenizer.json pre-tokenizers (ByteLevel, BertPreTokenizer, Whitespace,
// WhitespaceSplit, Metaspace, Split, CharDelimiterSplit, Digits, Punctuation, Sequence), each as Hugging Face
// tokenizers runs it
#include <utf8proc.h>

#include <algorithm>

#include "text/bert_unicode.h"
#include "text/gpt2_bpe.h"
#include "text/gpt2_pretokenizer.h"
#include "text/hf_component_util.h"
#include "text/hf_components.h"
#include "text/unicode_classes.h"

namespace lmforge::text::hf {

using simdjson::dom::element;

namespace {

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
      // insert(pos, count, char): GCC 12 (-O3) gives a false -Wrestrict on insert(0, " ") in this file
      if (add_prefix_space && p.text[0] != ' ') p.text.insert(size_t{0}, 1, ' ');
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

}  // namespace

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

}  // namespace lmforge::text::hf
