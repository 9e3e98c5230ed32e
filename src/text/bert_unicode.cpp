// defines: normalize_char() for BERT's basic tokenizer on top of utf8proc (Unicode 15) plus exception tables
#include "text/bert_unicode.h"

#include <utf8proc.h>

#include <algorithm>

namespace lmforge::text::bert {

bool in_ranges(const CodeRange* ranges, size_t n, uint32_t cp) {
  const CodeRange* end = ranges + n;
  const CodeRange* it = std::upper_bound(ranges, end, cp, [](uint32_t c, const CodeRange& r) { return c < r.lo; });
  return it != ranges && cp <= (it - 1)->hi;
}

namespace {

// General category as the flavour's reference sees it: utf8proc's Unicode 15, except characters the reference's
// older tables do not have yet (Python 3.11 = Unicode 14; HF's unicode_categories crate = Unicode 8.0).
utf8proc_category_t category(uint32_t cp, Flavor flavor) {
  // NVIDIA's tokenizer deletes Cn, so every character Python 3.11 does not know yet counts (Lo ones included).
  if (flavor == Flavor::kNvidia && cp >= 0x80 &&
      in_ranges(kPyUnassignedAssignedInUtf8proc, kPyUnassignedAssignedInUtf8proc_size, cp))
    return UTF8PROC_CATEGORY_CN;
  const auto cat = static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(cp)));
  if (cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_LO || cat == UTF8PROC_CATEGORY_LL ||
      cat == UTF8PROC_CATEGORY_LU)
    return cat;  // fast exit: none of these matters to the basic tokenizer, whatever the reference's version
  if (flavor == Flavor::kHuggingFace) {
    // Characters whose category changed after Unicode 8.0 (found by running HF over every code point).
    switch (cp) {
      case 0x166D:   // CANADIAN SYLLABICS CHI SIGN: Po until Unicode 12 (now So)
      case 0x111C9:  // SHARADA SANDHI MARK: Po until Unicode 11 (now Mn)
        return UTF8PROC_CATEGORY_PO;
      case 0x1734:  // HANUNOO SIGN PAMUDPOD: Mn until Unicode 14 (now Mc)
        return UTF8PROC_CATEGORY_MN;
      case 0x1885:  // MONGOLIAN LETTER ALI GALI BALUDA, ...THREE BALUDA: Lo until Unicode 9 (now Mn)
      case 0x1886:
        return UTF8PROC_CATEGORY_LO;
      case 0xA9BD:  // JAVANESE CONSONANT SIGN KERET: Mc until Unicode 12 (now Mn)
        return UTF8PROC_CATEGORY_MC;
    }
  }
  const bool unassigned = flavor != Flavor::kHuggingFace ? in_ranges(kGoogleUnassigned, kGoogleUnassigned_size, cp)
                                                    : in_ranges(kHfUnassigned, kHfUnassigned_size, cp);
  return unassigned ? UTF8PROC_CATEGORY_CN : cat;
}

bool is_punctuation(uint32_t cp, Flavor flavor) {
  // Google's _is_punctuation and HF's is_bert_punc: all ASCII non-alphanumeric printables, then category P*.
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  if (cp < 128) return false;
  const utf8proc_category_t cat = category(cp, flavor);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool is_cjk(uint32_t cp, Flavor flavor) {
  // Google's _is_chinese_char; HF copied it but starts Extension E at its Unicode block start 2B820 -> 2B920
  // (Extension D ends at 2B81F; 2B820..2B91F are Extension E characters that HF does not pad).
  const uint32_t ext_e_lo = flavor != Flavor::kHuggingFace ? 0x2B820 : 0x2B920;
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= ext_e_lo && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Full lower-case mapping (Python's str.lower() without the final-sigma context, Rust's char::to_lowercase):
// the simple mapping plus SpecialCasing's only unconditional lower-case entry, İ -> i + U+0307.
int lower_full(uint32_t cp, Flavor flavor, uint32_t* out) {
  if (cp == 0x130) {
    out[0] = 0x69;
    out[1] = 0x307;
    return 2;
  }
  uint32_t l = static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
  if (flavor == Flavor::kHuggingFace && l == cp) {
    // Rust's std has Unicode 16 case pairs that utf8proc 2.8 (Unicode 15) lacks. Python 3.11 has none of them.
    if (cp >= 0x10D50 && cp <= 0x10D65) l = cp + 0x20;  // Garay capitals
    else if (cp == 0x1C89) l = 0x1C8A;                  // Cyrillic TJE
    else if (cp == 0xA7CB) l = 0x264;                   // ramshorn
    else if (cp == 0xA7CC || cp == 0xA7DA) l = cp + 1;  // S with diagonal stroke, lambda
    else if (cp == 0xA7DC) l = 0x19B;                   // lambda with stroke
  }
  out[0] = l;
  return 1;
}

// Canonical decomposition of one code point (recursive, Hangul included) with nonspacing marks (Mn) dropped.
// Hugging Face's NFD (the unicode-normalization-alignments crate) has tables older than Unicode 13, so the one
// character with a canonical decomposition that Unicode 13-15 added, U+11938 DIVES AKURU VOWEL SIGN O (= U+11935
// U+11930), stays whole there (npm tokenizers' BertNormalizer keeps it; U+1134B of Unicode 7 it decomposes).
int nfd_strip_marks(uint32_t cp, Flavor flavor, uint32_t* out, int room) {
  if (flavor == Flavor::kHuggingFace && cp == 0x11938 && room > 0) {
    out[0] = cp;
    return 1;
  }
  utf8proc_int32_t buf[16];
  int last_boundclass = 0;
  const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 16,
                                                     UTF8PROC_DECOMPOSE, &last_boundclass);
  int k = 0;
  for (utf8proc_ssize_t i = 0; i < n && k < room; ++i) {
    const uint32_t c = static_cast<uint32_t>(buf[i]);
    if (category(c, flavor) != UTF8PROC_CATEGORY_MN) out[k++] = c;
  }
  return k;
}

}  // namespace

CharNorm normalize_char(uint32_t cp, Flavor flavor, bool lower_case, bool strip_accents, bool clean_text) {
  CharNorm r;
  if (clean_text) {
    // Clean text. Both delete NUL, U+FFFD and controls (Cc, Cf) but keep \t \n \r as whitespace; HF's is_control
    // also deletes private-use characters (Co), which Google's keeps (and WordPiece then turns into [UNK]).
    if (cp == 0 || cp == 0xFFFD) return r;
    if (cp == '\t' || cp == '\n' || cp == '\r') {
      r.kind = CharKind::kSpace;
      return r;
    }
    const utf8proc_category_t cat = category(cp, flavor);
    if (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF) return r;
    if (flavor == Flavor::kHuggingFace && (cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS)) return r;
    // NVIDIA's _is_control is cat.startswith("C"): private-use and unassigned characters (Python's tables) go too.
    if (flavor == Flavor::kNvidia &&
        (cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CN))
      return r;
    // Whitespace: Zs become spaces in clean text; U+2028/2029 (Zl, Zp) survive it but then split words, through
    // Python's str.split() in Google's code and char::is_whitespace in HF's pre-tokenizer.
    if (cat == UTF8PROC_CATEGORY_ZS || cp == 0x2028 || cp == 0x2029) {
      r.kind = CharKind::kSpace;
      return r;
    }
  }
  r.kind = is_cjk(cp, flavor) ? CharKind::kCjk : CharKind::kText;
  if (flavor != Flavor::kHuggingFace) {
    if (!lower_case) {  // Google's code strips accents exactly when it lower-cases
      r.out[0] = cp;
      r.n = 1;
    } else if (cp == 0x3A3) {
      r.kind = CharKind::kSigma;
      return r;
    } else {
      // token.lower(), then NFD and drop Mn.
      uint32_t low[2];
      const int nl = lower_full(cp, flavor, low);
      for (int i = 0; i < nl; ++i) r.n += nfd_strip_marks(low[i], flavor, r.out + r.n, CharNorm::kMaxOut - r.n);
    }
  } else {
    // HF strips accents first (NFD, drop Mn), then lower-cases each character, never with a final-sigma rule.
    uint32_t dec[CharNorm::kMaxOut];
    int nd = 1;
    dec[0] = cp;
    if (strip_accents) nd = nfd_strip_marks(cp, flavor, dec, CharNorm::kMaxOut);
    for (int i = 0; i < nd && r.n + 2 <= CharNorm::kMaxOut; ++i) {
      if (lower_case) r.n += lower_full(dec[i], flavor, r.out + r.n);
      else r.out[r.n++] = dec[i];
    }
  }
  for (int i = 0; i < r.n; ++i)
    if (is_punctuation(r.out[i], flavor)) r.punct_mask |= static_cast<uint8_t>(1u << i);
  return r;
}

}  // namespace lmforge::text::bert
