// argparse's abbreviated long flags on every lmforge command (cli/flags/abbreviations.h): a prefix resolves among
// the imitated program's flags first (`prep --vocab` is --vocab-file, as in Megatron's preprocess_data.py, although
// lmforge's prep also has --vocab-extra-ids), then among lmforge's; an ambiguous one is an error listing the
// candidates; exact names, option values and everything after "--" stay as they are.
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/flags/abbreviations.h"
#include "test_util.h"

namespace {

using lmforge::testing::run_command;
using Args = std::vector<std::string>;

// Every lmforge command, as main() declares them.
struct Commands {
  CLI::App app;
  Commands() {
    lmforge::cli::add_prep_command(app);
    lmforge::cli::add_merge_command(app);
    lmforge::cli::add_inspect_command(app);
    lmforge::cli::add_train_command(app);
    lmforge::cli::add_generate_command(app);
    lmforge::cli::add_tokenizer_command(app);
  }
  Args expand(const Args& args) const { return lmforge::cli::expand_abbreviations(app, args); }
  std::string error(const Args& args) const {
    try {
      expand(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  }
};

TEST(FlagAbbreviations, PrepResolvesAmongPreprocessDataFlagsFirst) {
  const Commands c;
  EXPECT_EQ(c.expand({"prep", "--vocab", "gpt2-vocab.json", "--merge", "m.txt", "--out", "x", "--dataset", "mmap"}),
            (Args{"prep", "--vocab-file", "gpt2-vocab.json", "--merge-file", "m.txt", "--output-prefix", "x",
                  "--dataset-impl", "mmap"}));
  EXPECT_EQ(c.expand({"prep", "--vocab=v.json", "--app"}), (Args{"prep", "--vocab-file=v.json", "--append-eod"}));
  // Not a preprocess_data.py flag: lmforge's own flags decide.
  EXPECT_EQ(c.expand({"prep", "--vocab-e", "100", "--max-seq", "128"}),
            (Args{"prep", "--vocab-extra-ids", "100", "--max-seq-length", "128"}));
  const std::string e = c.error({"prep", "--tokenizer", "GPT2BPETokenizer"});
  EXPECT_NE(e.find("lmforge prep: ambiguous option: --tokenizer could match --tokenizer-type, "
                   "--tokenizer-name-or-path, --tokenizer-model"),
            std::string::npos)
      << e;
}

TEST(FlagAbbreviations, TrainResolvesMegatronsFlagsAndRefusesAmbiguousOnes) {
  const Commands c;
  EXPECT_EQ(c.expand({"train", "gpt", "--num-lay", "2", "--micro", "4", "--train-it", "5", "--thr", "1"}),
            (Args{"train", "gpt", "--num-layers", "2", "--micro-batch-size", "4", "--train-iters", "5", "--threads",
                  "1"}));
  EXPECT_EQ(c.expand({"train", "t5", "--kv", "16", "--encoder-seq", "64"}),
            (Args{"train", "t5", "--kv-channels", "16", "--encoder-seq-length", "64"}));
  // Megatron's arguments.py has --vocab-file, --vocab-size and --vocab-extra-ids: argparse refuses --vocab there.
  const std::string e = c.error({"train", "bert", "--vocab", "vocab.txt"});
  EXPECT_NE(e.find("lmforge train bert: ambiguous option: --vocab could match --vocab-file, --vocab-size, --vocab-extra-ids"),
            std::string::npos)
      << e;
}

TEST(FlagAbbreviations, ExactNamesValuesAndUnknownFlagsStay) {
  const Commands c;
  // A value that is a subcommand's name, list values, a negative number, and an exact name that prefixes others.
  const Args args = {"train", "gpt", "--data-path", "train", "--split", "9,1,0", "--lr", "-1", "--save", "s",
                     "--save-interval", "2", "--nonexistent-flag", "x"};
  EXPECT_EQ(c.expand(args), args);
  const Args lists = {"prep", "--input", "a.json", "--json-keys", "text", "title", "--output-prefix", "o"};
  EXPECT_EQ(c.expand(lists), lists);
  EXPECT_EQ(c.expand({"merge", "--", "--vocab"}), (Args{"merge", "--", "--vocab"}));
}

// As a user meets it: the abbreviation works on the command line, and an ambiguous one exits non-zero naming the
// candidates.
TEST(FlagAbbreviations, CommandLineAcceptsAbbreviationsAndNamesAmbiguity) {
  const auto help = run_command(std::string(LMFORGE_EXE) + " prep --hel");
  EXPECT_EQ(help.status, 0) << help.output;
  EXPECT_NE(help.output.find("--vocab-file"), std::string::npos);
  const auto r = run_command(std::string(LMFORGE_EXE) + " prep --input x --output-prefix y --tokenizer GPT2BPETokenizer");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("ambiguous option: --tokenizer could match --tokenizer-type"), std::string::npos) << r.output;
}

}  // namespace
