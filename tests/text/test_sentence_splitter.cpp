// defines: tests of SentenceSplitter (ICU boundaries, punkt-style whitespace framing, --keep-newlines, --lang)
#include <gtest/gtest.h>
#include <simdjson.h>

#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "text/sentence_splitter.h"
#include "util/error.h"

namespace lmforge::text {
namespace {

std::vector<std::string> split(const std::string& text, bool keep_newlines = false,
                               const std::string& lang = "english") {
  SentenceSplitter s({lang, keep_newlines});
  std::vector<std::string> out;
  for (auto v : s.split(text)) {
    // every sentence is a view into the text itself
    EXPECT_GE(v.data(), text.data());
    EXPECT_LE(v.data() + v.size(), text.data() + text.size());
    out.emplace_back(v);
  }
  return out;
}

using V = std::vector<std::string>;

TEST(SentenceSplitter, PunktFramingWithoutKeepNewlines) {
  // Whitespace between sentences dropped, leading whitespace of the text kept, trailing dropped (as punkt).
  EXPECT_EQ(split("Hello there. How are you?  Fine!\n"), (V{"Hello there.", "How are you?", "Fine!"}));
  EXPECT_EQ(split("  Leading space. Second."), (V{"  Leading space.", "Second."}));
  // Line breaks inside a sentence are not boundaries (punkt only splits after . ? !).
  EXPECT_EQ(split("The Bionic Dog drinks too much\n\tand kicks over the forest.\n\nNext one."),
            (V{"The Bionic Dog drinks too much\n\tand kicks over the forest.", "Next one."}));
  // Closing quotes and brackets stay with their sentence (punkt's realign_boundaries; ICU's Close class).
  EXPECT_EQ(split("He said \"Stop.\" Then he left. (It was late.) Done."),
            (V{"He said \"Stop.\"", "Then he left.", "(It was late.)", "Done."}));
  EXPECT_EQ(split(""), V{});
  EXPECT_EQ(split(" \n\t "), V{});
  EXPECT_EQ(split("no terminal punctuation"), V{"no terminal punctuation"});
}

TEST(SentenceSplitter, KeepNewlinesKeepsTheWhitespaceAfterEachSentence) {
  // CustomLanguageVars: \s* after the sentence end belongs to the sentence; the text's trailing whitespace is
  // still stripped from the last one.
  EXPECT_EQ(split("First line.\nSecond line.\n\nThird!  Four?\n", true),
            (V{"First line.\n", "Second line.\n\n", "Third!  ", "Four?"}));
  std::string text = "  A b c. D e f?\n\tG h.";
  std::string joined;
  for (const auto& s : split(text, true)) joined += s;
  EXPECT_EQ(joined, text);
}

TEST(SentenceSplitter, EnglishAbbreviationsAndNumbers) {
  EXPECT_EQ(split("Mr. Smith went to Washington. He arrived at 3.30 p.m. today."),
            (V{"Mr. Smith went to Washington.", "He arrived at 3.30 p.m. today."}));
  EXPECT_EQ(split("It costs $4.50. Cheap."), (V{"It costs $4.50.", "Cheap."}));
  // A period before a lower-case word does not end a sentence (UAX #29 SB8).
  EXPECT_EQ(split("See the fig. below for details."), V{"See the fig. below for details."});
}

TEST(SentenceSplitter, Utf8OffsetsAndOtherScripts) {
  EXPECT_EQ(split("Ça va? Très bien. Über alles!"), (V{"Ça va?", "Très bien.", "Über alles!"}));
  EXPECT_EQ(split("日本語の文です。二番目の文です。"), (V{"日本語の文です。", "二番目の文です。"}));
  // NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR are line breaks, not sentence ends, and are whitespace.
  EXPECT_EQ(split("one\xC2\x85two\xE2\x80\xA8three.\xE2\x80\xA9" "Four."),
            (V{"one\xC2\x85two\xE2\x80\xA8three.", "Four."}));
}

TEST(SentenceSplitter, DocumentedDifferencesToPunkt) {
  // A dash after the period starts a new sentence, as in punkt (UAX #29 SB8a alone would continue it); commas,
  // colons and semicolons continue it (punkt: "," is no sentence-end context either).
  EXPECT_EQ(split("than the lichen family.\n\t\t-- Dave Barry, \"Kids\""),
            (V{"than the lichen family.", "-- Dave Barry, \"Kids\""}));
  EXPECT_EQ(split("Love \xE2\x80\x94 and war. \xE2\x80\x94 Anon"), (V{"Love \xE2\x80\x94 and war.", "\xE2\x80\x94 Anon"}));
  EXPECT_EQ(split("Bring paper, pens, etc., and ink."), V{"Bring paper, pens, etc., and ink."});
  // With --keep-newlines, punkt's realignment drops the whitespace after closing ASCII quotes and brackets.
  EXPECT_EQ(split("A \"Hello?\" his friend asks. (Yes.)\nNo.", true),
            (V{"A \"Hello?\"", "his friend asks. ", "(Yes.)", "No."}));
  // Invalid UTF-8 (callers repair it first) is read as U+FFFD; the offsets stay byte offsets.
  EXPECT_EQ(split("Bad \xFF byte. Next \xC3 one."), (V{"Bad \xFF byte.", "Next \xC3 one."}));
}

// The framing (which whitespace goes where, quotes and brackets, dashes, line breaks, both modes) against NLTK punkt
// itself, run through tests/text/punkt_reference.py on texts whose boundaries need no learned statistics.
TEST(SentenceSplitter, FramingEqualsNltkPunkt) {
  const std::vector<std::string> texts = {
      "Hello there. How are you?  Fine!\n",
      "  Leading space. Second.",
      "The Bionic Dog drinks too much\n\tand kicks over the forest.\n\nNext one.",
      "He said \"Stop.\" Then he left. (It was late.) Done.",
      "A \"Hello?\" his friend asks. (Yes.)\nNo.",
      "First line.\nSecond line.\n\nThird!  Four?\n",
      "It was\nreplaced by disco.\n\t\t-- Dave Barry, \"Kids Today\"",
      "Love \xE2\x80\x94 and war. \xE2\x80\x94 Anon",
      "Bring paper, pens, and ink. Then write!\tThen read?\n\n\n",
      "Why? Because. 'Quoted.' [Bracketed.] {Braced!} End",
      "\n\n  Only one sentence here  \n",
      "Wait... what? Really?! Yes.",
      "Numbers like 3.14 stay. So do words.",
      " ",
      "",
  };
  lmforge::testing::TempDir dir;
  std::string jsonl;
  for (const auto& t : texts) {
    std::string q;
    for (unsigned char c : t) {
      if (c == '"' || c == '\\') q += '\\', q += static_cast<char>(c);
      else if (c == '\n') q += "\\n";
      else if (c == '\t') q += "\\t";
      else q += static_cast<char>(c);
    }
    jsonl += "{\"text\": \"" + q + "\"}\n";
  }
  lmforge::testing::write_file(dir.file("in.jsonl"), jsonl);
  const auto r = lmforge::testing::run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                                               "/tests/text/punkt_reference.py " + dir.file("in.jsonl"));
  ASSERT_EQ(r.status, 0) << r.output << " (python3-nltk is installed by scripts/install-deps.sh)";
  std::istringstream lines(r.output);
  simdjson::dom::parser parser;
  size_t i = 0;
  for (std::string line; std::getline(lines, line); ++i) {
    ASSERT_LT(i, texts.size());
    simdjson::dom::array modes = parser.parse(line).get_array();
    int mode = 0;
    for (simdjson::dom::element sentences : modes) {
      V want;
      for (simdjson::dom::element s : sentences.get_array()) want.emplace_back(std::string_view(s.get_string()));
      EXPECT_EQ(split(texts[i], mode == 1), want) << "text " << i << (mode ? " (keep newlines)" : "");
      ++mode;
    }
  }
  EXPECT_EQ(i, texts.size());
}

TEST(SentenceSplitter, LangNamesAndCopies) {
  EXPECT_EQ(icu_locale_for_lang("english"), "en");
  EXPECT_EQ(icu_locale_for_lang("german"), "de");
  EXPECT_EQ(icu_locale_for_lang("de_CH"), "de_CH");
  EXPECT_THROW(icu_locale_for_lang("klingon"), Error);
  EXPECT_THROW(SentenceSplitter({"klingon", false}), Error);
  EXPECT_EQ(split("Das ist gut. Wirklich.", false, "german"), (V{"Das ist gut.", "Wirklich."}));
  SentenceSplitter a({"english", true});
  SentenceSplitter b(a);  // a clone keeps the options and is independent
  std::string t1 = "One. Two.", t2 = "Three.\nFour.";
  auto r1 = a.split(t1);
  auto r2 = b.split(t2);
  EXPECT_EQ(r1.size(), 2u);
  ASSERT_EQ(r2.size(), 2u);
  EXPECT_EQ(r2[0], "Three.\n");
}

TEST(SentenceSplitter, MillionCodePointChunksAsMegatron) {
  // Megatron gives punkt the text in 1,000,000-character pieces: a sentence across the edge is cut there.
  std::string text(999'998, 'a');
  text += "\xC3\xA9\xC3\xA9\xC3\xA9 end.";  // code points 999,998.. : the cut falls after the second é
  auto out = split(text);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].size(), 999'998u + 4);
  EXPECT_EQ(out[1], "\xC3\xA9 end.");
}

}  // namespace
}  // namespace lmforge::text
