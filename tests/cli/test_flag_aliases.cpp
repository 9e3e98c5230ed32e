// The one table of flag spellings (cli/flags/aliases.h) on the real `lmforge train gpt|bert|t5` declarations: every
// row names an option the commands have, each spelling sets its setting, and a setting given twice across sources
// (Megatron v1, Megatron-DeepSpeed flags, DeepSpeed JSON, fairseq, today's Megatron) with different values is one
// error naming both spellings, with equal values accepted; Megatron v1's --checkpoint-activations rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/flags/aliases.h"
#include "cli/flags/deepspeed_config.h"
#include "cli/last_value_wins.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::cli::Alias;
using lmforge::cli::GivenFlags;
using lmforge::cli::Source;
using lmforge::cli::Transform;
using lmforge::testing::TempDir;

// `lmforge train <model> <args>` parsed as main() parses it and the table's spellings resolved, stopping before the
// command's own callback (training): the command, for reading the canonical options' values, and who gave what.
struct Parsed {
  CLI::App app;
  CLI::App* cmd = nullptr;
  GivenFlags given;
  template <class T>
  T value(const std::string& flag) const {
    return cmd->get_option(flag)->as<T>();
  }
};
struct Resolved {};  // thrown once the options are resolved: the training callback never runs

std::unique_ptr<Parsed> parse(const std::string& model, std::vector<std::string> args) {
  auto p = std::make_unique<Parsed>();
  lmforge::cli::add_train_command(p->app);
  p->cmd = p->app.get_subcommand("train")->get_subcommand(model);
  p->cmd->parse_complete_callback([q = p.get()] {
    lmforge::cli::resolve_aliases(q->cmd, q->given);
    throw Resolved{};
  });
  lmforge::cli::take_last_values(p->app);
  const std::vector<std::string> required = {"train", model, "--num-layers", "2", "--hidden-size", "8",
                                             "--num-attention-heads", "2", "--seq-length", "16"};
  args.insert(args.begin(), required.begin(), required.end());
  if (model == "t5") args.insert(args.end(), {"--decoder-seq-length", "8"});
  args = lmforge::cli::keep_last_list_occurrences(p->app, args);
  std::reverse(args.begin(), args.end());
  try {
    p->app.parse(args);
    ADD_FAILURE() << "the command line was not resolved";
  } catch (const Resolved&) {
  }
  return p;
}

// The Error of resolving `args`, "" when they resolve.
std::string error_of(const std::string& model, const std::vector<std::string>& args) {
  try {
    parse(model, args);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FlagAliases, EveryRowNamesAnOptionOfTheTrainCommands) {
  CLI::App app;
  lmforge::cli::add_train_command(app);
  CLI::App* train = app.get_subcommand("train");
  std::vector<CLI::App*> models = {train->get_subcommand("gpt"), train->get_subcommand("bert"),
                                   train->get_subcommand("t5")};
  for (const Alias& a : lmforge::cli::alias_table()) {
    const std::string canonical(a.canonical), spelling(a.spelling);
    const bool some = std::any_of(models.begin(), models.end(),
                                  [&](CLI::App* m) { return m->get_option_no_throw(canonical) != nullptr; });
    EXPECT_TRUE(some) << canonical << " (the setting of " << spelling << ") is no option of lmforge train";
    if (a.source == Source::kDeepSpeedJson || a.transform == Transform::kComputed) continue;
    // Command-line spellings are options where their setting is (own options, or names of the canonical one).
    for (CLI::App* m : models) {
      const CLI::Option* c = m->get_option_no_throw(canonical);
      if (c == nullptr) continue;
      const bool fairseq_only = a.source == Source::kFairseq && m->get_name() != "bert";
      const bool other_name_elsewhere = a.transform == Transform::kOtherName && !c->check_lname(spelling.substr(2));
      if (fairseq_only || other_name_elsewhere) continue;
      const CLI::Option* own = m->get_option_no_throw(spelling);
      ASSERT_NE(own, nullptr) << spelling << " on train " << m->get_name();
      EXPECT_FALSE(own->get_description().empty()) << spelling << ": --help must explain it";
    }
  }
}

TEST(FlagAliases, EachSpellingSetsItsSetting) {
  auto p = parse("gpt", {"--batch-size", "3", "--warmup", "0.25", "--model-parallel-size", "2",
                         "--pipe-parallel-size", "0", "--zero-reduce-bucket-size", "5000"});
  EXPECT_EQ(p->value<int>("--micro-batch-size"), 3);
  EXPECT_EQ(p->value<double>("--lr-warmup-fraction"), 0.25);
  EXPECT_EQ(p->value<int>("--tensor-model-parallel-size"), 2);
  EXPECT_EQ(p->value<int>("--pipeline-model-parallel-size"), 1);  // DeepSpeed's 0: one stage
  EXPECT_EQ(p->value<int64_t>("--ddp-bucket-size"), 5000);
  EXPECT_EQ(p->given.who("--micro-batch-size"), "--batch-size");
  p = parse("bert", {"--max-sentences", "4", "--max-update", "7", "--clip-norm", "0.5", "--adam-betas",
                     "(0.8, 0.98)", "--dict", "vocab.txt", "--save-dir", "ckpt", "--save-interval-updates", "3",
                     "--data", "shards", "--config_file", "bert.json", "--lr_scheduler", "polynomial_decay"});
  EXPECT_EQ(p->value<int>("--micro-batch-size"), 4);
  EXPECT_EQ(p->value<int64_t>("--train-iters"), 7);
  EXPECT_EQ(p->value<double>("--clip-grad"), 0.5);
  EXPECT_EQ(p->value<double>("--adam-beta1"), 0.8);
  EXPECT_EQ(p->value<double>("--adam-beta2"), 0.98);
  EXPECT_EQ(p->value<std::string>("--vocab-file"), "vocab.txt");
  EXPECT_EQ(p->value<std::string>("--save"), "ckpt");
  EXPECT_EQ(p->value<int>("--save-interval"), 3);
  EXPECT_EQ(p->value<std::string>("--data-path"), "shards");
  EXPECT_EQ(p->value<std::string>("--bert-config-file"), "bert.json");
  EXPECT_EQ(p->value<std::string>("--lr-scheduler"), "polynomial_decay");
  EXPECT_TRUE(p->given.gave("--vocab-file", "--dict"));
  p = parse("t5", {"--norm-epsilon", "1e-6"});
  EXPECT_EQ(p->value<double>("--layernorm-epsilon"), 1e-6);
}

// The check this table exists for: the same setting under two spellings from two sources.
TEST(FlagAliases, ASettingGivenTwiceDifferentlyIsOneErrorNamingBothSpellings) {
  // fairseq and Megatron v1 (both spellings of --micro-batch-size).
  std::string e = error_of("bert", {"--max-sentences", "4", "--batch-size", "2"});
  EXPECT_NE(e.find("--max-sentences 4 and --batch-size 2 disagree"), std::string::npos) << e;
  // fairseq and today's Megatron.
  e = error_of("bert", {"--clip-norm", "1.0", "--clip-grad", "0.5"});
  EXPECT_NE(e.find("--clip-norm 1 and --clip-grad 0.5 disagree"), std::string::npos) << e;
  e = error_of("bert", {"--adam-betas", "(0.9, 0.98)", "--adam-beta2", "0.999"});
  EXPECT_NE(e.find("--adam-betas (0.9, 0.98) and --adam-beta2 0.999 disagree"), std::string::npos) << e;
  e = error_of("gpt", {"--warmup", ".010", "--lr-warmup-fraction", "2e-2"});
  EXPECT_NE(e.find("--warmup 0.01 and --lr-warmup-fraction 0.02 disagree"), std::string::npos) << e;
  e = error_of("bert", {"--max-update", "10", "--train-iters", "20"});
  EXPECT_NE(e.find("--max-update 10 and --train-iters 20 disagree"), std::string::npos) << e;
  // Megatron v1 / Megatron-DeepSpeed flags and today's Megatron.
  e = error_of("gpt", {"--model-parallel-size", "2", "--tensor-model-parallel-size", "1"});
  EXPECT_NE(e.find("--model-parallel-size 2 and --tensor-model-parallel-size 1 disagree"), std::string::npos) << e;
  e = error_of("t5", {"--zero-reduce-bucket-size", "100", "--ddp-bucket-size", "200"});
  EXPECT_NE(e.find("--zero-reduce-bucket-size 100 and --ddp-bucket-size 200 disagree"), std::string::npos) << e;
  e = error_of("gpt", {"--pipe-parallel-size", "0", "--pipeline-model-parallel-size", "2"});
  EXPECT_NE(e.find("--pipe-parallel-size 0 and --pipeline-model-parallel-size 2 disagree"), std::string::npos) << e;
  // Megatron refuses its two names of one T5 setting together, equal or not.
  e = error_of("t5", {"--encoder-seq-length", "16"});
  EXPECT_NE(e.find("give only one of --seq-length and --encoder-seq-length"), std::string::npos) << e;
}

TEST(FlagAliases, ASettingGivenTwiceWithOneValueIsAccepted) {
  auto p = parse("bert", {"--max-sentences", "4", "--batch-size", "4", "--micro-batch-size", "4"});
  EXPECT_EQ(p->value<int>("--micro-batch-size"), 4);
  EXPECT_EQ(p->given.who("--micro-batch-size"), "--micro-batch-size");
  EXPECT_TRUE(p->given.gave("--micro-batch-size", "--max-sentences"));
  p = parse("bert", {"--clip-norm", "1", "--clip-grad", "1.0", "--warmup", ".5", "--lr-warmup-fraction", "0.50"});
  EXPECT_EQ(p->value<double>("--clip-grad"), 1.0);
  EXPECT_EQ(p->value<double>("--lr-warmup-fraction"), 0.5);
  p = parse("gpt", {"--pipe-parallel-size", "0", "--pipeline-model-parallel-size", "1"});
  EXPECT_EQ(p->value<int>("--pipeline-model-parallel-size"), 1);
}

// A DeepSpeed JSON key against a command-line spelling from another source: the same check, naming the key (and
// the file) and the spelling the user wrote.
TEST(FlagAliases, DeepSpeedJsonKeysJoinTheSameCheck) {
  TempDir dir;
  lmforge::testing::write_file(dir.file("ds.json"), R"({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 1})");
  auto apply = [&](const std::string& model, const std::vector<std::string>& args) {
    auto p = parse(model, args);
    lmforge::train::TrainOptions o;
    o.micro_batch_size = p->value<int>("--micro-batch-size");
    o.clip_grad = p->value<double>("--clip-grad");
    std::ostringstream notices;
    lmforge::cli::apply_deepspeed_config(lmforge::cli::read_deepspeed_config(dir.file("ds.json")), o, 1, p->given,
                                         notices);
    return o;
  };
  auto error = [&](const std::string& model, const std::vector<std::string>& args) {
    try {
      apply(model, args);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string e = error("bert", {"--max-sentences", "4"});
  EXPECT_NE(e.find("ds.json: train_micro_batch_size_per_gpu 2 conflicts with --max-sentences 4"), std::string::npos)
      << e;
  e = error("gpt", {"--batch-size", "3", "--clip-grad", "1"});
  EXPECT_NE(e.find("train_micro_batch_size_per_gpu 2 conflicts with --batch-size 3"), std::string::npos) << e;
  e = error("bert", {"--max-sentences", "2", "--clip-norm", "0.25"});
  EXPECT_NE(e.find("gradient_clipping 1 conflicts with --clip-norm 0.25"), std::string::npos) << e;
  const lmforge::train::TrainOptions o = apply("bert", {"--max-sentences", "2", "--clip-norm", "1"});
  EXPECT_EQ(o.micro_batch_size, 2);
  EXPECT_EQ(o.clip_grad, 1.0);
}

// Megatron v1's --checkpoint-activations: full uniform recomputation in chunks of --checkpoint-num-layers.
TEST(FlagAliases, CheckpointActivationsIsFullUniformRecomputation) {
  auto p = parse("gpt", {"--checkpoint-activations", "--checkpoint-num-layers", "2"});
  EXPECT_EQ(p->value<std::string>("--recompute-granularity"), "full");
  EXPECT_EQ(p->value<std::string>("--recompute-method"), "uniform");
  EXPECT_EQ(p->value<int>("--recompute-num-layers"), 2);
  p = parse("bert", {"--checkpoint-activations", "--recompute-method", "uniform"});
  EXPECT_EQ(p->value<std::string>("--recompute-method"), "uniform");
  EXPECT_NE(error_of("gpt", {"--checkpoint-num-layers", "2"}).find("goes with --checkpoint-activations"),
            std::string::npos);
  std::string e = error_of("gpt", {"--checkpoint-activations", "--recompute-granularity", "full"});
  EXPECT_NE(e.find("give only one of --recompute-granularity and --checkpoint-activations"), std::string::npos) << e;
  e = error_of("gpt", {"--checkpoint-activations", "--recompute-method", "block"});
  EXPECT_NE(e.find("--checkpoint-activations (= --recompute-method uniform) and --recompute-method block disagree"),
            std::string::npos)
      << e;
}

// Megatron v1's --checkpoint-num-layers and today's --recompute-num-layers are one setting: given both with
// different values, in either order, they are one error naming both (as every other pair of spellings); equal
// values are accepted.
TEST(FlagAliases, CheckpointNumLayersAndRecomputeNumLayersMustAgree) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--checkpoint-activations", "--checkpoint-num-layers", "2", "--recompute-num-layers",
                                 "1"},
        std::vector<std::string>{"--checkpoint-activations", "--recompute-num-layers", "1", "--checkpoint-num-layers",
                                 "2"}}) {
    const std::string e = error_of("gpt", args);
    EXPECT_NE(e.find("--checkpoint-num-layers 2 and --recompute-num-layers 1 disagree"), std::string::npos) << e;
  }
  auto p = parse("bert", {"--checkpoint-activations", "--checkpoint-num-layers", "2", "--recompute-num-layers", "2"});
  EXPECT_EQ(p->value<int>("--recompute-num-layers"), 2);
}

}  // namespace
