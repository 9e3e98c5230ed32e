// defines: SentenceSplitter (--split-sentences): ICU's sentence BreakIterator framed as Megatron's punkt splitter
//
// Megatron's preprocess_data.py splits with NLTK punkt (tokenizers/punkt/<--lang>.pickle), a model that cannot be
// downloaded here. We take the sentence boundaries from ICU's rule-based sentence BreakIterator (UAX #29, the CLDR
// locale's abbreviation suppressions "@ss=standard", e.g. "Mr." "e.g." for English) and frame them as punkt does:
// - Line breaks are not sentence ends: punkt splits only after . ? ! (and ICU would end a sentence at every
//   CR/LF/NEL/LS/PS), so ICU reads a copy of the text with those characters as spaces of the same byte length.
//   In that copy dashes (- – —) are '#' too: punkt ends a sentence before "-- Author" after a period, UAX #29
//   (SB8a) would continue it, and no other rule tells the two apart.
// - Without keep_newlines (punkt's default PunktLanguageVars, splitter.tokenize(text)): the whitespace between
//   sentences is dropped; the first sentence keeps the text's leading whitespace; the last loses its trailing.
// - With keep_newlines (Megatron's CustomLanguageVars, whose period context ends in \s*): all whitespace after a
//   sentence end stays at the end of that sentence (newlines included), except after closing ASCII quotes or
//   brackets (punkt's realign_boundaries drops it there), and the text's trailing whitespace, which punkt strips
//   from the last sentence in both modes.
// - As Megatron, text is split in chunks of 1,000,000 code points (a sentence spanning a chunk edge is cut there);
//   empty sentences (e.g. a text of only whitespace) are not returned.
// Differences to punkt (documented limits; punkt decides with statistics learned per language):
// - ICU ends a sentence after ? and ! always, and after "." unless followed by a lower-case word, a digit,
//   a continuation mark (, : ;), or preceded by a listed abbreviation; punkt also uses learned abbreviations
//   (initials, "i.e"), collocations and orthographic evidence, so texts with unlisted abbreviations or "U.S. Army" split
//   differently. ICU also ends sentences at CJK/other-script terminators (。, ।) punkt's models do not know.
// Whitespace is Unicode White_Space plus U+001C..U+001F (Python's str.isspace()). Offsets are byte offsets into the
// UTF-8 input: every sentence is an exact substring. Invalid UTF-8 is read by ICU as U+FFFD, offsets still bytes.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lmforge::text {

struct SentenceSplitOptions {
  std::string lang = "english";  // Megatron's --lang: a punkt language name, or an ICU locale id ("en", "de_CH")
  bool keep_newlines = false;    // Megatron's --keep-newlines
};

// The ICU locale for a punkt language name ("english" -> "en"); other values are taken as ICU locale ids when ICU
// knows their language. Unknown: Error listing the punkt names.
std::string icu_locale_for_lang(const std::string& lang);

// Not thread-safe (an ICU BreakIterator keeps position state): one per worker thread; copying clones.
class SentenceSplitter {
 public:
  explicit SentenceSplitter(const SentenceSplitOptions& options = {});
  SentenceSplitter(const SentenceSplitter& other);
  SentenceSplitter& operator=(const SentenceSplitter&) = delete;
  ~SentenceSplitter();

  // Appends the non-empty sentences of `text`, in order, as views into `text`.
  void split(std::string_view text, std::vector<std::string_view>& sentences);
  std::vector<std::string_view> split(std::string_view text) {
    std::vector<std::string_view> out;
    split(text, out);
    return out;
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lmforge::text
