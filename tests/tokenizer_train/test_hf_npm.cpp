// lmforge's trainers against Hugging Face's own Rust trainer, run through the npm `tokenizers` binding
// (hf_train.js), on the shared sample corpus and on corpora of our own (the edge cases, lmforge's source tree).
// The binding trains with HF's default trainer only (vocab 30000, min frequency 0, no special tokens, no initial
// alphabet), so lmforge is run with those settings. Larger vocabularies (32000, 30522) are checked by their
// prefix: training stops at the vocabulary size, so HF's 30000 entries must be the first 30000 of lmforge's run.
// Without node or the package the tests skip saying so; the committed references under data/ (made the same way
// from the edge cases) are checked in every build by test_hf_references.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "text/bert_wordpiece.h"
#include "text/hf_tokenizer_json.h"
#include "hf_order.h"
#include "tokenizer_train/bpe_trainer.h"
#include "tokenizer_train/hf_files.h"
#include "tokenizer_train/word_counts.h"

namespace lmforge::tokenizer_train {
namespace {

namespace fs = std::filesystem;
const std::string kShared = LMFORGE_SHARED_DIR;
const std::string kSource = LMFORGE_SOURCE_DIR;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

// Why the npm tests cannot run here, or "" when they can. NODE_PATH, when unset, points at the peers the text
// benchmarks install (bench/text/peers: npm ci).
std::string npm_unavailable() {
  const std::string peers = kSource + "/bench/text/peers/node_modules";
  if (!std::getenv("NODE_PATH") && fs::is_directory(peers)) ::setenv("NODE_PATH", peers.c_str(), 1);
  if (std::system("node --version >/dev/null 2>&1") != 0) return "node is not installed";
  if (std::system("node -e \"require('tokenizers')\" >/dev/null 2>&1") != 0)
    return "the npm package `tokenizers` is not reachable (cd bench/text/peers && npm ci, or set NODE_PATH to a "
           "node_modules holding it)";
  return "";
}

std::string run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << command;
  return out;
}

std::string hf_script() { return kSource + "/tests/tokenizer_train/hf_train.js"; }

// The texts of a JSON-lines file written as HF's input: each document's text followed by '\n'.
std::string jsonl_as_text(const std::string& path) {
  simdjson::dom::parser parser;
  std::string out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    std::string_view text = parser.parse(line)["text"].get_string();
    out.append(text);
    out += '\n';
  }
  return out;
}

class HfNpm : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = npm_unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
    dir_ = fs::temp_directory_path() / ("lmforge_hf_npm_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    held_out_ = (dir_ / "held_out.txt").string();
    write_file(held_out_, jsonl_as_text(kShared + "/data/edge/edge_cases.jsonl") +
                              "Üç küçük kedi 東京 naïve café — ∑ 😀\r\nend without newline");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Counts words of `inputs` as lmforge does.
  // lowercase: unset is the type's default (WordPiece lower-cases, byte-level BPE does not).
  WordCountResult count(const std::vector<std::string>& inputs, WordSplit split,
                        std::optional<bool> lowercase = std::nullopt) {
    CorpusOptions corpus;
    corpus.inputs = inputs;
    corpus.threads = 2;
    corpus.progress_seconds = 1e9;
    WordSplitOptions options;
    options.split = split;
    options.lowercase = lowercase.value_or(split == WordSplit::kBert);
    return count_words(corpus, options);
  }

  std::string hf_train(const std::string& model, const std::vector<std::string>& files, const std::string& name) {
    const std::string out = (dir_ / name).string();
    std::string command = "node " + hf_script() + " train " + model + " '";
    for (size_t i = 0; i < files.size(); ++i) command += (i ? "," : "") + files[i];
    run(command + "' " + out);
    return out;
  }

  // HF encodes the held-out text with `tokenizer_json`; lmforge with the same file must give the same ids.
  void expect_same_encoding(const std::string& tokenizer_json, const text::Tokenizer& lmforge) {
    const std::string hf = run("node " + hf_script() + " encode " + tokenizer_json + " " + held_out_);
    std::string mine;
    auto encoder = lmforge.make_encoder();
    const std::string text = read_file(held_out_);
    size_t pos = 0, lines = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      end = end == std::string::npos ? text.size() : end + 1;
      std::vector<int32_t> ids;
      encoder->encode(std::string_view(text).substr(pos, end - pos), ids);
      mine += "[";
      for (size_t i = 0; i < ids.size(); ++i) mine += (i ? "," : "") + std::to_string(ids[i]);
      mine += "]\n";
      pos = end;
      ++lines;
    }
    EXPECT_GT(lines, 100u);
    // Line by line, naming the text of the first difference.
    std::istringstream a(mine), b(hf), t(text);
    std::string la, lb, lt;
    for (size_t n = 1; std::getline(a, la) && std::getline(b, lb); ++n) {
      std::getline(t, lt);
      if (la != lb) {
        ADD_FAILURE() << "held-out line " << n << " (" << lt << "): lmforge " << la << ", HF " << lb;
        return;
      }
    }
    EXPECT_EQ(mine.size(), hf.size());
  }

  void check_byte_level(const std::vector<std::string>& inputs, const std::vector<std::string>& hf_files,
                        const std::string& name) {
    const std::string hf = hf_train("ByteLevelBPE", hf_files, name);
    const WordCountResult counted = count(inputs, WordSplit::kByteLevel);
    BpeTrainerOptions options;  // HF's defaults
    const BpeModel model = train_bpe(counted.words, options);
    EXPECT_EQ(bpe_vocab_json(model), read_file(hf + "/vocab.json")) << name;
    EXPECT_EQ(bpe_merges_txt(model), read_file(hf + "/merges.txt")) << name;
    // lmforge's tokenizer.json loads in HF and encodes as lmforge does.
    const std::string mine = (dir_ / (name + "_lmforge.json")).string();
    write_file(mine, bpe_tokenizer_json(model, false));
    expect_same_encoding(mine, *text::load_hf_tokenizer(mine));
  }

  fs::path dir_;
  std::string held_out_;
};

TEST_F(HfNpm, ByteLevelSampleJsonLinesAndOwnCorpora) {
  const std::string text = (dir_ / "sample.txt").string();
  write_file(text, jsonl_as_text(kShared + "/data/sample/sample.jsonl"));
  // lmforge reads the JSON lines; HF the text file made of them.
  check_byte_level({kShared + "/data/sample/sample.jsonl"}, {text}, "sample");
  // lmforge's own sources: code, whitespace runs, several plain text files.
  std::vector<std::string> sources;
  for (const auto& e : fs::recursive_directory_iterator(kSource + "/src"))
    if (e.is_regular_file()) sources.push_back(e.path().string());
  std::sort(sources.begin(), sources.end());
  check_byte_level(sources, sources, "sources");
}

TEST_F(HfNpm, ByteLevel32000ExtendsHf30000) {
  const std::string text = (dir_ / "sample.txt").string();
  write_file(text, jsonl_as_text(kShared + "/data/sample/sample.jsonl"));
  const std::string hf = hf_train("ByteLevelBPE", {text}, "sample");
  const WordCountResult counted = count({text}, WordSplit::kByteLevel);
  BpeTrainerOptions options;
  const BpeModel model30 = train_bpe(counted.words, options);
  EXPECT_EQ(bpe_vocab_json(model30), read_file(hf + "/vocab.json"));
  EXPECT_EQ(bpe_merges_txt(model30), read_file(hf + "/merges.txt"));
  options.vocab_size = 32000;
  const BpeModel model32 = train_bpe(counted.words, options);
  ASSERT_EQ(model32.vocab.size(), 32000u);
  EXPECT_TRUE(std::equal(model30.vocab.begin(), model30.vocab.end(), model32.vocab.begin()));
  ASSERT_GE(model32.trace.size(), model30.trace.size());
  for (size_t i = 0; i < model30.trace.size(); ++i) {
    EXPECT_EQ(model32.trace[i].left, model30.trace[i].left) << i;
    EXPECT_EQ(model32.trace[i].right, model30.trace[i].right) << i;
    EXPECT_EQ(model32.trace[i].count, model30.trace[i].count) << i;
  }
}

// --lowercase for byte-level BPE: HF's Lowercase normalizer before the ByteLevel pre-tokenizer.
TEST_F(HfNpm, ByteLevelLowercase) {
  const std::string text = (dir_ / "sample.txt").string();
  write_file(text, jsonl_as_text(kShared + "/data/sample/sample.jsonl"));
  const std::string hf = hf_train("ByteLevelBPELowercase", {text}, "lower");
  const BpeModel model = train_bpe(count({text}, WordSplit::kByteLevel, true).words, BpeTrainerOptions{});
  EXPECT_EQ(bpe_vocab_json(model), read_file(hf + "/vocab.json"));
  EXPECT_EQ(bpe_merges_txt(model), read_file(hf + "/merges.txt"));
  const std::string mine = (dir_ / "lower_lmforge.json").string();
  write_file(mine, bpe_tokenizer_json(model, true));
  expect_same_encoding(mine, *text::load_hf_tokenizer(mine));
}

// HF's "##c" order is random; replaying HF's own order must give HF's vocab.txt byte for byte, and lmforge's
// code-point order the same specials, alphabet and "##c" set.
TEST_F(HfNpm, WordPieceReplaysHfAndLoadsEverywhere) {
  const std::string text = (dir_ / "sample.txt").string();
  write_file(text, jsonl_as_text(kShared + "/data/sample/sample.jsonl"));
  const std::string hf = hf_train("WordPiece", {text}, "wp");
  const std::string hf_vocab = read_file(hf + "/vocab.txt");
  std::vector<std::string> hf_tokens;
  std::istringstream in(hf_vocab);
  for (std::string t; std::getline(in, t);) hf_tokens.push_back(t);
  const WordCountResult counted = count({kShared + "/data/sample/sample.jsonl"}, WordSplit::kBert);
  BpeTrainerOptions options;
  options.continuing_subword_prefix = "##";
  options.vocab_size = 30522;
  const BpeModel ours = train_bpe(counted.words, options);
  const size_t alphabet = ours.specials + ours.alphabet;
  const std::vector<uint32_t> order = hf_continuing_order(hf_tokens, alphabet);
  std::vector<std::string> hf_continuing(hf_tokens.begin() + long(alphabet),
                                         hf_tokens.begin() + long(alphabet + order.size()));
  std::vector<std::string> our_continuing;
  ASSERT_FALSE(order.empty());
  for (size_t id = 0; id < alphabet + order.size(); ++id)
    if (id < alphabet) EXPECT_EQ(ours.vocab[id], hf_tokens[id]) << id;
    else our_continuing.push_back(ours.vocab[id]);
  std::sort(hf_continuing.begin(), hf_continuing.end());
  std::sort(our_continuing.begin(), our_continuing.end());
  EXPECT_EQ(our_continuing, hf_continuing);

  options.continuing_order = order;
  BpeModel replay = train_bpe(counted.words, options);
  ASSERT_GE(replay.vocab.size(), hf_tokens.size());
  replay.vocab.resize(hf_tokens.size());  // HF stopped at its default 30000
  EXPECT_EQ(wordpiece_vocab_txt(replay), hf_vocab);

  // lmforge's files load in HF and in lmforge's BERT tokenizer, with the same ids.
  const std::string json = (dir_ / "wp_lmforge.json").string(), vocab = (dir_ / "wp_vocab.txt").string();
  BpeModel with_unk = ours;
  with_unk.vocab.insert(with_unk.vocab.begin(), "[UNK]");  // the model's unk token (lmforge's default specials)
  with_unk.specials = 1;
  write_file(json, wordpiece_tokenizer_json(with_unk, WordSplitOptions{WordSplit::kBert, true, true}));
  write_file(vocab, wordpiece_vocab_txt(with_unk));
  // HF with lmforge's tokenizer.json against lmforge's pipeline for the same file (added tokens such as "[UNK]"
  // in the text are matched by both); the vocab.txt loads as Megatron's BertWordPieceLowerCase.
  expect_same_encoding(json, *text::load_hf_tokenizer(json));
  EXPECT_EQ(text::make_bert_wordpiece_tokenizer(vocab, true, text::WordPieceFlavor::kMegatron)->vocab_size(),
            with_unk.vocab.size() + 2);  // Megatron adds [BOS] and [EOS]
}

// --no-lowercase for WordPiece (BertWordPieceCase): BertNormalizer without lower-casing or accent stripping; HF's
// run replayed with its own "##c" order gives its vocab.txt byte for byte.
TEST_F(HfNpm, WordPieceCasedReplaysHf) {
  const std::string text = (dir_ / "sample.txt").string();
  write_file(text, jsonl_as_text(kShared + "/data/sample/sample.jsonl"));
  const std::string hf_vocab = read_file(hf_train("WordPieceCased", {text}, "wpc") + "/vocab.txt");
  std::vector<std::string> hf_tokens;
  std::istringstream in(hf_vocab);
  for (std::string t; std::getline(in, t);) hf_tokens.push_back(t);
  const WordCountResult counted = count({text}, WordSplit::kBert, false);
  BpeTrainerOptions options;
  options.continuing_subword_prefix = "##";
  const BpeModel ours = train_bpe(counted.words, options);
  options.continuing_order = hf_continuing_order(hf_tokens, ours.specials + ours.alphabet);
  ASSERT_FALSE(options.continuing_order.empty());
  EXPECT_EQ(wordpiece_vocab_txt(train_bpe(counted.words, options)), hf_vocab);
}

}  // namespace
}  // namespace lmforge::tokenizer_train
