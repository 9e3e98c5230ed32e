// defines: tests of the BERT WordPiece tokenizer: Megatron's .bin/.idx bytes, HF's ids, the documented differences
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "text/bert_wordpiece.h"
#include "util/error.h"

namespace lmforge::text {
namespace {

const std::string kShared = LMFORGE_SHARED_DIR;
const std::string kVocab = kShared + "/data/vocab/bert-base-uncased-vocab.txt";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing test data: " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

// `key` of every JSON line, in order.
std::vector<std::string> texts_of(const std::string& path, const char* key) {
  simdjson::dom::parser parser;
  std::vector<std::string> out;
  for (const std::string& line : lines_of(path)) out.emplace_back(std::string_view(parser.parse(line)[key]));
  return out;
}

std::map<std::string, std::string> edge_texts() {
  simdjson::dom::parser parser;
  std::map<std::string, std::string> out;
  for (const std::string& line : lines_of(kShared + "/data/edge/edge_cases.jsonl")) {
    simdjson::dom::element e = parser.parse(line);
    out[std::string(std::string_view(e["id"]))] = std::string(std::string_view(e["text"]));
  }
  return out;
}

std::vector<int32_t> int_array(simdjson::dom::element e) {
  std::vector<int32_t> v;
  for (int64_t x : e.get_array()) v.push_back(static_cast<int32_t>(x));
  return v;
}

std::vector<int32_t> encode(const Tokenizer& t, std::string_view text) {
  std::vector<int32_t> ids;
  t.make_encoder()->encode(text, ids);
  return ids;
}

// Token strings -> ids through the vocabulary file itself (line number = id).
std::vector<int32_t> ids_of(const std::vector<std::string>& tokens) {
  static const std::unordered_map<std::string, int32_t> vocab = [] {
    std::unordered_map<std::string, int32_t> m;
    int32_t id = 0;
    for (const std::string& l : lines_of(kVocab)) m[l] = id++;
    return m;
  }();
  std::vector<int32_t> ids;
  for (const std::string& t : tokens) ids.push_back(vocab.at(t));
  return ids;
}

TEST(BertWordPiece, MegatronLowerCaseIsByteIdenticalToMegatronDataset) {
  // Parse Megatron's .idx (megatron-data-format.md §2) and compare every document's tokens.
  const std::string idx = read_file(kShared + "/data/sample/sample_bert_text_document.idx");
  const std::string bin = read_file(kShared + "/data/sample/sample_bert_text_document.bin");
  ASSERT_GE(idx.size(), 34u);
  ASSERT_EQ(idx.compare(0, 9, std::string("MMIDIDX\0\0", 9)), 0);
  ASSERT_EQ(idx[17], 8) << "uint16 tokens expected";
  uint64_t S, D;
  std::memcpy(&S, idx.data() + 18, 8);
  std::memcpy(&D, idx.data() + 26, 8);
  ASSERT_EQ(idx.size(), 34 + 12 * S + 8 * D);
  std::vector<int32_t> lens(S);
  std::vector<int64_t> ptrs(S), doc_idx(D);
  std::memcpy(lens.data(), idx.data() + 34, 4 * S);
  std::memcpy(ptrs.data(), idx.data() + 34 + 4 * S, 8 * S);
  std::memcpy(doc_idx.data(), idx.data() + 34 + 12 * S, 8 * D);

  const std::vector<std::string> docs = texts_of(kShared + "/data/sample/sample.jsonl", "text");
  ASSERT_EQ(docs.size() + 1, D);
  auto tok = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kMegatron);
  EXPECT_EQ(tok->vocab_size(), 30524u);  // < 65500: uint16, as the .idx says
  auto enc = tok->make_encoder();
  size_t mismatches = 0, bytes = 0;
  std::vector<int32_t> ids;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t j = 0; j < docs.size(); ++j) {
    ids.clear();
    enc->encode(docs[j], ids);
    bytes += docs[j].size();
    std::vector<int32_t> expected;
    for (int64_t s = doc_idx[j]; s < doc_idx[j + 1]; ++s)
      for (int32_t k = 0; k < lens[s]; ++k) {
        uint16_t v;
        std::memcpy(&v, bin.data() + ptrs[s] + 2 * k, 2);
        expected.push_back(v);
      }
    if (ids != expected && ++mismatches <= 5) ADD_FAILURE() << "document " << j << " differs";
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(mismatches, 0u);
  std::printf("[ info ] Megatron flavour: %zu documents, %.2f MB in %.3f s (%.1f MB/s, one thread, incl. checks)\n",
              docs.size(), bytes / 1e6, secs, bytes / 1e6 / secs);
}

TEST(BertWordPiece, HuggingFaceFlavourMatchesHfIdsOnSample) {
  const std::vector<std::string> docs = texts_of(kShared + "/data/sample/sample.jsonl", "text");
  const std::vector<std::string> refs = lines_of(kShared + "/data/sample/sample.hf-bert.ids.jsonl");
  ASSERT_EQ(docs.size(), refs.size());
  auto tok = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kHuggingFace);
  EXPECT_EQ(tok->vocab_size(), 30522u);
  auto enc = tok->make_encoder();
  simdjson::dom::parser parser;
  size_t mismatches = 0;
  std::vector<int32_t> ids;
  for (size_t j = 0; j < docs.size(); ++j) {
    ids.clear();
    enc->encode(docs[j], ids);
    if (ids != int_array(parser.parse(refs[j])["ids"]) && ++mismatches <= 5)
      ADD_FAILURE() << "document " << j << " differs";
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(BertWordPiece, HuggingFaceFlavourMatchesHfIdsOnEdgeCases) {
  const auto texts = edge_texts();
  auto tok = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kHuggingFace);
  simdjson::dom::parser parser;
  size_t n = 0;
  for (const std::string& line : lines_of(kShared + "/data/edge/edge_cases.ref.jsonl")) {
    simdjson::dom::element e = parser.parse(line);
    const std::string id{std::string_view(e["id"])};
    EXPECT_EQ(encode(*tok, texts.at(id)), int_array(e["bert"])) << id << ": " << texts.at(id);
    ++n;
  }
  EXPECT_GT(n, 180u);
}

// Megatron's (Google's) code differs from HF on exactly the edge cases that exercise the documented differences;
// everywhere else our Megatron flavour must give HF's ids.
TEST(BertWordPiece, MegatronFlavourDiffersFromHfOnlyOnDocumentedEdgeCases) {
  const auto texts = edge_texts();
  auto tok = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kMegatron);
  const std::map<std::string, const char*> documented = {
      {"e093", "final sigma"},   {"e094", "final sigma"},  {"e189", "final sigma"},
      {"e125", "private use"},   {"e136", "word > 100"},   {"e138", "word > 100"},
      {"e140", "word > 100"},    {"e148", "word > 100"},   {"e188", "word > 100"},
      {"e183", "P* table"},      {"e184", "Mn table"},     {"e185", "CJK Extension E range"}};
  simdjson::dom::parser parser;
  for (const std::string& line : lines_of(kShared + "/data/edge/edge_cases.ref.jsonl")) {
    simdjson::dom::element e = parser.parse(line);
    const std::string id{std::string_view(e["id"])};
    const std::vector<int32_t> ours = encode(*tok, texts.at(id)), hf = int_array(e["bert"]);
    if (documented.count(id)) EXPECT_NE(ours, hf) << id << " (" << documented.at(id) << ") should differ";
    else EXPECT_EQ(ours, hf) << id << ": " << texts.at(id);
  }
}

TEST(BertWordPiece, MegatronFlavourFollowsGooglesAlgorithm) {
  auto tok = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kMegatron);
  const auto texts = edge_texts();
  // Python's str.lower() on the whitespace token: Σ after a cased letter and before no cased letter is ς;
  // '.' is case-ignorable (Word_Break MidNumLet) and skipped, a digit is neither cased nor ignorable.
  EXPECT_EQ(encode(*tok, texts.at("e093")),
            ids_of({"ο", "##δ", "##ος", "σ", "##ι", "##σ", "##υ", "##φ", "##ος"}));
  EXPECT_EQ(encode(*tok, texts.at("e189")), ids_of({"λ", "##ο", "##γ", "##ος", ".", "α", "##ς", "##1", "σ"}));
  EXPECT_EQ(encode(*tok, "ΒΣΓ ΑΣ. Σ. ΑΣ'Β ΑΣ\xC2\xA0Β ΑΣ\xE4\xB8\x80"),
            ids_of({"β", "##σ", "##γ", "α", "##ς", ".", "σ", ".", "α", "##σ", "'", "β", "α", "##ς", "β", "α", "##ς",
                    "一"}));
  // Private-use characters survive clean text; each word of them has no pieces.
  EXPECT_EQ(encode(*tok, texts.at("e125")), ids_of({"[UNK]", "[UNK]", "[UNK]"}));
  // Words of 101..200 characters are still cut into pieces: 101 a's -> aaa + 49 x ##aa.
  std::vector<std::string> a101 = {"aaa"};
  a101.insert(a101.end(), 49, "##aa");
  EXPECT_EQ(encode(*tok, std::string(101, 'a')), ids_of(a101));
  EXPECT_EQ(encode(*tok, std::string(200, 'a')).size(), 100u);  // aa + 99 x ##aa
  EXPECT_EQ(encode(*tok, std::string(201, 'a')), ids_of({"[UNK]"}));
  for (const char* id : {"e138", "e140", "e148", "e188"}) {
    const std::vector<int32_t> ids = encode(*tok, texts.at(id));
    EXPECT_GT(ids.size(), 1u) << id;
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 100), 0) << id;
  }
  EXPECT_EQ(tok->decode(encode(*tok, texts.at("e188"))), texts.at("e188"));
  // Python 3.11 = Unicode 14: U+2E43, U+1E95E, U+2E5D are Po (split off), U+1DFB and U+1AC1 Mn (stripped).
  EXPECT_EQ(encode(*tok, texts.at("e183")),
            ids_of({"a", "[UNK]", "b", "a", "[UNK]", "b", "a", "[UNK]", "b", "a", "[UNK]", "b"}));
  EXPECT_EQ(encode(*tok, texts.at("e184")), ids_of({"ab", "ab", "ab"}));
  // Google pads U+2B820..2B91F too; U+2CEB0 (Extension F) is outside every range.
  EXPECT_EQ(encode(*tok, texts.at("e185")),
            ids_of({"x", "[UNK]", "y", "x", "[UNK]", "y", "x", "[UNK]", "y", "x", "[UNK]", "y", "[UNK]"}));
  // Unicode 15 additions are unassigned to Python 3.11: U+11F43 (Kawi danda, Po in 15) does not split.
  EXPECT_EQ(encode(*tok, "a\U00011F43b"), ids_of({"[UNK]"}));
}

// Every code point, in a probe text that puts it inside a word, before a final Σ, between a cased letter and Σ and
// between Σ and a cased letter, for all four flavour/case combinations. The reference digests (one per block of
// 4096 code points) come from scripts/bert_google_reference.py (Google's code under Python 3.11) and
// scripts/bert_hf_codepoint_digests.js (HF tokenizers 0.23); the file says how to regenerate them.
TEST(BertWordPiece, EveryCodePointMatchesTheReferences) {
  std::map<std::string, std::map<uint32_t, std::string>> expected;
  for (const std::string& line : lines_of(std::string(LMFORGE_SOURCE_DIR) + "/tests/text/bert_codepoint_digests.txt")) {
    if (line[0] == '#') continue;
    std::istringstream in(line);
    std::string name, block, digest;
    in >> name >> block >> digest;
    expected[name][static_cast<uint32_t>(std::stoul(block, nullptr, 16))] = digest;
  }
  ASSERT_EQ(expected.size(), 4u);
  const auto put = [](char* s, size_t& n, uint32_t cp) {
    if (cp < 0x80) {
      s[n++] = static_cast<char>(cp);
    } else if (cp < 0x800) {
      s[n++] = static_cast<char>(0xC0 | (cp >> 6));
      s[n++] = static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s[n++] = static_cast<char>(0xE0 | (cp >> 12));
      s[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s[n++] = static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s[n++] = static_cast<char>(0xF0 | (cp >> 18));
      s[n++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s[n++] = static_cast<char>(0x80 | (cp & 0x3F));
    }
  };
  // "a" c "b " c "Σ A" c "Σ AΣ" c "B"
  const std::vector<uint32_t> probe_cps = {'a', 0, 'b', ' ', 0, 0x3A3, ' ', 'A', 0, 0x3A3, ' ', 'A', 0x3A3, 0, 'B'};
  for (const auto& [name, blocks] : expected) {
    const WordPieceFlavor flavor = name.rfind("hf", 0) == 0 ? WordPieceFlavor::kHuggingFace : WordPieceFlavor::kMegatron;
    auto tok = make_bert_wordpiece_tokenizer(kVocab, name.find("uncased") != std::string::npos, flavor);
    auto enc = tok->make_encoder();
    ASSERT_EQ(blocks.size(), 0x110u) << name;
    std::vector<int32_t> ids;
    size_t bad = 0;
    for (const auto& [block, digest] : blocks) {
      uint32_t h = 2166136261u;
      const auto step = [&](uint32_t v) { h = (h ^ v) * 16777619u; };
      for (uint32_t cp = block << 12; cp < (block + 1) << 12; ++cp) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        char probe[64];
        size_t n = 0;
        for (uint32_t c : probe_cps) put(probe, n, c ? c : cp);
        ids.clear();
        enc->encode(std::string_view(probe, n), ids);
        for (int32_t id : ids) step(static_cast<uint32_t>(id));
        step(0xFFFFFFFFu);
      }
      char hex[9];
      std::snprintf(hex, sizeof hex, "%08x", h);
      if (digest != hex && ++bad <= 5)
        ADD_FAILURE() << name << ": code points " << std::hex << (block << 12) << ".." << ((block << 12) + 0xFFF)
                      << " differ from the reference";
    }
    EXPECT_EQ(bad, 0u) << name;
  }
}

TEST(BertWordPiece, CasedKeepsCaseAndAccents) {
  // 12: ΟΔΟΣ, 13: οδοσ (with σ), 14: ##ς, 15: οδο
  const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "Hello", "hello", ",", "!", "café", "cafe", "CAF",
                                          "##É", "İstanbul", "istanbul", "\u039F\u0394\u039F\u03A3",
                                          "\u03BF\u03B4\u03BF\u03C3", "##\u03C2", "\u03BF\u03B4\u03BF", "Straße"};
  WordPieceOptions cased;
  cased.lower_case = false;
  for (WordPieceFlavor flavor : {WordPieceFlavor::kMegatron, WordPieceFlavor::kHuggingFace}) {
    cased.flavor = flavor;
    auto tok = make_bert_wordpiece_tokenizer(vocab, cased);
    EXPECT_EQ(tok->type_name(), "BertWordPieceCase");
    // Hello , CAF ##É café ! İstanbul ΟΔΟΣ Straße [UNK] (no "HELLO" and no piece covers it)
    EXPECT_EQ(encode(*tok, "Hello, CAFÉ café! İstanbul ΟΔΟΣ Straße HELLO"),
              (std::vector<int32_t>{2, 4, 8, 9, 6, 5, 10, 12, 16, 1}));
    EXPECT_EQ(encode(*tok, "cafe\xCC\x81"), (std::vector<int32_t>{1}));  // the combining accent stays: no piece
  }
  WordPieceOptions uncased;
  auto tok = make_bert_wordpiece_tokenizer(vocab, uncased);
  EXPECT_EQ(tok->type_name(), "BertWordPieceLowerCase");
  EXPECT_EQ(tok->vocab_size(), vocab.size() + 2);
  // hello , cafe (CAFÉ lower-cased, accent stripped) cafe ! istanbul (İ -> i + U+0307 -> i) οδο ##ς
  EXPECT_EQ(encode(*tok, "Hello, CAFÉ café! İstanbul ΟΔΟΣ"), (std::vector<int32_t>{3, 4, 7, 7, 5, 11, 15, 14}));
  EXPECT_EQ(encode(*tok, "cafe\xCC\x81"), (std::vector<int32_t>{7}));
  // HF lower-cases Σ to σ everywhere: οδοσ is the piece "οδοσ".
  uncased.flavor = WordPieceFlavor::kHuggingFace;
  auto hf = make_bert_wordpiece_tokenizer(vocab, uncased);
  EXPECT_EQ(hf->vocab_size(), vocab.size());
  EXPECT_EQ(encode(*hf, "Hello, CAFÉ café! İstanbul ΟΔΟΣ"), (std::vector<int32_t>{3, 4, 7, 7, 5, 11, 13}));
  // HF's strip_accents apart from lowercase (BertNormalizer's two options); Megatron ties them.
  uncased.strip_accents = false;
  EXPECT_EQ(encode(*make_bert_wordpiece_tokenizer(vocab, uncased), "Café CAFÉ"), (std::vector<int32_t>{6, 6}));
  cased.flavor = WordPieceFlavor::kHuggingFace;
  cased.strip_accents = true;
  EXPECT_EQ(encode(*make_bert_wordpiece_tokenizer(vocab, cased), "café Hello"), (std::vector<int32_t>{7, 2}));
  uncased.flavor = WordPieceFlavor::kMegatron;
  EXPECT_THROW(make_bert_wordpiece_tokenizer(vocab, uncased), Error);
}

TEST(BertWordPiece, CleanTextAndSplitting) {
  auto meg = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kMegatron);
  auto hf = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kHuggingFace);
  for (const Tokenizer* t : {meg.get(), hf.get()}) {
    // Controls vanish without splitting; NBSP and U+2028 split; U+00AD (Cf) vanishes.
    EXPECT_EQ(encode(*t, "co\xC2\xAD" "operate a\x01" "b\xC2\xA0" "c\xE2\x80\xA8" "d"),
              ids_of({"cooperate", "ab", "c", "d"}));
    EXPECT_EQ(encode(*t, "\xE4\xB8\xAD\xE6\x96\x87" "abc"), ids_of({"中", "文", "abc"}));
    EXPECT_TRUE(encode(*t, " \t\r\n").empty());
  }
  // HF deletes private-use characters: the word around one is joined.
  EXPECT_EQ(encode(*hf, "a\xEE\x80\x80" "b"), ids_of({"ab"}));
  EXPECT_EQ(encode(*meg, "a\xEE\x80\x80" "b"), ids_of({"[UNK]"}));
}

TEST(BertWordPiece, DecodeAndMetadata) {
  auto tok = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kMegatron);
  EXPECT_EQ(tok->type_name(), "BertWordPieceLowerCase");
  EXPECT_FALSE(tok->eod_id().has_value());
  EXPECT_EQ(tok->decode(encode(*tok, "Hello, unaffable world!")), "hello , unaffable world !");
  EXPECT_EQ(tok->decode(ids_of({"un", "##ed", "[UNK]", "##s"})), "uned [UNK]s");
  const std::vector<int32_t> extra = {30522, 30523};
  EXPECT_EQ(tok->decode(extra), "[BOS] [EOS]");
  const std::vector<int32_t> bad = {30524};
  EXPECT_THROW(tok->decode(bad), Error);
}

// Megatron's --vocab-extra-ids for BERT vocabularies (T5): <extra_id_i> after [BOS] and [EOS] (bert-base-uncased:
// 30524 + i, the note's sentinel ids), in the vocabulary size; text containing the string is not encoded to them.
TEST(BertWordPiece, VocabExtraIdsFollowBosAndEos) {
  auto tok = make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kMegatron, 100);
  EXPECT_EQ(tok->vocab_size(), 30624u);
  const std::vector<int32_t> ids = {30522, 30523, 30524, 30623};
  EXPECT_EQ(tok->decode(ids), "[BOS] [EOS] <extra_id_0> <extra_id_99>");
  const std::vector<int32_t> bad = {30624};
  EXPECT_THROW(tok->decode(bad), Error);
  for (int32_t id : encode(*tok, "<extra_id_0>")) EXPECT_LT(id, 30522);
  EXPECT_THROW(make_bert_wordpiece_tokenizer(kVocab, true, WordPieceFlavor::kHuggingFace, 2), Error);
}

TEST(BertWordPiece, ErrorsNameTheFile) {
  try {
    make_bert_wordpiece_tokenizer("/nonexistent/vocab.txt", true, WordPieceFlavor::kMegatron);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/vocab.txt"), std::string::npos);
  }
  EXPECT_THROW(make_bert_wordpiece_tokenizer(std::vector<std::string>{"a", "b"}, WordPieceOptions{}), Error);
  EXPECT_THROW(make_bert_wordpiece_tokenizer(std::vector<std::string>{"[UNK]", "\xFF"}, WordPieceOptions{}), Error);
}

}  // namespace
}  // namespace lmforge::text
