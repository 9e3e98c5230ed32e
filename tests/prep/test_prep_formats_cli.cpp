// `lmforge prep` with --input-format / --output-format as users type it: the command lines (NVIDIA's shard,
// the word-level dataset), flags of another format refused, nvidia-hdf5 in static and claim mode, and `lmforge train
// bert` on the shards prep made (NVIDIA's flavour and fairseq's flags).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace {

using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

const std::string kExe = LMFORGE_EXE;
std::string bert_vocab() { return shared_path("data/vocab/bert-base-uncased-vocab.txt"); }

TEST(PrepFormatsCli, NvidiaHdf5CommandLineReproducesNvidiasShard) {
  TempDir dir;
  const auto r = run_command(kExe + " prep --input " + shared_path("data/nvhdf5/sample_sentences.txt") +
                             " --input-format sentences --output-format nvidia-hdf5 --vocab-file " + bert_vocab() +
                             " --do-lower-case --max-seq-length 128 --max-predictions-per-seq 20 --masked-lm-prob 0.15"
                             " --random-seed 12345 --dupe-factor 5 --output-prefix " + dir.file("X"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("instances:      68,693"), std::string::npos) << r.output;
  const auto c = run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                             "/tests/prep/nvidia_pretraining_reference.py compare " + dir.file("X.hdf5") + " " +
                             shared_path("data/nvhdf5/sample_seq128.hdf5"));
  EXPECT_EQ(c.status, 0) << c.output;
}

TEST(PrepFormatsCli, WordLevelCommandLineWritesTheScriptsBytes) {
  TempDir dir;
  write_file(dir.file("vocab.json"), "{\"<unk>\": 1, \"<|endoftext|>\": 0, \"hello\": 2, \"world\": 3}");
  write_file(dir.file("raw.txt"), "hello  world\n\nhello\xe3\x80\x80stranger world\r\nworld\n");
  const auto r = run_command(kExe + " prep --input " + dir.file("raw.txt") +
                             " --input-format text --tokenizer-type WordLevel --vocab-file " + dir.file("vocab.json") +
                             " --append-eod --eod-token '<|endoftext|>' --output-prefix " + dir.file("X"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto ref = run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                               "/tests/prep/word_level_reference.py " + dir.file("raw.txt") + " " +
                               dir.file("vocab.json") + " " + dir.file("ref"));
  ASSERT_EQ(ref.status, 0) << ref.output;
  EXPECT_TRUE(read_file(dir.file("X_text_sentence.bin")) == read_file(dir.file("ref.bin")));
  EXPECT_TRUE(read_file(dir.file("X_text_sentence.idx")) == read_file(dir.file("ref.idx")));
}

TEST(PrepFormatsCli, FlagsOfAnotherFormatAreRefused) {
  TempDir dir;
  write_file(dir.file("a.jsonl"), "{\"text\": \"x\"}\n");
  const std::string base = kExe + " prep --input " + dir.file("a.jsonl") + " --output-prefix " + dir.file("o") +
                           " --vocab-file " + bert_vocab() + " --tokenizer-type BertWordPieceLowerCase";
  auto r = run_command(base + " --max-seq-length 128");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--max-seq-length applies to --output-format nvidia-hdf5"), std::string::npos) << r.output;
  r = run_command(base + " --dupe_factor 5");  // NVIDIA's own spelling is the same flag
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--dupe-factor applies to --output-format nvidia-hdf5"), std::string::npos) << r.output;
  r = run_command(base + " --output-format nvidia-hdf5 --input-format text");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("does not read --input-format text"), std::string::npos) << r.output;
  r = run_command(base + " --input-format megatron");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--output-format megatron does not read --input-format megatron"), std::string::npos)
      << r.output;
  r = run_command(base + " --output-format parquet");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("nvidia-hdf5"), std::string::npos) << r.output;
  r = run_command(base + " --output-format nvidia-hdf5 --tokenizer-type GPT2BPETokenizer");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("NVIDIA's BertTokenizer"), std::string::npos) << r.output;
  r = run_command(kExe + " prep --help");
  for (const char* flag : {"--input-format", "--output-format", "--max-seq-length", "--max-predictions-per-seq",
                           "--masked-lm-prob", "--short-seq-prob", "--dupe-factor", "--random-seed", "--do-lower-case",
                           "--n-training-shards", "--n-test-shards", "--fraction-test-set", "--unk-token"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

// Many processes: one output per input file (as NVIDIA runs its script per text shard), by static rank and by
// claiming; every file equals the re-statement of NVIDIA's script run on that input alone.
TEST(PrepFormatsCli, ShardedAndClaimModesWriteOneShardPerInputFile) {
  TempDir dir;
  std::ifstream in(shared_path("data/nvhdf5/sample_sentences.txt"));
  std::vector<std::string> parts(4);
  std::string line;
  for (int blank = 0; blank < 200 && std::getline(in, line);) {
    parts[size_t(blank % 4)] += line + "\n";
    if (line.empty()) ++blank;
  }
  std::string inputs;
  std::filesystem::create_directories(dir.file("text"));
  for (size_t i = 0; i < parts.size(); ++i) {
    write_file(dir.file("text/books_training_" + std::to_string(i) + ".txt"), parts[i]);
    inputs += " " + dir.file("text/books_training_" + std::to_string(i) + ".txt");
  }
  const std::string common = kExe + " prep --input" + inputs + " --output-format nvidia-hdf5 --vocab-file " +
                             bert_vocab() + " --dupe-factor 2 --workers 1";
  for (int rank : {0, 1}) {
    const auto r = run_command(common + " --rank " + std::to_string(rank) + " --world-size 2 --output-prefix " +
                               dir.file("static/"));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("wrote 2 shards"), std::string::npos) << r.output;
  }
  // Two claimers at once, and a third after the end.
  const auto both = run_command("(" + common + " --claim --output-prefix " + dir.file("claim/") + " > " +
                                dir.file("c1.log") + " 2>&1 & " + common + " --claim --output-prefix " +
                                dir.file("claim/") + " > " + dir.file("c2.log") + " 2>&1; wait)");
  ASSERT_EQ(both.status, 0) << both.output;
  for (const char* log : {"c1.log", "c2.log"})
    EXPECT_NE(read_file(dir.file(log)).find("nothing left to claim"), std::string::npos) << read_file(dir.file(log));
  const auto late = run_command(common + " --claim --output-prefix " + dir.file("claim/"));
  EXPECT_EQ(late.status, 0) << late.output;
  EXPECT_NE(late.output.find("nothing left to claim"), std::string::npos) << late.output;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string name = "books_training_" + std::to_string(i);
    const std::string ref = dir.file(name + "_ref.hdf5");
    const auto made = run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                                  "/tests/prep/nvidia_pretraining_reference.py make --dupe-factor 2 --vocab " +
                                  bert_vocab() + " --output " + ref + " --input " + dir.file("text/" + name + ".txt"));
    ASSERT_EQ(made.status, 0) << made.output;
    for (const char* mode : {"static/", "claim/"}) {
      const auto c = run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                                 "/tests/prep/nvidia_pretraining_reference.py compare " +
                                 dir.file(std::string(mode) + name + ".hdf5") + " " + ref);
      EXPECT_EQ(c.status, 0) << mode << name << ": " << c.output;
    }
  }
  // A claimer with other flags does not join.
  const auto other = run_command(common + " --claim --random-seed 1 --output-prefix " + dir.file("claim/"));
  EXPECT_NE(other.status, 0);
  EXPECT_NE(other.output.find("other inputs or flags"), std::string::npos) << other.output;
}

// The shards prep writes train: NVIDIA's flavour (--data-path DIR of *_training_*/_test_* files) and fairseq's flags.
TEST(PrepFormatsCli, TrainBertRunsOnTheShardsPrepWrote) {
  TempDir dir;
  std::ifstream in(shared_path("data/nvhdf5/sample_sentences.txt"));
  std::string head, line;
  for (int blank = 0; blank < 150 && std::getline(in, line);) {
    head += line + "\n";
    if (line.empty()) ++blank;
  }
  write_file(dir.file("head.txt"), head);
  auto r = run_command(kExe + " prep --input " + dir.file("head.txt") + " --output-format nvidia-hdf5 --vocab-file " +
                       bert_vocab() + " --max-seq-length 32 --max-predictions-per-seq 5 --dupe-factor 2"
                       " --n-training-shards 2 --n-test-shards 1 --output-prefix " + dir.file("shards/books"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string common = " --num-layers 2 --hidden-size 32 --num-attention-heads 2 --threads 1"
                             " --make-vocab-size-divisible-by 8 --log-interval 1";
  r = run_command(kExe + " train bert --data-path " + dir.file("shards") +
                  " --tokenizer-type BertWordPieceLowerCase --vocab-file " + bert_vocab() +
                  " --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4"
                  " --train-iters 3 --lr 0.001 --eval-interval 3 --eval-iters 1" + common);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("iteration"), std::string::npos) << r.output;
  write_file(dir.file("bert_config.json"),
             "{\"vocab_size\": 30528, \"hidden_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
             "\"intermediate_size\": 64, \"hidden_act\": \"gelu\", \"hidden_dropout_prob\": 0.1, "
             "\"attention_probs_dropout_prob\": 0.1, \"max_position_embeddings\": 32, \"type_vocab_size\": 2, "
             "\"initializer_range\": 0.02}");
  r = run_command(kExe + " train bert --task bert --data " + dir.file("shards") + " --dict " + bert_vocab() +
                  " --config_file " + dir.file("bert_config.json") +
                  " --max-sentences 2 --max-update 3 --lr-scheduler polynomial_decay --total-num-update 3 --lr 0.001"
                  " --optimizer adam --valid-subset valid"
                  " --num-workers 0 --threads 1 --make-vocab-size-divisible-by 8 --log-interval 1");
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
