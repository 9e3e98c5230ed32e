// `lmforge tokenizer train` as a user runs it: the shared references through the command line, bad input and
// flags refused with file:line or the flag named and nothing written, SentencePiece against spm_train itself, and
// the loop closed: a vocabulary trained here preps a corpus, trains a few GPT iterations and generates.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <simdjson.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;

const std::string kExe = LMFORGE_EXE;
const std::string kSample = shared_path("data/sample/sample.jsonl");

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(TokenizerTrainCli, GptSettingsMatchSharedReference) {
  TempDir dir;
  const std::string out = dir.file("bpe");
  fs::create_directories(out);
  std::ofstream(out + "/.vocab.json.tmp-99999999") << "left by a killed run (no such process)";
  const auto r = run_command(kExe + " tokenizer train --type ByteLevelBPE --input " + kSample +
                             " --vocab-size 8000 --min-frequency 2 --threads 2 --output-dir " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string ref = shared_path("data/toktrain/gpt2bpe8000_sample/");
  EXPECT_EQ(read_file(out + "/vocab.json"), read_file(ref + "vocab.json"));
  EXPECT_EQ(read_file(out + "/merges.txt"), read_file(ref + "merges.txt"));
  EXPECT_NE(r.output.find("trained ByteLevelBPE: 8,000 entries"), std::string::npos) << r.output;
  EXPECT_EQ(entries(out), 3u);  // no temporaries left, the dead run's removed
}

// HF's Rust defaults through the command line (no special tokens, no initial alphabet): the committed reference
// made by npm tokenizers from the edge cases.
TEST(TokenizerTrainCli, HfDefaultsMatchCommittedReference) {
  TempDir dir;
  const std::string out = dir.file("bpe");
  const auto r = run_command(kExe + " tokenizer train --type ByteLevelBPE --input " +
                             shared_path("data/edge/edge_cases.jsonl") +
                             " --special-tokens --no-initial-alphabet --output-dir " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string ref = std::string(LMFORGE_SOURCE_DIR) + "/tests/tokenizer_train/data/hf_edge/";
  EXPECT_EQ(read_file(out + "/vocab.json"), read_file(ref + "bpe_vocab.json"));
  EXPECT_EQ(read_file(out + "/merges.txt"), read_file(ref + "bpe_merges.txt"));
}

TEST(TokenizerTrainCli, BertSettingsMatchSharedReference) {
  TempDir dir;
  const std::string out = dir.file("wp");
  const auto r = run_command(kExe + " tokenizer train --type WordPiece --input " + kSample +
                             " --vocab-size 8000 --output-dir " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string ref = shared_path("data/toktrain/bertwp8000_sample/");
  EXPECT_EQ(read_file(out + "/vocab.txt"), read_file(ref + "vocab.txt"));
  EXPECT_EQ(read_file(out + "/tokenizer.json"), read_file(ref + "tokenizer.json"));
  // The vocab.txt is what Megatron's BertWordPieceLowerCase reads.
  const auto prep = run_command(kExe + " prep --input " + kSample + " --output-prefix " + dir.file("bert") +
                                " --tokenizer-type BertWordPieceLowerCase --vocab-file " + out + "/vocab.txt");
  ASSERT_EQ(prep.status, 0) << prep.output;
  EXPECT_GT(fs::file_size(dir.file("bert_text_document.bin")), 1000000u);
}

// WordPiece's BertNormalizer switches reach the words trained on and the tokenizer.json written: lower-cased with
// accents kept and no Chinese-character padding, the alphabet (single characters) is the one HF's trainer found
// with the same switches (tests/tokenizer_train/data/hf_edge/, see test_hf_references.cpp), and tokenizer.json
// carries the switches.
TEST(TokenizerTrainCli, WordPieceNormalizerSwitchesReachTheWordsAndTokenizerJson) {
  TempDir dir;
  const std::string out = dir.file("wp");
  const auto r = run_command(kExe + " tokenizer train --type WordPiece --input " +
                             shared_path("data/edge/edge_cases.jsonl") +
                             " --no-strip-accents --no-handle-chinese-chars --output-dir " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  auto alphabet = [](const std::string& vocab) {
    std::set<std::string> chars;
    std::istringstream in(vocab);
    for (std::string t; std::getline(in, t);)
      if (!t.empty() && t.rfind("##", 0) != 0 && t[0] != '[' && (t.size() == 1 || (unsigned char)t[0] >= 0xC0) &&
          t.size() <= 4 && t.size() == (size_t)((unsigned char)t[0] < 0x80 ? 1 : (unsigned char)t[0] < 0xE0 ? 2
                                               : (unsigned char)t[0] < 0xF0 ? 3 : 4))
        chars.insert(t);
    return chars;
  };
  const std::string ref = std::string(LMFORGE_SOURCE_DIR) +
                          "/tests/tokenizer_train/data/hf_edge/wordpiece_keep_accents_no_chinese_vocab.txt";
  EXPECT_EQ(alphabet(read_file(out + "/vocab.txt")), alphabet(read_file(ref)));
  const std::string json = read_file(out + "/tokenizer.json");
  for (const char* field : {"\"clean_text\": true", "\"handle_chinese_chars\": false", "\"strip_accents\": false",
                            "\"lowercase\": true"})
    EXPECT_NE(json.find(field), std::string::npos) << field << "\n" << json.substr(0, 600);
}

TEST(TokenizerTrainCli, BadInputNamesFileAndLineAndWritesNothing) {
  TempDir dir;
  {
    std::ofstream(dir.file("bad.jsonl")) << "{\"text\": \"fine\"}\n{\"text\": 5}\n";
  }
  const std::string out = dir.file("out");
  auto r = run_command(kExe + " tokenizer train --type ByteLevelBPE --input " + dir.file("bad.jsonl") +
                       " --output-dir " + out);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(dir.file("bad.jsonl") + ":2: "), std::string::npos) << r.output;
  EXPECT_TRUE(!fs::exists(out) || entries(out) == 0) << r.output;

  // SentencePiece streams the corpus to libsentencepiece: the reader's error is the one reported, and nothing hangs.
  r = run_command("timeout 120 " + kExe + " tokenizer train --type SentencePieceUnigram --vocab-size 100 --input " +
                  dir.file("bad.jsonl") + " --output-dir " + out);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(dir.file("bad.jsonl") + ":2: "), std::string::npos) << r.output;
  EXPECT_TRUE(!fs::exists(out) || entries(out) == 0) << r.output;

  r = run_command(kExe + " tokenizer train --type ByteLevelBPE --input " + dir.file("missing.txt") +
                  " --output-dir " + out);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("missing.txt"), std::string::npos) << r.output;
}

TEST(TokenizerTrainCli, FlagsTheTypeDoesNotUseAreRefused) {
  TempDir dir;
  const std::string base = kExe + " tokenizer train --input " + kSample + " --output-dir " + dir.file("o");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --type ByteLevelBPE --random-seed 1", "--random-seed does not apply to --type ByteLevelBPE"},
      {" --type WordPiece --character-coverage 1", "--character-coverage does not apply to --type WordPiece"},
      {" --type SentencePieceBPE --min-frequency 2", "--min-frequency does not apply to --type SentencePieceBPE"},
      {" --type SentencePieceUnigram --lowercase", "--lowercase does not apply"},
      {" --type ByteLevelBPE --no-strip-accents", "--strip-accents does not apply to --type ByteLevelBPE"},
      {" --type SentencePieceBPE --no-handle-chinese-chars", "--handle-chinese-chars does not apply"},
      {" --type WordPiece --special-tokens '[CLS]'", "must include [UNK]"},
      {" --type Unigram", "--type Unigram: unknown"},
      {" --type ByteLevelBPE --input-format csv", "--input-format csv"},
      {" --type SentencePieceBPE --spm-option vocab_size=5", "set by lmforge's own flags"},
  };
  for (const auto& [flags, message] : cases) {
    const auto r = run_command(base + flags);
    EXPECT_EQ(r.status, 1) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << flags << "\n" << r.output;
  }
  const auto help = run_command(kExe + " tokenizer train --help");
  for (const char* flag : {"--type", "--input", "--input-format", "--json-keys", "--output-dir", "--vocab-size",
                           "--min-frequency", "--special-tokens", "--limit-alphabet", "--lowercase", "--strip-accents",
                           "--no-strip-accents", "--handle-chinese-chars", "--clean-text",
                           "--no-initial-alphabet", "--threads", "--character-coverage", "--random-seed",
                           "--byte-fallback", "--spm-option", "--max-line-bytes", "--progress-seconds"})
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
}

// Pieces and scores of a SentencePiece model.
std::vector<std::pair<std::string, float>> pieces(const std::string& model) {
  sentencepiece::SentencePieceProcessor sp;
  EXPECT_TRUE(sp.Load(model).ok()) << model;
  std::vector<std::pair<std::string, float>> out;
  for (int i = 0; i < sp.GetPieceSize(); ++i) out.emplace_back(sp.IdToPiece(i), sp.GetScore(i));
  return out;
}

// The texts of a JSON-lines file as a text file: each document followed by '\n' (what lmforge trains on from the
// JSON lines).
std::string jsonl_as_text(const std::string& path) {
  simdjson::dom::parser parser;
  std::string out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) {
    std::string_view text = parser.parse(line)["text"].get_string();
    out.append(text);
    out += '\n';
  }
  return out;
}

TEST(TokenizerTrainCli, SentencePieceEqualsSpmTrain) {
  if (std::system("spm_train --help >/dev/null 2>&1") != 0 && std::system("command -v spm_train >/dev/null") != 0)
    GTEST_SKIP() << "spm_train (Debian package sentencepiece) is not installed";
  TempDir dir;
  // The first 2,500 documents of the sample (libsentencepiece's unigram trainer takes minutes on all of it here).
  const std::string corpus = dir.file("corpus.jsonl");
  {
    std::istringstream in(read_file(kSample));
    std::ofstream out(corpus, std::ios::binary);
    std::string line;
    for (int n = 0; n < 2500 && std::getline(in, line); ++n) out << line << '\n';
  }
  {
    std::ofstream(dir.file("sample.txt"), std::ios::binary) << jsonl_as_text(corpus);
  }
  const std::string spm_flags = " --vocab_size=2000 --random_seed=42 --character_coverage=0.995";
  for (const std::string type : {"bpe", "unigram"}) {
    const std::string flags = " --vocab-size 2000 --random-seed 42 --character-coverage 0.995";
    const std::string lm_type = type == "bpe" ? "SentencePieceBPE" : "SentencePieceUnigram";
    auto r = run_command(kExe + " tokenizer train --type " + lm_type + " --input " + corpus + flags +
                         " --threads 2 --output-dir " + dir.file(type));
    ASSERT_EQ(r.status, 0) << r.output;
    // Unigram: spm_train with its default threads (lmforge's unigram trainer always runs that many).
    r = run_command("spm_train --input=" + dir.file("sample.txt") + " --model_prefix=" + dir.file(type + "_spm") +
                    " --model_type=" + type + spm_flags + (type == "bpe" ? " --num_threads=2" : ""));
    ASSERT_EQ(r.status, 0) << r.output;
    const auto mine = pieces(dir.file(type) + "/tokenizer.model");
    const auto spm = pieces(dir.file(type + "_spm.model"));
    ASSERT_EQ(mine.size(), 2000u);
    EXPECT_EQ(mine, spm) << type;
  }
  // Unigram at --threads 1: the same pieces and scores as at --threads 2, exactly (libsentencepiece's own scores
  // move by up to 1e-3 between 1 and 2 of its threads, since its EM sums per-thread chunks; lmforge runs it with a
  // fixed thread count).
  auto r = run_command(kExe + " tokenizer train --type SentencePieceUnigram --input " + corpus +
                       " --vocab-size 2000 --random-seed 42 --character-coverage 0.995 --threads 1 --output-dir " +
                       dir.file("unigram1"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(pieces(dir.file("unigram1") + "/tokenizer.model"), pieces(dir.file("unigram") + "/tokenizer.model"));
}

// The loop: train a vocabulary, prep the corpus with it, train GPT a few iterations, generate.
TEST(TokenizerTrainCli, TrainedVocabularyPrepsTrainsAndGenerates) {
  TempDir dir;
  const std::string tok = dir.file("tok");
  auto r = run_command(kExe + " tokenizer train --type ByteLevelBPE --input " + kSample +
                       " --vocab-size 2000 --min-frequency 2 --output-dir " + tok);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string files = " --vocab-file " + tok + "/vocab.json --merge-file " + tok + "/merges.txt";
  r = run_command(kExe + " prep --input " + kSample + " --output-prefix " + dir.file("ds") +
                  " --tokenizer-type GPT2BPETokenizer --append-eod" + files);
  ASSERT_EQ(r.status, 0) << r.output;
  // The same ids through the tokenizer.json (Hugging Face's pipeline, PretrainedFromHF).
  r = run_command(kExe + " prep --input " + kSample + " --output-prefix " + dir.file("hf") +
                  " --tokenizer-type PretrainedFromHF --tokenizer-name-or-path " + tok + "/tokenizer.json --append-eod");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_file(dir.file("ds_text_document.bin")), read_file(dir.file("hf_text_document.bin")));
  const std::string ckpt = dir.file("ckpt");
  r = run_command(kExe + " train gpt --num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32"
                         " --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 0.003"
                         " --train-iters 4 --split 949,50,1 --log-interval 1 --eval-interval 4 --eval-iters 1"
                         " --data-path " + dir.file("ds_text_document") + " --data-cache-path " +
                  dir.file("cache") + " --save " + ckpt + files);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("iteration        4/"), std::string::npos) << r.output;
  r = run_command(kExe + " generate --load " + ckpt + files +
                  " --prompt 'Merhaba dünya' --greedy --ignore-eos --max-new-tokens 8 2>/dev/null | cat");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("Merhaba dünya", 0), 0u) << r.output;
  EXPECT_GT(r.output.size(), std::string("Merhaba dünya\n").size()) << r.output;
}

}  // namespace
