// --tokenizer-type NullTokenizer (Megatron-core's _NullTokenizer): ids equal Python's [int(x) for x in
// text.split(' ')] (run under /usr/bin/python3) wherever that gives ids in the vocabulary, every text Python refuses
// or that holds an id beyond it is an Error naming the piece (and leaves no ids behind), the reported size is
// --vocab-size + 1 with the end-of-document id --vocab-size, decoding is ' '.join(str(i)), and the factory's flags.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>

#include "test_util.h"
#include "text/tokenizer_factory.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::testing::run_command;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;
namespace text = lmforge::text;

text::TokenizerOptions null_options(int64_t vocab_size) {
  text::TokenizerOptions o;
  o.type = "NullTokenizer";
  o.vocab_size = vocab_size;
  return o;
}

// Encodes `t`: the ids, or nullopt when refused (then `ids` must hold only what it held before).
std::optional<std::vector<int32_t>> encode(const text::Tokenizer& tokenizer, const std::string& t) {
  auto encoder = tokenizer.make_encoder();
  std::vector<int32_t> ids = {-7};  // an earlier text's id, which a refusal must keep
  try {
    encoder->encode(t, ids);
  } catch (const Error& e) {
    EXPECT_EQ(ids, std::vector<int32_t>{-7}) << "a refused text left ids behind: " << t;
    EXPECT_NE(std::string(e.what()).find("is not a token id"), std::string::npos) << e.what();
    return std::nullopt;
  }
  return std::vector<int32_t>(ids.begin() + 1, ids.end());
}

TEST(NullTokenizer, IdsArePythonsIntOfEachSpaceSeparatedPiece) {
  const std::vector<std::string> texts = {
      "1 2 3", "0", "1000", "17 4 256 999", "+4 5", "7\n", "\t8 9\r\n", "3\x0b", "001 02",
      // refused by Python's int() (Megatron stops with a traceback)
      "1  2", " 1", "1 ", "a", "1 b 2", "1.5", "0x10", "--3", "+-3", "1,2",
      // accepted by Python, beyond the vocabulary: refused here
      "-1", "1001", "99999999999", "4 -0 5",
  };
  TempDir dir;
  std::string lines;
  for (const std::string& t : texts) {
    std::string hex;
    for (unsigned char c : t) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
    lines += hex + "\n";
  }
  write_file(dir.file("texts.hex"), lines);
  write_file(dir.file("ref.py"),
             "import sys\n"
             "for line in open(sys.argv[1]):\n"
             "    t = bytes.fromhex(line.strip()).decode()\n"
             "    try:\n"
             "        print(' '.join(str(i) for i in [int(x) for x in t.split(' ')]))\n"
             "    except ValueError:\n"
             "        print('refused')\n");
  const auto r = run_command("/usr/bin/python3 " + dir.file("ref.py") + " " + dir.file("texts.hex"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream python(r.output);
  const auto tokenizer = text::make_tokenizer(null_options(1000));
  for (const std::string& t : texts) {
    std::string want;
    ASSERT_TRUE(std::getline(python, want)) << r.output;
    const auto got = encode(*tokenizer, t);
    bool in_vocabulary = want != "refused";
    std::vector<int32_t> want_ids;
    if (in_vocabulary) {
      std::istringstream ids(want);
      for (long long id; ids >> id;) {
        in_vocabulary = in_vocabulary && id >= 0 && id <= 1000;
        want_ids.push_back((int32_t)id);
      }
    }
    if (!in_vocabulary) {
      EXPECT_FALSE(got) << "accepted \"" << t << "\" (Python: " << want << ")";
    } else {
      ASSERT_TRUE(got) << "refused \"" << t << "\" (Python: " << want << ")";
      EXPECT_EQ(*got, want_ids) << t;
    }
  }
  EXPECT_EQ(encode(*tokenizer, ""), std::vector<int32_t>{});  // an empty document (Megatron: int('') fails)
}

TEST(NullTokenizer, VocabularyIsVocabSizePlusTheEndOfDocumentId) {
  const auto tokenizer = text::make_tokenizer(null_options(1000));
  EXPECT_EQ(tokenizer->vocab_size(), 1001u);
  EXPECT_EQ(tokenizer->eod_id(), 1000);
  EXPECT_EQ(tokenizer->type_name(), "NullTokenizer");
  const std::vector<int32_t> ids = {5, 0, 1000, 17};
  EXPECT_EQ(tokenizer->decode(ids), "5 0 1000 17");
  EXPECT_EQ(tokenizer->decode({}), "");
}

TEST(NullTokenizer, FlagsThatDoNotApplyAreRefusedNamingThem) {
  auto error_of = [](const text::TokenizerOptions& o) -> std::string {
    try {
      text::make_tokenizer(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(null_options(0)).find("needs --vocab-size"), std::string::npos);
  text::TokenizerOptions with_file = null_options(10);
  with_file.vocab_file = "vocab.json";
  EXPECT_NE(error_of(with_file).find("--vocab-file does not apply to --tokenizer-type NullTokenizer"),
            std::string::npos);
  text::TokenizerOptions gpt2;  // GPT2BPETokenizer with --vocab-size
  gpt2.vocab_size = 10;
  EXPECT_NE(error_of(gpt2).find("--vocab-size applies to --tokenizer-type NullTokenizer only"), std::string::npos);
  text::TokenizerOptions unknown = null_options(10);
  unknown.type = "Nope";
  EXPECT_NE(error_of(unknown).find("NullTokenizer"), std::string::npos);  // listed among the valid types
}

}  // namespace
