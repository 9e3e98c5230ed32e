// lmforge: one executable, one subcommand per job. Errors a user can cause print one line and exit 1.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"lmforge: prepare corpora and pretrain GPT/BERT-class language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lmforge 0.1.0");
  lmforge::cli::add_prep_command(app);
  lmforge::cli::add_merge_command(app);
  lmforge::cli::add_inspect_command(app);
  lmforge::cli::add_train_command(app);
  lmforge::cli::add_generate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const lmforge::Error& e) {
    std::string name = app.get_subcommands().empty() ? "" : " " + app.get_subcommands()[0]->get_name();
    std::fprintf(stderr, "lmforge%s: error: %s\n", name.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lmforge: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
