// The one range check of every lmforge command's numeric flags (cli/flags/value_range.h): a positive flag given 0
// says "must be at least 1", a bounded one names its bounds as a user writes them, never CLI11's Range text (the
// limits printed with std::to_string: 309 digits for "any positive number").
#include <gtest/gtest.h>

#include <functional>

#include "cli/commands.h"
#include "cli/flags/value_range.h"
#include "test_util.h"

namespace {

using lmforge::testing::run_command;

std::string message(const CLI::Validator& v, std::string value) {
  return v(value);
}

TEST(ValueRange, MessagesNameTheRuleAndTheValue) {
  EXPECT_EQ(message(lmforge::cli::at_least(1), "0"), "must be at least 1, got 0");
  EXPECT_EQ(message(lmforge::cli::at_least(1), "1"), "");
  EXPECT_EQ(message(lmforge::cli::at_least(0), "-2"), "must be 0 or more, got -2");
  EXPECT_EQ(message(lmforge::cli::greater_than(0), "0"), "must be greater than 0, got 0");
  EXPECT_EQ(message(lmforge::cli::greater_than(0), "1e-9"), "");
  EXPECT_EQ(message(lmforge::cli::in_range(1, 65535), "70000"), "must be between 1 and 65535, got 70000");
  EXPECT_EQ(message(lmforge::cli::in_range(0, 0.999), "1"), "must be between 0 and 0.999, got 1");
  EXPECT_EQ(message(lmforge::cli::at_least(1), "ten"), "must be a number, got 'ten'");
  EXPECT_EQ(message(lmforge::cli::at_least(1), "nan"), "must be a number, got 'nan'");
}

// Every option of every command that takes one value, given 0, -1 and a huge number: whatever it refuses is said
// in a short line, never with CLI11's range text.
TEST(ValueRange, EveryCommandsNumericFlagsSayTheirRangeReadably) {
  CLI::App app;
  lmforge::cli::add_prep_command(app);
  lmforge::cli::add_merge_command(app);
  lmforge::cli::add_inspect_command(app);
  lmforge::cli::add_train_command(app);
  lmforge::cli::add_generate_command(app);
  lmforge::cli::add_tokenizer_command(app);
  int checked = 0;
  std::function<void(CLI::App*)> visit = [&](CLI::App* cmd) {
    for (CLI::Option* o : cmd->get_options()) {
      if (o->get_type_size_max() != 1 || o->get_items_expected_max() != 1) continue;
      for (const char* value : {"0", "-1", "1e300"}) {
        o->clear();
        o->add_result(value);
        try {
          o->run_callback();
        } catch (const CLI::ValidationError& e) {
          const std::string m = e.what();
          checked++;
          EXPECT_EQ(m.find("not in range"), std::string::npos) << cmd->get_name() << " " << o->get_name() << ": " << m;
          EXPECT_LT(m.size(), 200u) << cmd->get_name() << " " << o->get_name() << ": " << m;
        } catch (const CLI::Error&) {  // conversion errors (a fraction for an integer, ...): CLI11's own words
        } catch (const std::exception&) {
        }
      }
      o->clear();
    }
    for (CLI::App* sub : cmd->get_subcommands([](CLI::App*) { return true; })) visit(sub);
  };
  visit(&app);
  EXPECT_GT(checked, 30);  // the positive and bounded flags of train, prep, ... were reached
}

// As a user meets it.
TEST(ValueRange, CommandLineSaysMustBeAtLeastOne) {
  const std::string train = std::string(LMFORGE_EXE) +
                            " train bert --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                            "--micro-batch-size 2 --train-iters 1 --lr 1e-4";
  struct Case {
    const char* flags;
    const char* said;
  };
  for (const Case& c : {Case{"--update-freq 0", "--update-freq: must be at least 1, got 0"},
                        Case{"--batch-size 0", "--batch-size: must be at least 1, got 0"},
                        Case{"--distributed-timeout-minutes 0", "must be greater than 0, got 0"},
                        Case{"--distributed-port 70000", "must be between 1 and 65535, got 70000"},
                        Case{"--zero-stage 4", "must be between 0 and 3, got 4"}}) {
    const auto r = run_command(train + " " + c.flags);
    EXPECT_NE(r.status, 0) << c.flags;
    EXPECT_NE(r.output.find(c.said), std::string::npos) << c.flags << ": " << r.output;
    EXPECT_EQ(r.output.find("179769313486"), std::string::npos) << r.output;
  }
}

}  // namespace
