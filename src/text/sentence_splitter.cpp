// defines: SentenceSplitter on ICU's sentence BreakIterator over UTF-8 (UText), punkt-style whitespace framing
#include "text/sentence_splitter.h"

#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include <array>
#include <utility>

#include "util/error.h"

namespace lmforge::text {
namespace {

constexpr std::array<std::pair<const char*, const char*>, 19> kPunktLanguages = {{
    {"czech", "cs"},     {"danish", "da"},  {"dutch", "nl"},      {"english", "en"},    {"estonian", "et"},
    {"finnish", "fi"},   {"french", "fr"},  {"german", "de"},     {"greek", "el"},      {"italian", "it"},
    {"malayalam", "ml"}, {"norwegian", "nb"}, {"polish", "pl"},   {"portuguese", "pt"}, {"russian", "ru"},
    {"slovene", "sl"},   {"spanish", "es"}, {"swedish", "sv"},    {"turkish", "tr"},
}};

// Megatron cuts each text into 1,000,000-character pieces before punkt sees it.
constexpr size_t kChunkCodePoints = 1000000;

bool is_space(UChar32 c) { return u_isUWhiteSpace(c) || (c >= 0x1c && c <= 0x1f); }

size_t skip_space_forward(std::string_view s, size_t begin, size_t end) {
  while (begin < end) {
    int32_t i = static_cast<int32_t>(begin);
    UChar32 c;
    U8_NEXT(s.data(), i, static_cast<int32_t>(end), c);
    if (c < 0 || !is_space(c)) break;
    begin = static_cast<size_t>(i);
  }
  return begin;
}

size_t skip_space_backward(std::string_view s, size_t begin, size_t end) {
  while (end > begin) {
    int32_t i = static_cast<int32_t>(end);
    UChar32 c;
    U8_PREV(s.data(), static_cast<int32_t>(begin), i, c);
    if (c < 0 || !is_space(c)) break;
    end = static_cast<size_t>(i);
  }
  return end;
}

}  // namespace

std::string icu_locale_for_lang(const std::string& lang) {
  for (const auto& [name, code] : kPunktLanguages)
    if (lang == name) return code;
  icu::Locale wanted(lang.c_str());
  if (!wanted.isBogus() && wanted.getLanguage()[0] != '\0') {
    int32_t count = 0;
    const icu::Locale* available = icu::Locale::getAvailableLocales(count);
    for (int32_t i = 0; i < count; ++i)
      if (std::string_view(available[i].getLanguage()) == wanted.getLanguage()) return wanted.getName();
  }
  std::string names;
  for (const auto& [name, code] : kPunktLanguages) names += std::string(names.empty() ? "" : ", ") + name;
  throw Error("--lang: unknown language \"" + lang + "\"; use a punkt language name (" + names +
              ") or an ICU locale id such as en or de_CH");
}

struct SentenceSplitter::Impl {
  std::unique_ptr<icu::BreakIterator> iterator;
  bool keep_newlines = false;
  std::string scratch;  // the chunk with line and paragraph separators turned into spaces
};

SentenceSplitter::SentenceSplitter(const SentenceSplitOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->keep_newlines = options.keep_newlines;
  std::string locale = icu_locale_for_lang(options.lang);
  // "ss=standard": CLDR's sentence-break suppressions (abbreviations such as "Mr." that do not end a sentence).
  locale += locale.find('@') == std::string::npos ? "@ss=standard" : ";ss=standard";
  UErrorCode status = U_ZERO_ERROR;
  impl_->iterator.reset(icu::BreakIterator::createSentenceInstance(icu::Locale(locale.c_str()), status));
  if (U_FAILURE(status) || !impl_->iterator)
    throw Error("--lang " + options.lang + ": ICU cannot make a sentence splitter for locale " + locale + ": " +
                u_errorName(status));
}

SentenceSplitter::SentenceSplitter(const SentenceSplitter& other) : impl_(std::make_unique<Impl>()) {
  impl_->keep_newlines = other.impl_->keep_newlines;
  impl_->iterator.reset(other.impl_->iterator->clone());
}

SentenceSplitter::~SentenceSplitter() = default;

void SentenceSplitter::split(std::string_view text, std::vector<std::string_view>& sentences) {
  size_t chunk_begin = 0;
  while (chunk_begin < text.size()) {
    // The chunk: up to kChunkCodePoints code points (UTF-8 lead bytes) from chunk_begin.
    size_t chunk_end = chunk_begin, points = 0;
    while (chunk_end < text.size()) {
      if ((static_cast<unsigned char>(text[chunk_end]) & 0xC0) != 0x80) {
        if (points == kChunkCodePoints) break;
        ++points;
      }
      ++chunk_end;
    }
    std::string_view chunk = text.substr(chunk_begin, chunk_end - chunk_begin);
    std::string& s = impl_->scratch;
    s.assign(chunk);
    for (size_t i = 0; i < s.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == '\n' || c == '\r') {
        s[i] = ' ';
      } else if (c == '-') {
        // A dash after a sentence end starts a new sentence for punkt ("forest.\n\t-- Mark Twain"), while UAX #29
        // (SB8a) lets dashes continue it. '#' is in no rule's class that '-' is not, except SB8a's SContinue.
        s[i] = '#';
      } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                 (static_cast<unsigned char>(s[i + 2]) == 0x93 || static_cast<unsigned char>(s[i + 2]) == 0x94)) {
        s[i] = s[i + 1] = s[i + 2] = '#';  // EN DASH, EM DASH: as '-'
        i += 2;
      } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) {  // NEL
        s[i] = s[i + 1] = ' ';
        i += 1;
      } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                 (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
        s[i] = s[i + 1] = s[i + 2] = ' ';  // LS, PS
        i += 2;
      }
    }
    UErrorCode status = U_ZERO_ERROR;
    UText* ut = utext_openUTF8(nullptr, s.data(), static_cast<int64_t>(s.size()), &status);
    impl_->iterator->setText(ut, status);
    if (U_FAILURE(status)) {
      utext_close(ut);
      throw Error(std::string("sentence splitting failed: ") + u_errorName(status));
    }
    // Native indexes of a UTF-8 UText are byte offsets into the chunk.
    std::vector<size_t> bounds;
    for (int32_t b = impl_->iterator->first(); b != icu::BreakIterator::DONE; b = impl_->iterator->next())
      bounds.push_back(static_cast<size_t>(b));
    utext_close(ut);
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      size_t begin = bounds[k], end = bounds[k + 1];
      bool last = k + 2 == bounds.size();
      if (k > 0) begin = skip_space_forward(chunk, begin, end);
      if (!impl_->keep_newlines || last) {
        end = skip_space_backward(chunk, begin, end);
      } else {
        // punkt's realign_boundaries: a sentence ending in closing ASCII quotes/brackets after its terminator
        // ("Hello?" his ...) loses the whitespace after them even with Megatron's CustomLanguageVars.
        const size_t content = skip_space_backward(chunk, begin, end);
        if (content > begin && std::string_view("\"')]}").find(chunk[content - 1]) != std::string_view::npos)
          end = content;
      }
      if (end > begin) sentences.push_back(chunk.substr(begin, end - begin));
    }
    chunk_begin = chunk_end;
  }
}

}  // namespace lmforge::text
