// defines: tests of Gpt2BpeTokenizer against Hugging Face's ids (sample corpus, edge cases), long words, errors
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "text/gpt2_bpe.h"
#include "text/tokenizer_factory.h"
#include "util/error.h"

namespace lmforge::text {
namespace {

const std::string kShared = LMFORGE_SHARED_DIR;
const std::string kVocab = kShared + "/data/vocab/gpt2-vocab.json";
const std::string kMerges = kShared + "/data/vocab/gpt2-merges.txt";

const Gpt2BpeTokenizer& gpt2() {
  static const Gpt2BpeTokenizer tok(kVocab, kMerges);
  return tok;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing test data " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// Reads field `key` of every line: strings for text, integer arrays for ids.
std::vector<std::string> string_field(const std::string& path, const char* key) {
  simdjson::ondemand::parser parser;
  std::vector<std::string> out;
  for (const std::string& line : lines_of(path)) {
    simdjson::padded_string padded(line);
    auto doc = parser.iterate(padded);
    out.emplace_back(std::string_view(doc[key].get_string()));
  }
  return out;
}

std::vector<std::vector<int32_t>> ids_field(const std::string& path, const char* key) {
  simdjson::ondemand::parser parser;
  std::vector<std::vector<int32_t>> out;
  for (const std::string& line : lines_of(path)) {
    simdjson::padded_string padded(line);
    auto doc = parser.iterate(padded);
    std::vector<int32_t> ids;
    for (auto v : doc[key].get_array()) ids.push_back(int32_t(int64_t(v.get_int64())));
    out.push_back(std::move(ids));
  }
  return out;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += std::to_string(ids[i]) + " ";
  return s;
}

TEST(Gpt2Bpe, VocabularyFacts) {
  const auto& tok = gpt2();
  EXPECT_EQ(tok.vocab_size(), 50257u);
  ASSERT_TRUE(tok.eod_id().has_value());
  EXPECT_EQ(*tok.eod_id(), 50256);
  EXPECT_EQ(tok.type_name(), "GPT2BPETokenizer");
  EXPECT_EQ(tok.merge_count(), 50000u);
  EXPECT_EQ(tok.token_bytes(50256), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(220), " ");  // "Ġ" in vocab.json
  EXPECT_EQ(gpt2_byte_to_unicode(' '), 0x120u);
  EXPECT_EQ(gpt2_byte_to_unicode('!'), uint32_t('!'));
}

TEST(Gpt2Bpe, SampleCorpusMatchesHuggingFace) {
  const auto texts = string_field(kShared + "/data/sample/sample.jsonl", "text");
  const auto refs = ids_field(kShared + "/data/sample/sample.gpt2.ids.jsonl", "ids");
  ASSERT_EQ(texts.size(), 9887u);
  ASSERT_EQ(refs.size(), texts.size());
  auto encoder = gpt2().make_encoder();
  size_t mismatches = 0, roundtrip_failures = 0;
  std::vector<int32_t> ids;
  for (size_t d = 0; d < texts.size(); ++d) {
    ids.clear();
    encoder->encode(texts[d], ids);
    if (ids != refs[d] && ++mismatches <= 5)
      ADD_FAILURE() << "document " << d << "\n ours: " << show(ids) << "\n   HF: " << show(refs[d]);
    if (gpt2().decode(ids) != texts[d]) ++roundtrip_failures;
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(roundtrip_failures, 0u);
}

TEST(Gpt2Bpe, EdgeCasesMatchHuggingFace) {
  const auto texts = string_field(kShared + "/data/edge/edge_cases.jsonl", "text");
  const auto descs = string_field(kShared + "/data/edge/edge_cases.jsonl", "desc");
  const auto refs = ids_field(kShared + "/data/edge/edge_cases.ref.jsonl", "gpt2");
  ASSERT_GE(texts.size(), 150u);
  ASSERT_EQ(refs.size(), texts.size());
  auto encoder = gpt2().make_encoder();
  size_t mismatches = 0;
  for (size_t d = 0; d < texts.size(); ++d) {
    std::vector<int32_t> ids;
    encoder->encode(texts[d], ids);
    if (ids != refs[d]) {
      ++mismatches;
      ADD_FAILURE() << "edge case " << d << " (" << descs[d] << ")\n ours: " << show(ids) << "\n   HF: " << show(refs[d]);
    }
    EXPECT_EQ(gpt2().decode(ids), texts[d]) << descs[d];
  }
  EXPECT_EQ(mismatches, 0u);
}

// A tiny word cache is emptied many times over; ids must not change.
TEST(Gpt2Bpe, BoundedCacheGivesSameIds) {
  const auto texts = string_field(kShared + "/data/sample/sample.jsonl", "text");
  const auto refs = ids_field(kShared + "/data/sample/sample.gpt2.ids.jsonl", "ids");
  Gpt2BpeTokenizer small(kVocab, kMerges, Gpt2BpeOptions{.cache_max_entries = 7});
  auto encoder = small.make_encoder();
  for (size_t d = 0; d < 500; ++d) {
    std::vector<int32_t> ids;
    encoder->encode(texts[d], ids);
    ASSERT_EQ(ids, refs[d]) << "document " << d;
  }
}

// Ids above 65535 do not fit the compact merge table: the same vocabulary with every id moved up by 70,000
// must give the reference ids plus 70,000 (exercises the wide table).
TEST(Gpt2Bpe, LargeIdsUseWideMergeTable) {
  constexpr int32_t kShift = 70000;
  simdjson::dom::parser parser;
  simdjson::dom::object vocab = parser.load(kVocab).get_object();
  std::string shifted = "{";
  for (auto [key, value] : vocab) {
    if (shifted.size() > 1) shifted += ", ";
    shifted += '"';
    for (char c : key) {
      if (c == '"' || c == '\\') shifted += '\\';
      shifted += c;
    }
    shifted += "\": " + std::to_string(int64_t(value) + kShift);
  }
  shifted += "}";
  Gpt2BpeTokenizer tok(shifted, slurp(kMerges), "shifted.json", kMerges);
  EXPECT_EQ(tok.eod_id(), 50256 + kShift);
  const auto texts = string_field(kShared + "/data/sample/sample.jsonl", "text");
  const auto refs = ids_field(kShared + "/data/sample/sample.gpt2.ids.jsonl", "ids");
  auto encoder = tok.make_encoder();
  for (size_t d = 0; d < 300; ++d) {
    std::vector<int32_t> ids;
    encoder->encode(texts[d], ids);
    std::vector<int32_t> expected = refs[d];
    for (int32_t& id : expected) id += kShift;
    ASSERT_EQ(ids, expected) << "document " << d;
  }
}

// GPT-2's original bpe() (merge every occurrence of the lowest-ranked pair, left to right), written directly
// from openai/gpt-2 encoder.py over token byte strings: an independent check of the heap-based long-word path.
std::vector<int32_t> reference_bpe(const std::string& word) {
  static const std::map<std::pair<std::string, std::string>, size_t> ranks = [] {
    std::map<std::pair<std::string, std::string>, size_t> r;
    const auto lines = lines_of(kMerges);
    const auto unmap = [](const std::string& spelled) {
      std::string bytes;
      for (size_t i = 0; i < spelled.size();) {
        uint32_t cp = uint8_t(spelled[i]);
        int len = 1;
        if (cp >= 0xC0) {
          cp = ((cp & 0x1F) << 6) | (uint8_t(spelled[i + 1]) & 0x3F);
          len = 2;
        }
        for (int b = 0; b < 256; ++b)
          if (gpt2_byte_to_unicode(uint8_t(b)) == cp) bytes.push_back(char(b));
        i += len;
      }
      return bytes;
    };
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t sp = lines[i].find(' ');
      r[{unmap(lines[i].substr(0, sp)), unmap(lines[i].substr(sp + 1))}] = i - 1;
    }
    return r;
  }();
  std::vector<std::string> w;
  for (char c : word) w.emplace_back(1, c);
  while (w.size() > 1) {
    size_t best = SIZE_MAX;
    std::pair<std::string, std::string> bigram;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = ranks.find({w[i], w[i + 1]});
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        bigram = it->first;
      }
    }
    if (best == SIZE_MAX) break;
    std::vector<std::string> next;
    for (size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == bigram.first && w[i + 1] == bigram.second) {
        next.push_back(w[i] + w[i + 1]);
        i += 2;
      } else {
        next.push_back(w[i++]);
      }
    }
    w = std::move(next);
  }
  std::vector<int32_t> ids;
  for (const auto& t : w) ids.push_back(*gpt2().token_id(t));
  return ids;
}

TEST(Gpt2Bpe, LongWordsMatchReferenceBpe) {
  std::mt19937 rng(7);
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  for (size_t len : {40u, 64u, 65u, 200u, 257u, 700u, 1500u}) {  // both sides of the linear/heap switch
    std::string word;
    for (size_t i = 0; i < len; ++i) word.push_back(letters[rng() % (i % 3 == 0 ? 26 : letters.size())]);
    EXPECT_EQ(gpt2().encode(word), reference_bpe(word)) << "length " << len;
  }
  const std::string same(600, 'a');  // many equal-rank ties
  EXPECT_EQ(gpt2().encode(same), reference_bpe(same));
}

TEST(Gpt2Bpe, HugeBase64BlobIsFastAndRoundTrips) {
  // 300 KB base64 without line breaks, as found in mail; and 300 KB of one letter run (a single piece).
  std::mt19937 rng(1);
  const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string blob, letters;
  for (int i = 0; i < 300000; ++i) blob.push_back(b64[rng() % 64]);
  for (int i = 0; i < 300000; ++i) letters.push_back(b64[rng() % 52]);
  for (const std::string* text : {&blob, &letters}) {
    const auto ids = gpt2().encode(*text);
    EXPECT_GT(ids.size(), text->size() / 10);
    EXPECT_EQ(gpt2().decode(ids), *text);
  }
}

TEST(Gpt2Bpe, InvalidUtf8IsTokenizedAndDecodesLikePython) {
  // Expected strings: Python's bytes.decode('utf-8', errors='replace') of the same bytes.
  const std::pair<std::string, std::string> cases[] = {
      {"\xe0\x80", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf0\x9f\x98", "\xef\xbf\xbd"},
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"a\xc3(", "a\xef\xbf\xbd("},
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xe2\x82\xac\x80\xf0\x9f\x98\x80!", "\xe2\x82\xac\xef\xbf\xbd\xf0\x9f\x98\x80!"},
      {" x\xff\xfe  y", " x\xef\xbf\xbd\xef\xbf\xbd  y"},
  };
  for (const auto& [bytes, python] : cases) {
    const auto ids = gpt2().encode(bytes);
    EXPECT_EQ(gpt2().decode(ids), python);
    // Every byte survives tokenization: the raw bytes of the tokens are the input.
    std::string raw;
    for (int32_t id : ids) raw += gpt2().token_bytes(id);
    EXPECT_EQ(raw, bytes);
  }
  EXPECT_THROW(gpt2().decode(std::vector<int32_t>{50257}), Error);
  EXPECT_THROW(gpt2().decode(std::vector<int32_t>{-1}), Error);
}

// Random byte strings (mostly malformed UTF-8) and random code point strings: no crash, and the tokens' bytes
// always spell the input exactly.
TEST(Gpt2Bpe, RandomInputsRoundTripBytes) {
  std::mt19937 rng(3);
  auto encoder = gpt2().make_encoder();
  const uint32_t interesting[] = {' ', '\n', '\'', 's', 'a', '1', 0xA0, 0x85, 0x301, 0x4E2D, 0x10D4A, 0x1F600, 0x3000};
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const size_t len = rng() % 40;
    for (size_t i = 0; i < len; ++i) {
      if (round % 2 == 0) {
        text.push_back(char(rng() & 0xFF));
      } else {
        uint32_t cp = interesting[rng() % std::size(interesting)];
        if (rng() % 4 == 0) cp = rng() % 0x110000;
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        if (cp < 0x80) text.push_back(char(cp));
        else if (cp < 0x800) text += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
        else if (cp < 0x10000) text += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
        else text += {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
      }
    }
    std::vector<int32_t> ids;
    encoder->encode(text, ids);
    std::string raw;
    for (int32_t id : ids) raw += gpt2().token_bytes(id);
    ASSERT_EQ(raw, text) << "round " << round;
  }
}

TEST(Gpt2Bpe, FactoryMakesGpt2AndRejectsUnknownTypes) {
  TokenizerOptions options;
  options.type = "GPT2BPETokenizer";
  options.vocab_file = kVocab;
  options.merge_file = kMerges;
  auto tok = make_tokenizer(options);
  EXPECT_EQ(tok->type_name(), "GPT2BPETokenizer");
  std::vector<int32_t> ids;
  tok->make_encoder()->encode("Hello world", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{15496, 995}));

  options.type = "NoSuchTokenizer";
  try {
    make_tokenizer(options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GPT2BPETokenizer"), std::string::npos) << e.what();
  }
  options.type = "GPT2BPETokenizer";
  options.merge_file.clear();
  EXPECT_THROW(make_tokenizer(options), Error);
}

// Error message of loading (vocab, merges) contents, or "" if it loads.
std::string load_error(const std::string& vocab, const std::string& merges) {
  try {
    Gpt2BpeTokenizer tok(vocab, merges, "v.json", "m.txt");
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(Gpt2Bpe, MalformedFilesNameFileAndLine) {
  // A valid miniature vocabulary: the 256 byte tokens plus "Ġt" (merge "Ġ t").
  std::string vocab = "{\n";
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = gpt2_byte_to_unicode(uint8_t(b));
    std::string key;
    if (cp == '"' || cp == '\\') key = std::string("\\") + char(cp);
    else if (cp < 0x80) key = std::string(1, char(cp));
    else key = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    vocab += "\"" + key + "\": " + std::to_string(b) + ",\n";
  }
  const std::string good_vocab = vocab + "\"\\u0120t\": 256\n}\n";
  EXPECT_EQ(load_error(good_vocab, "#version: 0.2\n\xc4\xa0 t\n"), "");
  {
    Gpt2BpeTokenizer tok(good_vocab, "#version: 0.2\n\xc4\xa0 t\n", "v", "m");
    EXPECT_EQ(tok.vocab_size(), 257u);
    EXPECT_FALSE(tok.eod_id().has_value());
    EXPECT_EQ(tok.encode(" t t"), (std::vector<int32_t>{256, 256}));
  }

  const auto contains = [](const std::string& msg, const std::string& what) {
    return msg.find(what) != std::string::npos;
  };
  std::string e = load_error(good_vocab, "#version: 0.2\n\xc4\xa0 t\nx  y\n");
  EXPECT_TRUE(contains(e, "m.txt:3:")) << e;
  e = load_error(good_vocab, "#version: 0.2\n\xc4\xa0 t\nt h\n");
  EXPECT_TRUE(contains(e, "m.txt:3:") && contains(e, "\"th\" is not in the vocabulary")) << e;
  e = load_error(good_vocab, "\xc4\xa0 t\n\xe2\x82\xac t\n");
  EXPECT_TRUE(contains(e, "m.txt:2:") && contains(e, "U+20AC")) << e;
  e = load_error(vocab + "\"\\u0120t\": 256,\n\"bad\": 1.5\n}", "");
  EXPECT_TRUE(contains(e, "v.json:259:") && contains(e, "integer")) << e;
  e = load_error(vocab + "\"\\u0120t\" 256\n}", "");
  EXPECT_TRUE(contains(e, "v.json:258:")) << e;
  e = load_error(vocab + "\"\\u0120t\": 255\n}", "");
  EXPECT_TRUE(contains(e, "v.json") && contains(e, "two tokens")) << e;
  e = load_error("{\"a\": 0}", "");
  EXPECT_TRUE(contains(e, "v.json") && contains(e, "no token for byte")) << e;
  e = load_error(vocab + "\"\\u20ac\": 256\n}", "");
  EXPECT_TRUE(contains(e, "v.json:258:") && contains(e, "U+20AC")) << e;
  e = load_error(good_vocab.substr(0, 100), "");
  EXPECT_TRUE(contains(e, "v.json:")) << e;

  try {
    Gpt2BpeTokenizer tok("/nonexistent/vocab.json", kMerges);
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_TRUE(contains(err.what(), "/nonexistent/vocab.json")) << err.what();
  }
}

}  // namespace
}  // namespace lmforge::text
