// defines: make_normalizer() and the tokenizer.json normalizers (NFC/NFD/NFKC/NFKD, Lowercase, StripAccents,
// BertNormalizer, Replace, Nmt, Prepend, Strip, Precompiled, Sequence), each as Hugging Face tokenizers runs it
#include <utf8proc.h>

#include <cstdlib>
#include <cstring>

#include "text/bert_unicode.h"
#include "text/hf_component_util.h"
#include "text/hf_components.h"
#include "text/unicode_classes.h"
#include "util/error.h"

namespace lmforge::text::hf {

using simdjson::dom::element;

namespace {

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
// HF's BertNormalizer: clean_text (controls deleted, whitespace made ' '), handle_chinese_chars (' ' around each CJK
// ideograph), strip_accents (NFD, nonspacing marks dropped), lowercase, in that order.
class BertNormalizer final : public HfNormalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool strip, bool lower)
      : clean_(clean), chinese_(chinese), strip_(strip), lower_(lower) {}
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size() + 8);
    for_each_char(s, [&](uint32_t cp, size_t, int) {
      const bert::CharNorm n = bert::normalize_char(cp, bert::Flavor::kHuggingFace, lower_, strip_, clean_);
      switch (n.kind) {
        case bert::CharKind::kDelete: break;
        case bert::CharKind::kSpace: out.push_back(' '); break;
        case bert::CharKind::kCjk:
          if (!chinese_) {
            for (int k = 0; k < n.n; ++k) append_utf8(n.out[k], out);
            break;
          }
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
  bool clean_, chinese_, strip_, lower_;
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

}  // namespace

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
    return std::make_unique<BertNormalizer>(clean, chinese, strip_accents, lower);
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

}  // namespace lmforge::text::hf
