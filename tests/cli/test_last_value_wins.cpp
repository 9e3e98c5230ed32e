// argparse's "the last occurrence wins" on CLI11 (cli/last_value_wins.h): scalars, flags and lists, in
// subcommands, with negative numbers and "--opt=value" forms; and every option of the real lmforge commands.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli/commands.h"
#include "cli/last_value_wins.h"

namespace {

using lmforge::cli::keep_last_list_occurrences;
using lmforge::cli::take_last_values;

struct Values {
  int n = 0;
  double x = 0.0;
  bool flag = false;
  std::vector<std::string> paths;
  std::vector<std::string> keys;
};

// `tool sub --n N --x X --flag --paths ... --keys ...` parsed as lmforge's main() parses.
Values parse(std::vector<std::string> args) {
  Values v;
  CLI::App app;
  CLI::App* sub = app.add_subcommand("sub");
  sub->add_option("--n", v.n);
  sub->add_option("--x", v.x);
  sub->add_flag("--flag", v.flag);
  sub->add_option("--paths", v.paths);
  sub->add_option("--keys", v.keys);
  take_last_values(app);
  args = keep_last_list_occurrences(app, args);
  std::reverse(args.begin(), args.end());
  app.parse(args);
  return v;
}

TEST(LastValueWins, ScalarsTakeTheLastOccurrence) {
  const Values v = parse({"sub", "--n", "1", "--x", "2.5", "--n", "7", "--x=-3", "--flag", "--flag"});
  EXPECT_EQ(v.n, 7);
  EXPECT_EQ(v.x, -3.0);
  EXPECT_TRUE(v.flag);
}

TEST(LastValueWins, ListsTakeTheLastListAsArgparseStore) {
  Values v = parse({"sub", "--paths", "a", "b", "--n", "-1", "--paths", "c", "--keys", "text"});
  EXPECT_EQ(v.paths, (std::vector<std::string>{"c"}));
  EXPECT_EQ(v.keys, (std::vector<std::string>{"text"}));
  EXPECT_EQ(v.n, -1);
  // Negative numbers inside a list are values, not options.
  v = parse({"sub", "--paths", "0.5", "x", "--paths", "-0.5", "y", ".3", "z"});
  EXPECT_EQ(v.paths, (std::vector<std::string>{"-0.5", "y", ".3", "z"}));
  // One occurrence: untouched.
  v = parse({"sub", "--paths", "a", "b"});
  EXPECT_EQ(v.paths, (std::vector<std::string>{"a", "b"}));
}

TEST(LastValueWins, EveryLmforgeOptionAcceptsARepeat) {
  CLI::App app;
  lmforge::cli::add_train_command(app);
  lmforge::cli::add_prep_command(app);
  take_last_values(app);
  size_t checked = 0;
  std::vector<CLI::App*> todo{&app};
  while (!todo.empty()) {
    CLI::App* a = todo.back();
    todo.pop_back();
    for (CLI::App* s : a->get_subcommands([](CLI::App*) { return true; })) todo.push_back(s);
    for (const CLI::Option* o : a->get_options()) {
      if (o->get_items_expected_max() > 1) continue;  // lists: keep_last_list_occurrences
      EXPECT_EQ(o->get_multi_option_policy(), CLI::MultiOptionPolicy::TakeLast) << a->get_name() << " " << o->get_name();
      checked++;
    }
  }
  EXPECT_GT(checked, 100u);
}

}  // namespace
