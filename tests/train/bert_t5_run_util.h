// defines: helpers of the tests that run `lmforge train bert` / `lmforge train t5` on Megatron's sentence-level
//          sample dataset: a tiny model's flags, run() (one process or mpirun, losses read back from TensorBoard;
//          a one-process reference made once per build) and expect_same_losses()
#pragma once
#include <map>
#include <string>
#include <vector>

#include "train/train_run_util.h"

// One executable includes this once (after train_run_util.h): plain definitions are fine.
namespace bert_t5_runs {

using namespace train_runs;
using lmforge::testing::loss_lines;

const std::string kVocab = shared_path("data/vocab/bert-base-uncased-vocab.txt");
const std::string kData = shared_path("data/sample/sample_bert_text_sentence");

Flags model_flags(const TempDir& dir, const std::string& model) {
  Flags f = {{"--hidden-dropout", "0.1"}, {"--attention-dropout", "0.1"}, {"--num-layers", "2"},
             {"--hidden-size", "32"}, {"--num-attention-heads", "2"}, {"--max-position-embeddings", "64"},
             {"--micro-batch-size", "2"}, {"--global-batch-size", "8"}, {"--lr", "0.003"},
             {"--lr-decay-style", "linear"}, {"--lr-warmup-iters", "2"}, {"--weight-decay", "0.01"},
             {"--clip-grad", "1.0"}, {"--split", "949,50,1"}, {"--log-interval", "1"}, {"--eval-interval", "5"},
             {"--eval-iters", "1"}, {"--data-cache-path", dir.file("cache-" + model)}, {"--train-iters", "10"},
             {"--threads", "1"}, {"--tokenizer-type", "BertWordPieceLowerCase"}, {"--vocab-file", kVocab},
             {"--data-path", kData}, {"--make-vocab-size-divisible-by", "128"}};
  if (model == "bert") {
    f["--seq-length"] = "64";
    f["--optimizer"] = "lamb";
  } else {
    f["--encoder-seq-length"] = "64";
    f["--decoder-seq-length"] = "32";
    f["--vocab-extra-ids"] = "100";
  }
  return f;
}

// `flags` on the sentence-level sample with a 2,996-word vocabulary (train/tiny_vocab_data.h) unless they name
// their own: for the tests that compare runs with one another (a vocabulary of 30,522 made the LM head nearly all
// of every tiny run).
Flags tiny_vocab(Flags flags) {
  const lmforge::testing::TinyBertVocab tiny = lmforge::testing::tiny_bert_vocab();
  flags.emplace("--vocab-file", tiny.vocab_file);
  flags.emplace("--data-path", tiny.data_prefix);
  return flags;
}

std::string command(const TempDir& dir, const std::string& model, const Flags& overrides) {
  Flags flags = model_flags(dir, model);
  for (const auto& [k, v] : overrides) flags[k] = v;
  std::string cmd = std::string(LMFORGE_EXE) + " train " + model;
  for (const auto& [k, v] : flags)
    if (v != "-") cmd += " " + k + (v.empty() ? "" : " '" + v + "'");
  return cmd;
}

// Runs on np ranks (0: one plain process) and reads every loss back from TensorBoard; `reference`: a one-process
// run made once per build (train_runs::reference_run).
using ModelRun = ScalarRun;
ModelRun run(const TempDir& dir, const std::string& model, const std::string& name, int np, Flags flags = {},
             bool reference = false) {
  const std::string tb = dir.file("tb-" + model + "-" + name);
  flags["--tensorboard-dir"] = tb;
  const std::string cmd = "timeout 300 env OMP_NUM_THREADS=1 " + (np > 0 ? mpirun_prefix(np) : std::string()) +
                          command(dir, model, flags);
  return reference && np == 0 ? reference_run(dir, cmd, tb) : run_and_read(cmd, tb);
}

void expect_same_losses(const ModelRun& got, const ModelRun& want, const std::vector<std::string>& tags, double tolerance,
                        const std::string& what) {
  ASSERT_EQ(got.status, 0) << what << ":\n" << got.output;
  ASSERT_EQ(want.status, 0) << want.output;
  for (const std::string& tag : tags) {
    const auto g = got.scalars.find(tag), w = want.scalars.find(tag);
    ASSERT_NE(w, want.scalars.end()) << tag;
    ASSERT_NE(g, got.scalars.end()) << what << " " << tag;
    ASSERT_EQ(g->second.size(), w->second.size()) << what << " " << tag;
    const double d = max_relative_difference(g->second, w->second);
    std::printf("[ parity ] %s %s: max relative difference %.3g over %zu values\n", what.c_str(), tag.c_str(), d,
                w->second.size());
    EXPECT_LT(d, tolerance) << what << " " << tag;
  }
}

}  // namespace bert_t5_runs
