// make_tokenizer()'s two ways of finding what a command line names: a Hugging Face hub name looked up in the local
// Hugging Face cache as Hugging Face's libraries find it offline (ids checked against HF's own for the T5 fixture),
// and a vocab.json that no byte-level BPE can use, accepted for training on data tokenized already (size and
// end-of-text id as Megatron v1.1.5 reads them: len(json.load(f)), vocab['<|endoftext|>']) and refused, with the
// reason, where text must be tokenized.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include "test_util.h"
#include "text/tokenizer_factory.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using lmforge::Error;
using lmforge::testing::read_file;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

const std::string kFixtures = std::string(LMFORGE_SOURCE_DIR) + "/tests/text/hf_fixtures";

// Sets environment variables for one test and restores them after it.
class Env {
 public:
  void set(const std::string& name, const char* value) {
    const char* old = std::getenv(name.c_str());
    saved_.push_back({name, old != nullptr ? std::optional<std::string>(old) : std::nullopt});
    if (value != nullptr) ::setenv(name.c_str(), value, 1);
    else ::unsetenv(name.c_str());
  }
  ~Env() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else ::unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A hub cache entry as huggingface_hub writes it: blobs/<hash> holding the bytes, snapshots/<revision>/tokenizer.json
// a relative symlink to it, refs/main naming the revision.
std::string make_cache_entry(const std::string& hub, const std::string& repo_dir, const std::string& revision) {
  const fs::path repo = fs::path(hub) / repo_dir;
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / revision);
  write_file((repo / "blobs" / "0a1b2c").string(), read_file(kFixtures + "/t5.tokenizer.json"));
  fs::create_symlink("../../blobs/0a1b2c", repo / "snapshots" / revision / "tokenizer.json");
  write_file((repo / "refs" / "main").string(), revision);  // (huggingface_hub writes no newline)
  return (repo / "snapshots" / revision).string();
}

// The sample rows of the T5 fixture's Hugging Face reference (ids of HF's encode, no special tokens).
std::vector<std::pair<std::string, std::vector<int32_t>>> t5_reference(size_t rows) {
  std::vector<std::string> sample;
  {
    std::istringstream lines(read_file(std::string(LMFORGE_SHARED_DIR) + "/data/sample/sample.jsonl"));
    simdjson::dom::parser parser;
    for (std::string line; std::getline(lines, line);)
      sample.emplace_back(std::string_view(parser.parse(line)["text"]));
  }
  std::vector<std::pair<std::string, std::vector<int32_t>>> out;
  std::istringstream lines(read_file(kFixtures + "/t5.ref.jsonl"));
  simdjson::dom::parser parser;
  for (std::string line; std::getline(lines, line) && out.size() < rows;) {
    simdjson::dom::element e = parser.parse(line);
    if (std::string_view(e["src"]) != "sample") continue;
    std::vector<int32_t> ids;
    for (int64_t v : simdjson::dom::array(e["ids"])) ids.push_back((int32_t)v);
    out.push_back({sample.at(std::stoul(std::string(std::string_view(e["id"])))), ids});
  }
  return out;
}

TEST(TokenizerFactory, HubNameIsFoundInTheLocalHuggingFaceCache) {
  TempDir dir;
  Env env;
  env.set("HF_HUB_CACHE", nullptr);
  env.set("XDG_CACHE_HOME", nullptr);
  env.set("HOME", dir.file("home").c_str());
  env.set("HF_HOME", dir.file("hf").c_str());
  const std::string snapshot = make_cache_entry(dir.file("hf/hub"), "models--t5-small", "5ab1c3d");
  EXPECT_EQ(lmforge::text::find_hf_tokenizer("t5-small"), snapshot);
  lmforge::text::TokenizerOptions o;
  o.type = "PretrainedFromHF";
  o.name_or_path = "t5-small";
  const auto tok = lmforge::text::make_tokenizer(o);
  EXPECT_EQ(tok->eod_id(), std::optional<int32_t>(1));  // </s>, the T5 end-of-sequence token (as for a path)
  const auto enc = tok->make_encoder();
  for (const auto& [text, want] : t5_reference(20)) {
    std::vector<int32_t> ids;
    enc->encode(text, ids);
    EXPECT_EQ(ids, want) << text.substr(0, 80);
  }
  // A path that exists is taken as it is, whatever the cache holds.
  EXPECT_EQ(lmforge::text::find_hf_tokenizer(kFixtures + "/t5.tokenizer.json"), kFixtures + "/t5.tokenizer.json");
}

// HF_HUB_CACHE comes first, then $HF_HOME/hub, then ~/.cache/huggingface/hub; "org/name" is models--org--name.
TEST(TokenizerFactory, HubCachesAreSearchedInHuggingFacesOrder) {
  TempDir dir;
  Env env;
  env.set("XDG_CACHE_HOME", nullptr);
  env.set("HF_HUB_CACHE", dir.file("hubcache").c_str());
  env.set("HF_HOME", dir.file("hf").c_str());
  env.set("HOME", dir.file("home").c_str());
  const std::string home = make_cache_entry(dir.file("home/.cache/huggingface/hub"), "models--google--t5-v1_1-small", "c0");
  EXPECT_EQ(lmforge::text::find_hf_tokenizer("google/t5-v1_1-small"), home);
  const std::string hf_home = make_cache_entry(dir.file("hf/hub"), "models--google--t5-v1_1-small", "b0");
  EXPECT_EQ(lmforge::text::find_hf_tokenizer("google/t5-v1_1-small"), hf_home);
  const std::string first = make_cache_entry(dir.file("hubcache"), "models--google--t5-v1_1-small", "a0");
  EXPECT_EQ(lmforge::text::find_hf_tokenizer("google/t5-v1_1-small"), first);
}

// Absent everywhere: one error naming the flag and every place looked in, with the reason each did not hold it.
TEST(TokenizerFactory, MissingHubNameListsThePlacesLookedIn) {
  TempDir dir;
  Env env;
  env.set("XDG_CACHE_HOME", nullptr);
  env.set("HF_HUB_CACHE", dir.file("hubcache").c_str());
  env.set("HF_HOME", dir.file("hf").c_str());
  env.set("HOME", dir.file("home").c_str());
  fs::create_directories(dir.file("hf/hub/models--t5-small/snapshots"));  // no refs/main
  try {
    lmforge::text::find_hf_tokenizer("t5-small");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--tokenizer-name-or-path t5-small: no such file or directory, and not found in the local "
                     "Hugging Face cache"), std::string::npos) << m;
    EXPECT_NE(m.find(dir.file("hubcache/models--t5-small/snapshots") + " ($HF_HUB_CACHE: absent)"), std::string::npos)
        << m;
    EXPECT_NE(m.find(dir.file("hf/hub/models--t5-small/snapshots") + " ($HF_HOME/hub: no refs/main)"), std::string::npos)
        << m;
    EXPECT_NE(m.find(dir.file("home/.cache/huggingface/hub/models--t5-small/snapshots") +
                     " (~/.cache/huggingface/hub: absent)"), std::string::npos) << m;
  }
  // Not a hub name (a path that does not exist): no cache is searched.
  try {
    lmforge::text::find_hf_tokenizer(dir.file("nothing/tokenizer.json"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(": no such file or directory (and not a Hugging Face hub name"),
              std::string::npos) << e.what();
  }
}

// The Megatron v1.1.5 project's word-level vocab.json (no byte tokens, a character outside GPT-2's alphabet, a
// repeated key) and its subword-nmt merges file.
void write_word_level_vocab(const TempDir& dir) {
  write_file(dir.file("vocab.json"),
             "{\"<unk>\": 0, \"<|endoftext|>\": 1, \"the\": 2, \"cat\": 3, \"\xe4\xb8\xad\xe5\x9b\xbd\": 4, "
             "\"sat@@\": 5, \"the\": 6, \"on\": 7}");
  write_file(dir.file("bpe32k"), "#version: 0.2\ns a\nsa t@@\nc at</w>\n");
}

TEST(TokenizerFactory, WordLevelVocabularyGivesTrainingItsSizeAndEodOnly) {
  TempDir dir;
  write_word_level_vocab(dir);
  lmforge::text::TokenizerOptions o;
  o.vocab_file = dir.file("vocab.json");
  o.merge_file = dir.file("bpe32k");
  o.size_and_eod_only = true;
  const auto tok = lmforge::text::make_tokenizer(o);
  EXPECT_EQ(tok->vocab_size(), 7u);  // len(json.load(f)): "the" counted once
  EXPECT_EQ(tok->eod_id(), std::optional<int32_t>(1));
  EXPECT_EQ(tok->type_name(), "GPT2BPETokenizer");
  try {
    tok->make_encoder();
    FAIL() << "encoded with a size-only vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a byte-level BPE vocabulary"), std::string::npos) << e.what();
  }
  // Without <|endoftext|> Megatron v1.1.5 fails (KeyError); here an error naming the token.
  write_file(dir.file("noeod.json"), "{\"<unk>\": 0, \"the\": 1}");
  o.vocab_file = dir.file("noeod.json");
  try {
    lmforge::text::make_tokenizer(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no <|endoftext|> token"), std::string::npos) << e.what();
  }
}

// prep and generate (size_and_eod_only false) need the tokenizer itself: the byte-level reader's error stands, with
// what the command needs and where such a vocabulary is accepted.
TEST(TokenizerFactory, WordLevelVocabularyIsRefusedWhereTextIsTokenized) {
  TempDir dir;
  write_word_level_vocab(dir);
  lmforge::text::TokenizerOptions o;
  o.vocab_file = dir.file("vocab.json");
  o.merge_file = dir.file("bpe32k");
  try {
    lmforge::text::make_tokenizer(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(dir.file("vocab.json")), std::string::npos) << m;
    EXPECT_NE(m.find("This command tokenizes or decodes text, which needs a byte-level BPE vocabulary"),
              std::string::npos) << m;
  }
  // A file that is no token -> id object keeps the reader's own error, size-only or not.
  write_file(dir.file("broken.json"), "{\"the\": ");
  o.vocab_file = dir.file("broken.json");
  o.size_and_eod_only = true;
  EXPECT_THROW(lmforge::text::make_tokenizer(o), Error);
}

}  // namespace
