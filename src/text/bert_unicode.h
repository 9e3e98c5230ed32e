// defines: lmforge::text::bert::CharNorm, normalize_char(), final-sigma properties: what BERT's basic tokenizer
// does with one code point, for the Google (Megatron), Hugging Face and NVIDIA (DeepLearningExamples) flavours
#pragma once
#include <cstddef>
#include <cstdint>

namespace lmforge::text::bert {

// kNvidia: DeepLearningExamples' tokenization.py (create_pretraining_data.py's tokenizer), Google's rules except that
// clean text deletes every category C* character (Cc, Cf, Co, Cn, Cs), not only Cc and Cf.
enum class Flavor : uint8_t { kGoogle, kHuggingFace, kNvidia };

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

// Generated tables (bert_unicode_tables.cpp, scripts/gen_bert_unicode_tables.py), sorted, disjoint.
extern const CodeRange kGoogleUnassigned[];
extern const size_t kGoogleUnassigned_size;
extern const CodeRange kHfUnassigned[];
extern const size_t kHfUnassigned_size;
// Unassigned for Python 3.11 but assigned in utf8proc (Unicode 15 additions): NVIDIA's tokenizer deletes them as Cn
// (nvidia_unicode_tables.cpp, scripts/gen_nvidia_unicode_tables.py).
extern const CodeRange kPyUnassignedAssignedInUtf8proc[];
extern const size_t kPyUnassignedAssignedInUtf8proc_size;
extern const CodeRange kPyCased[];
extern const size_t kPyCased_size;
extern const CodeRange kPyCaseIgnorable[];
extern const size_t kPyCaseIgnorable_size;

bool in_ranges(const CodeRange* ranges, size_t n, uint32_t cp);

// What one input code point becomes, before words are cut into WordPiece pieces.
enum class CharKind : uint8_t {
  kDelete,  // removed by clean text (NUL, U+FFFD, controls...) without splitting the word around it
  kSpace,   // whitespace: ends the current word
  kCjk,     // CJK ideograph: a word of its own (the out[] code points)
  kSigma,   // U+03A3 when lower-casing the Google way: ς or σ depending on the neighbouring letters
  kText,    // out[] code points continue the word, except those flagged punctuation, which stand alone
};

struct CharNorm {
  static constexpr int kMaxOut = 8;  // lower-casing gives at most 2, NFD of each at most 4 (all stripped here)
  CharKind kind = CharKind::kDelete;
  uint8_t n = 0;           // number of out[] code points (kText, kCjk); 0 for a stripped combining mark
  uint8_t punct_mask = 0;  // bit i: out[i] is punctuation
  uint32_t out[kMaxOut] = {};
};

// The whole per-character pipeline of the flavour: clean text, CJK test, lower-casing and accent stripping in the
// flavour's order, punctuation test of each resulting code point. cp must be <= U+10FFFF. kGoogle strips accents
// exactly when it lower-cases (strip_accents is ignored), as does kNvidia; kHuggingFace takes the two separately.
// clean_text false (HF's BertNormalizer only): no character is deleted or made a space; whitespace and control
// characters stay as they are (kText), as HF's normalizer without do_clean_text leaves them.
CharNorm normalize_char(uint32_t cp, Flavor flavor, bool lower_case, bool strip_accents, bool clean_text = true);
// Accents stripped exactly when lower-casing (both flavours' default). Also used by hf_normalizers.cpp and
// hf_pre_tokenizers.cpp.
inline CharNorm normalize_char(uint32_t cp, Flavor flavor, bool lower_case) {
  return normalize_char(cp, flavor, lower_case, lower_case);
}

// Python 3.11's str.lower() final-sigma context: Σ is final after a cased character (skipping case-ignorable
// ones) when no cased character follows (skipping case-ignorable ones).
inline bool py_case_ignorable(uint32_t cp) { return in_ranges(kPyCaseIgnorable, kPyCaseIgnorable_size, cp); }
inline bool py_cased(uint32_t cp) { return in_ranges(kPyCased, kPyCased_size, cp); }

}  // namespace lmforge::text::bert
