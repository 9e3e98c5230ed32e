// `lmforge train bert --data-path DIR` on NVIDIA's pre-masked HDF5 shards (written by h5py as NVIDIA's
// create_pretraining_data.py writes them, tests/train/make_bert_hdf5_train.py): the original BERT with LAMB and
// NVIDIA's poly warm-up schedule learns; --exit-interval then --load logs the uninterrupted run's lines; DP=2 under
// mpirun equals one process; --print-samples equals the fields NVIDIA's loader derives from the shard arrays (in the
// documented seeded order, re-stated in Python); flag and data errors name what is wrong.
#include <cstdlib>

#include "train/train_run_util.h"

namespace {

using namespace train_runs;
using lmforge::testing::loss_lines;

const std::string kVocab = shared_path("data/vocab/bert-base-uncased-vocab.txt");

// The shards and the expected samples, made once for every test of this file.
class Shards {
 public:
  Shards() {
    const std::string cmd = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                            "/tests/train/make_bert_hdf5_train.py " + dir_.file("fx");
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("fixture script failed: " + cmd);
  }
  std::string path(const std::string& relative) const { return dir_.file("fx/" + relative); }

 private:
  TempDir dir_;
};
const Shards& shards() {
  static const Shards s;
  return s;
}

Flags hdf5_flags() {
  return {{"--data-path", shards().path("shards")}, {"--tokenizer-type", "BertWordPieceLowerCase"},
          {"--vocab-file", kVocab}, {"--bert-post-layernorm", ""}, {"--optimizer", "lamb"},
          {"--lr-decay-style", "nvidia-poly-warmup"}, {"--lr-warmup-fraction", "0.2843"}, {"--lr", "0.2"},
          {"--weight-decay", "0.01"}, {"--clip-grad", "1.0"}, {"--num-layers", "2"}, {"--hidden-size", "32"},
          {"--num-attention-heads", "2"}, {"--seq-length", "32"}, {"--micro-batch-size", "2"},
          {"--global-batch-size", "8"}, {"--train-iters", "20"}, {"--hidden-dropout", "0.1"},
          {"--attention-dropout", "0.1"}, {"--log-interval", "1"}, {"--eval-interval", "10"}, {"--eval-iters", "1"},
          {"--threads", "1"}, {"--make-vocab-size-divisible-by", "8"}};
}

struct HdfRun {
  int status = -1;
  std::string output;
  std::map<std::string, std::vector<float>> scalars;
};

// np ranks under mpirun (0: one plain process); the losses are read back from TensorBoard.
HdfRun run(const TempDir& dir, const std::string& name, int np, const Flags& overrides = {}) {
  Flags flags = hdf5_flags();
  for (const auto& [k, v] : overrides) flags[k] = v;
  const std::string tb = dir.file("tb-" + name);
  if (!flags.count("--print-samples")) flags["--tensorboard-dir"] = tb;
  std::string cmd = "timeout 300 env OMP_NUM_THREADS=1 " + (np > 0 ? mpirun_prefix(np) : std::string()) +
                    LMFORGE_EXE + " train bert";
  for (const auto& [k, v] : flags)
    if (v != "-") cmd += " " + k + (v.empty() ? "" : " '" + v + "'");
  const auto c = run_command(cmd);
  HdfRun r;
  r.status = c.status;
  r.output = c.output;
  if (c.status == 0 && fs::exists(tb)) r.scalars = read_scalars(tb);
  return r;
}

std::vector<std::string> lines_of(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

TEST(TrainBertHdf5, LearnsWithLambAndNvidiaScheduleAndLogsNsp) {
  TempDir dir;
  const HdfRun r = run(dir, "learn", 0);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<float>& lm = r.scalars.at("lm loss");
  const std::vector<float>& nsp = r.scalars.at("nsp loss");
  ASSERT_EQ(lm.size(), 20u);
  ASSERT_EQ(nsp.size(), 20u);
  std::printf("[ hdf5 ] lm loss %.4f -> %.4f, nsp loss %.4f -> %.4f over 20 steps\n", lm.front(), lm.back(),
              nsp.front(), nsp.back());
  EXPECT_LT(lm.back(), lm.front() - 3.0f) << r.output;  // from ~ln(30528) towards the 64-word language
  EXPECT_EQ(r.scalars.count("sop loss"), 0u);
  EXPECT_EQ(r.scalars.at("lm loss validation").size(), 3u);  // iterations 10, 20 and the end of training
  EXPECT_EQ(r.scalars.count("lm loss test"), 0u);             // no test split
  EXPECT_NE(r.output.find("bert train: NVIDIA HDF5 shards, 3 files, 40 samples per epoch, sequence length 32"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bert validation: NVIDIA HDF5 shards, 1 files, 8 samples per epoch"), std::string::npos);
  EXPECT_NE(r.output.find("| nsp loss: "), std::string::npos);
}

TEST(TrainBertHdf5, ResumeLogsTheUninterruptedRun) {
  TempDir dir;
  const Flags base = {{"--save", dir.file("ckpt")}, {"--save-interval", "100"}};
  Flags first = base;
  first["--exit-interval"] = "7";
  const HdfRun a = run(dir, "part1", 0, first);
  ASSERT_EQ(a.status, 0) << a.output;
  Flags second = base;
  second["--load"] = dir.file("ckpt");
  const HdfRun b = run(dir, "part2", 0, second);
  ASSERT_EQ(b.status, 0) << b.output;
  const HdfRun whole = run(dir, "whole", 0);
  ASSERT_EQ(whole.status, 0) << whole.output;
  std::vector<std::string> resumed = loss_lines(a.output);
  for (const std::string& l : loss_lines(b.output)) resumed.push_back(l);
  EXPECT_EQ(resumed.size(), 23u);  // 20 iterations, 3 evaluations
  EXPECT_EQ(resumed, loss_lines(whole.output)) << a.output << b.output;
  EXPECT_NE(b.output.find("loaded checkpoint"), std::string::npos) << b.output;
}

TEST(TrainBertHdf5, DataParallelEqualsOneProcess) {
  TempDir dir;
  const HdfRun single = run(dir, "single", 0);
  const HdfRun dp2 = run(dir, "dp2", 2);
  ASSERT_EQ(single.status, 0) << single.output;
  ASSERT_EQ(dp2.status, 0) << dp2.output;
  for (const std::string tag : {"lm loss", "nsp loss", "grad-norm", "lm loss validation", "nsp loss validation"}) {
    ASSERT_TRUE(single.scalars.count(tag)) << tag;
    ASSERT_TRUE(dp2.scalars.count(tag)) << tag;
    const double d = max_relative_difference(dp2.scalars.at(tag), single.scalars.at(tag));
    std::printf("[ parity ] BERT HDF5 DP=2 %s: max relative difference %.3g\n", tag.c_str(), d);
    EXPECT_LT(d, 1e-5) << tag;
  }
}

TEST(TrainBertHdf5, PrintSamplesEqualNvidiasLoaderInTheDocumentedOrder) {
  TempDir dir;
  const HdfRun r = run(dir, "print", 0, {{"--print-samples", "50"}});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<std::string> train = lines_of(r.output, "{\"split\": \"train\"");
  const std::vector<std::string> valid = lines_of(r.output, "{\"split\": \"valid\"");
  EXPECT_TRUE(lines_of(r.output, "{\"split\": \"test\"").empty());
  const std::vector<std::string> want_train = lines_of(read_file(shards().path("expected_train.jsonl")), "{");
  const std::vector<std::string> want_valid = lines_of(read_file(shards().path("expected_valid.jsonl")), "{");
  ASSERT_EQ(train.size(), 50u) << r.output;  // more than the 40 of one epoch
  for (size_t i = 0; i < train.size(); i++) EXPECT_EQ(train[i], want_train[i]) << "train sample " << i;
  // Validation: Megatron's count (eval-iters x global batch x (train-iters / eval-interval + 1) = 24) in whole
  // epochs of 8.
  ASSERT_EQ(valid.size(), 24u) << r.output;
  for (size_t i = 0; i < valid.size(); i++) EXPECT_EQ(valid[i], want_valid[i]) << "valid sample " << i;
}

TEST(TrainBertHdf5, ErrorsNameTheProblem) {
  TempDir dir;
  auto expect_error = [&](const std::string& name, const Flags& flags, const std::vector<std::string>& words) {
    const HdfRun r = run(dir, name, 0, flags);
    EXPECT_NE(r.status, 0) << name << ":\n" << r.output;
    for (const std::string& w : words) EXPECT_NE(r.output.find(w), std::string::npos) << name << ": " << w << "\n" << r.output;
  };
  expect_error("seq", {{"--seq-length", "64"}, {"--max-position-embeddings", "64"}},
               {"--seq-length 64", "sequence length 32", "books_training_2.hdf5"});
  expect_error("split", {{"--split", "949,50,1"}}, {"--split 949,50,1", "file name"});
  expect_error("mask", {{"--mask-prob", "0.2"}}, {"--mask-prob", "masked"});
  const std::string bad = shards().path("bad_vocab/wiki_training_0.hdf5");
  expect_error("vocab", {{"--data-path", shards().path("bad_vocab")}},
               {bad, "token id 30524", "input_ids", "outside the vocabulary of 30524"});
  // A glob of the training shards alone: trains, with the missing validation said.
  const HdfRun glob = run(dir, "glob", 0, {{"--data-path", shards().path("train_only/*_training_*.hdf5")},
                                        {"--train-iters", "2"}});
  ASSERT_EQ(glob.status, 0) << glob.output;
  EXPECT_NE(glob.output.find("bert validation: no validation shards"), std::string::npos) << glob.output;
  EXPECT_EQ(glob.output.find("validation loss"), std::string::npos) << glob.output;
}

// `train gpt` and `train t5` given the shard directory (or one shard) say that HDF5 shards are `train bert` data
// (before: "<dir>.idx: cannot open").
TEST(TrainBertHdf5, GptAndT5GivenShardsSayTheyAreTrainBertData) {
  const std::string common = " --num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 32"
                             " --max-position-embeddings 32 --micro-batch-size 2 --train-iters 1 --lr 0.0001";
  const std::string gpt = " --tokenizer-type GPT2BPETokenizer --vocab-file " +
                          shared_path("data/vocab/gpt2-vocab.json") + " --merge-file " +
                          shared_path("data/vocab/gpt2-merges.txt");
  const std::string t5 = " --tokenizer-type BertWordPieceLowerCase --vocab-file " + kVocab +
                         " --vocab-extra-ids 100 --decoder-seq-length 16 --decoder-num-layers 1";
  for (const std::string& data : {shards().path("shards"), shards().path("shards/wiki_training_0.hdf5")})
    for (const auto& [model, flags] : {std::pair{std::string("gpt"), gpt}, std::pair{std::string("t5"), t5}}) {
      const auto r = run_command("timeout 120 " + std::string(LMFORGE_EXE) + " train " + model + " --data-path '" +
                                 data + "'" + common + flags);
      EXPECT_NE(r.status, 0) << model << " " << data << "\n" << r.output;
      const std::vector<std::string> words = {"--data-path " + data, "HDF5 shards", "`lmforge train bert` data",
                                              "`lmforge train " + model + "`"};
      for (const std::string& w : words)
        EXPECT_NE(r.output.find(w), std::string::npos) << model << " " << data << ": " << w << "\n" << r.output;
    }
}

}  // namespace
