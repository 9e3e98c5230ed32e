// `lmforge train gpt` and `lmforge generate` as a user runs them: bad flags fail with a clear message before any
// work (no index cache, no checkpoint), a Megatron-made dataset trains, --exit-interval + --load resumes with the
// same logged losses, and generate streams the same greedy text with and without its KV cache; text that is token
// ids (NullTokenizer) preps, trains and generates ids joined as Megatron detokenizes them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;

const std::string kVocab = " --vocab-file " + shared_path("data/vocab/gpt2-vocab.json") + " --merge-file " +
                           shared_path("data/vocab/gpt2-merges.txt");

// A tiny valid run as flag → value (CLI11 rejects a repeated flag, so tests override entries; "-" drops one and
// an empty value is a bare flag).
using Flags = std::map<std::string, std::string>;
Flags tiny_flags(const TempDir& dir) {
  return {{"--num-layers", "2"}, {"--hidden-size", "32"}, {"--num-attention-heads", "2"}, {"--seq-length", "32"},
          {"--max-position-embeddings", "32"}, {"--micro-batch-size", "2"}, {"--global-batch-size", "4"},
          {"--lr", "0.003"}, {"--min-lr", "0.0003"}, {"--lr-decay-style", "cosine"}, {"--lr-warmup-iters", "1"},
          {"--split", "949,50,1"}, {"--log-interval", "1"}, {"--eval-interval", "2"}, {"--eval-iters", "1"},
          {"--data-cache-path", dir.file("cache")}, {"--train-iters", "4"},
          {"--vocab-file", shared_path("data/vocab/gpt2-vocab.json")},
          {"--merge-file", shared_path("data/vocab/gpt2-merges.txt")},
          {"--data-path", shared_path("data/sample/sample_gpt2_text_document")}};
}
std::string train_command(const TempDir& dir, const Flags& overrides) {
  Flags flags = tiny_flags(dir);
  for (const auto& [k, v] : overrides) flags[k] = v;
  std::string cmd = std::string(LMFORGE_EXE) + " train gpt";
  for (const auto& [k, v] : flags)
    if (v != "-") cmd += " " + k + (v.empty() ? "" : " '" + v + "'");
  return cmd;
}

struct BadFlags {
  Flags flags;
  std::string message;
};

TEST(TrainCli, BadFlagsFailClearlyBeforeAnyWork) {
  const std::vector<BadFlags> cases = {
      {{{"--num-attention-heads", "5"}}, "--num-attention-heads 5 does not divide --hidden-size 32"},
      {{{"--seq-length", "64"}}, "--seq-length 64 exceeds --max-position-embeddings 32"},
      {{{"--global-batch-size", "6"}, {"--micro-batch-size", "4"}},
       "--global-batch-size 6 is not divisible by --micro-batch-size 4"},
      {{{"--train-samples", "16"}}, "give exactly one of --train-iters and --train-samples"},
      {{{"--train-iters", "-"}}, "give exactly one of --train-iters and --train-samples"},
      {{{"--save-interval", "2"}, {"--save", "-"}}, "--save-interval needs --save"},
      {{{"--finetune", ""}}, "--finetune needs --load"},
      {{{"--lr-warmup-fraction", "0.1"}}, "give only one of --lr-warmup-fraction and --lr-warmup-iters"},
      {{{"--lr-decay-style", "stepwise"}}, "--lr-decay-style"},
      {{{"--eval-interval", "0"}}, "--eval-interval must be a positive integer"},
      {{{"--data-path", "-"}}, "lmforge train: error: --data-path is required"},
      {{{"--vocab-file", "-"}}, "--tokenizer-type GPT2BPETokenizer needs --vocab-file"},
      {{{"--tokenizer-type", "NullTokenizer"}, {"--vocab-file", "-"}, {"--merge-file", "-"}},
       "--tokenizer-type NullTokenizer needs --vocab-size"},
      // A SentencePiece model needs no --vocab-file (it was required of every tokenizer): its vocabulary is checked
      // against the data's ids.
      {{{"--tokenizer-type", "GPTSentencePieceTokenizer"}, {"--vocab-file", "-"}, {"--merge-file", "-"},
        {"--tokenizer-model", std::string(LMFORGE_SOURCE_DIR) + "/tests/text/spm_fixtures/tiny_unigram.model"}},
       "tokens (GPTSentencePieceTokenizer from " + std::string(LMFORGE_SOURCE_DIR) +
           "/tests/text/spm_fixtures/tiny_unigram.model)"},
      {{{"--tokenizer-type", "BertWordPieceLowerCase"}, {"--merge-file", "-"},
        {"--vocab-file", shared_path("data/vocab/bert-base-uncased-vocab.txt")}},
       "holds token id 50256, outside the vocabulary of 30524 tokens"},
      {{{"--optimizer", "adagrad"}}, "--optimizer: adagrad not in {adam,lamb,sgd}"},
      {{{"--lamb-all-tensors", ""}}, "--lamb-all-tensors only applies to --optimizer lamb"},
      {{{"--optimizer", "sgd"}, {"--sgd-momentum", "-1"}}, "--sgd-momentum must be >= 0"},
      {{{"--optimizer", "lamb"}, {"--adam-beta2", "1"}}, "--adam-beta2 must be in [0, 1)"},
  };
  for (const BadFlags& c : cases) {
    TempDir dir;
    Flags flags = c.flags;
    if (!flags.count("--save")) flags["--save"] = dir.file("ckpt");
    auto r = run_command(train_command(dir, flags));
    EXPECT_NE(r.status, 0) << c.message << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.message << "\n" << r.output;
    EXPECT_FALSE(fs::exists(dir.file("cache"))) << c.message << ": indices were built before the error";
    EXPECT_FALSE(fs::exists(dir.file("ckpt"))) << c.message;
  }
  // A missing dataset.
  TempDir dir;
  auto r = run_command(train_command(dir, {{"--data-path", dir.file("nope")}}));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(dir.file("nope")), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.file("cache")));
}

TEST(TrainCli, HelpDocumentsFlagsAndConventions) {
  auto r = run_command(std::string(LMFORGE_EXE) + " train gpt --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* s : {"--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length",
                        "--max-position-embeddings", "--micro-batch-size", "--global-batch-size", "--lr", "--min-lr",
                        "--train-iters", "--train-samples", "--lr-decay-style", "--lr-warmup-fraction", "--split",
                        "--data-path", "--save", "--load", "--save-interval", "--log-interval", "--eval-interval",
                        "--eval-iters", "--tensorboard-dir", "--seed", "--clip-grad", "--weight-decay",
                        "--adam-beta1", "--adam-beta2", "--adam-eps", "--init-method-std",
                        "--make-vocab-size-divisible-by", "--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler",
                        "--no-load-optim", "--no-load-rng", "--lr-decay-iters", "--lr-decay-samples",
                        "--lr-warmup-iters", "--finetune", "--exit-interval", "padded logits", ".safetensors",
                        "--optimizer", "adam: torch.optim.AdamW", "apex FusedLAMB", "trust ratio", "--sgd-momentum",
                        "torch.optim.SGD", "--lamb-all-tensors", "use_nvlamb"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
  r = run_command(std::string(LMFORGE_EXE) + " generate --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* s : {"--load", "--prompt", "--max-new-tokens", "--greedy", "--temperature", "--top-k", "--top-p",
                        "--seed", "--no-kv-cache"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
}

// --device names the backend of `train` and `generate`: a device this build lacks is a parse error naming the devices
// it has; in a CUDA build on a machine without an NVIDIA driver or GPU, cuda stops before anything else with an
// error saying so (the cuda checks are skipped where a GPU is present), and both commands list the flag.
TEST(TrainCli, DeviceFlagNamesTheBuildsDevices) {
  TempDir dir;
  auto cuda_refused = [](const lmforge::testing::CommandResult& r, const char* command) {
    EXPECT_NE(r.status, 0) << r.output;
    const bool no_backend = r.output.find("--device: cuda: this build has no CUDA backend (devices: cpu, guarded)") !=
                            std::string::npos;
    const bool no_gpu = r.output.find("no CUDA device or driver found") != std::string::npos;
    EXPECT_TRUE(no_backend || no_gpu) << command << "\n" << r.output;
  };
  const bool gpu = std::system("nvidia-smi -L > /dev/null 2>&1") == 0;
  if (!gpu) {
    auto r = run_command(train_command(dir, {{"--device", "cuda"}}));
    cuda_refused(r, "train");
    EXPECT_FALSE(fs::exists(dir.file("cache"))) << "indices were built before the error";
    r = run_command(std::string(LMFORGE_EXE) + " generate --device cuda --load " + dir.file("nothing") + kVocab);
    cuda_refused(r, "generate");
  }
  auto r = run_command(train_command(dir, {{"--device", "tpu"}}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--device: tpu: no such device in this build (devices: cpu, guarded"), std::string::npos)
      << r.output;
  for (const char* command : {" train gpt --help", " train bert --help", " train t5 --help", " generate --help"}) {
    r = run_command(std::string(LMFORGE_EXE) + command);
    ASSERT_EQ(r.status, 0) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("--device TEXT=cpu"), std::string::npos) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("guarded"), std::string::npos) << command << "\n" << r.output;
  }
}

using lmforge::testing::loss_lines;

// A flag the chosen optimizer does not use is said so, not silently dropped.
TEST(TrainCli, SgdMomentumWithAdamGivesANotice) {
  auto r = run_command(std::string(LMFORGE_EXE) +
                       " train gpt --num-layers 1 --hidden-size 8 --num-attention-heads 2 --seq-length 8"
                       " --micro-batch-size 1 --lr 1e-3 --train-iters 1 --sgd-momentum 0.5 --data-path /nonexistent"
                       " --vocab-file /nonexistent");
  EXPECT_NE(r.output.find("--sgd-momentum has no effect with --optimizer adam"), std::string::npos) << r.output;
}

TEST(TrainCli, MegatronDatasetTrainsResumesAndGenerates) {
  TempDir dir;
  auto full = run_command(train_command(dir, {}));
  ASSERT_EQ(full.status, 0) << full.output;
  const std::string ckpt = dir.file("ckpt");
  auto first = run_command(train_command(dir, {{"--exit-interval", "2"}, {"--save", ckpt}}));
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("exiting at iteration 2"), std::string::npos) << first.output;
  auto second = run_command(train_command(dir, {{"--save", ckpt}, {"--load", ckpt}}));
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("loaded checkpoint"), std::string::npos) << second.output;
  std::vector<std::string> resumed = loss_lines(first.output);
  for (const std::string& l : loss_lines(second.output)) resumed.push_back(l);
  const std::vector<std::string> uninterrupted = loss_lines(full.output);
  EXPECT_EQ(uninterrupted.size(), 4u + 2u + 2u) << full.output;  // 4 iterations, 2 + 1 validations, 1 test
  EXPECT_EQ(uninterrupted, resumed) << full.output << "\n----\n" << first.output << second.output;
  EXPECT_NE(full.output.find("the end of training for test data | lm loss value: "), std::string::npos);

  // generate from the save directory: greedy with and without the KV cache, on cpu and guarded, print the same text.
  const std::string gen = std::string(LMFORGE_EXE) + " generate --load " + ckpt + kVocab +
                          " --prompt 'Hello world' --greedy --ignore-eos";
  // stdout only (run_command merges stderr, where the summary goes).
  auto a = run_command(gen + " --max-new-tokens 12 2>/dev/null | cat");
  auto b = run_command(gen + " --max-new-tokens 12 --no-kv-cache 2>/dev/null | cat");
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_EQ(a.output.rfind("Hello world", 0), 0u) << a.output;
  EXPECT_GT(a.output.size(), std::string("Hello world\n").size()) << a.output;
  EXPECT_EQ(a.output, b.output);
  // On the guarded device (memory the host cannot touch outside its calls): loading the weights and reading the
  // logits go through the backend's copies, and the text is the cpu's.
  auto guarded = run_command(gen + " --device guarded --max-new-tokens 12 2>/dev/null | cat");
  auto guarded_full = run_command(gen + " --device guarded --max-new-tokens 12 --no-kv-cache 2>/dev/null | cat");
  EXPECT_EQ(guarded.output, a.output);
  EXPECT_EQ(guarded_full.output, a.output);
  auto too_long = run_command(gen + " --max-new-tokens 40");
  EXPECT_EQ(too_long.status, 1) << too_long.output;
  EXPECT_NE(too_long.output.find("exceeds the model's max-position-embeddings 32"), std::string::npos)
      << too_long.output;
}

// --tokenizer-type NullTokenizer end to end: prep of id text, training, and generation whose continuation reads on
// from the prompt ("1 2 3" then " 144 ...": the ids are decoded with the prompt's, as Megatron's detokenize joins
// the whole sequence).
TEST(TrainCli, NullTokenizerIdsPrepTrainAndGenerate) {
  TempDir dir;
  {
    std::ofstream corpus(dir.file("ids.jsonl"));
    uint32_t x = 12345;
    for (int doc = 0; doc < 400; ++doc) {
      corpus << "{\"text\": \"";
      for (int t = 0; t < 40; ++t) corpus << (t ? " " : "") << ((x = x * 1103515245u + 12345u) >> 16) % 200;
      corpus << "\"}\n";
    }
  }
  const std::string null_tokenizer = " --tokenizer-type NullTokenizer --vocab-size 200";
  const auto prep = run_command(std::string(LMFORGE_EXE) + " prep --input " + dir.file("ids.jsonl") +
                                " --output-prefix " + dir.file("ids") + null_tokenizer + " --append-eod");
  ASSERT_EQ(prep.status, 0) << prep.output;
  const std::string ckpt = dir.file("ckpt");
  const auto train = run_command(train_command(dir, {{"--vocab-file", "-"}, {"--merge-file", "-"},
                                                     {"--tokenizer-type", "NullTokenizer"}, {"--vocab-size", "200"},
                                                     {"--data-path", dir.file("ids_text_document")}, {"--save", ckpt}}));
  ASSERT_EQ(train.status, 0) << train.output;
  EXPECT_NE(train.output.find("vocab 201 (padded 256)"), std::string::npos) << train.output;
  const auto gen = run_command(std::string(LMFORGE_EXE) + " generate --load " + ckpt + null_tokenizer +
                               " --prompt '1 2 3' --greedy --ignore-eos --max-new-tokens 5 2>/dev/null | cat");
  ASSERT_EQ(gen.status, 0) << gen.output;
  EXPECT_TRUE(std::regex_match(gen.output, std::regex("1 2 3( [0-9]+){5}\n"))) << gen.output;
}

}  // namespace

// An empty dataset (or one too small for its split) is named, alone and in a blend, before any training.
TEST(TrainCli, EmptyDatasetIsNamed) {
  TempDir dir;
  std::ofstream(dir.file("empty.jsonl")).flush();
  const auto prep = run_command(std::string(LMFORGE_EXE) + " prep --input " + dir.file("empty.jsonl") +
                                " --output-prefix " + dir.file("empty") + kVocab);
  ASSERT_EQ(prep.status, 0) << prep.output;
  const std::string empty = dir.file("empty_text_document");
  const auto alone = run_command(train_command(dir, {{"--data-path", empty}}));
  EXPECT_NE(alone.status, 0);
  EXPECT_NE(alone.output.find("--data-path " + empty + ": the train split has no samples"), std::string::npos)
      << alone.output;
  Flags blend = {{"--data-path", "0.5 " + empty + " 0.5 " + shared_path("data/sample/sample_gpt2_text_document")}};
  std::string cmd = train_command(dir, blend);
  // (the blend's pairs are separate arguments)
  const size_t at = cmd.find("'0.5 ");
  ASSERT_NE(at, std::string::npos);
  cmd.erase(cmd.find('\'', at + 1), 1);
  cmd.erase(at, 1);
  const auto blended = run_command(cmd);
  EXPECT_NE(blended.status, 0);
  EXPECT_NE(blended.output.find("the train split is empty in " + empty + " (0 sequences)"), std::string::npos)
      << blended.output;
}
