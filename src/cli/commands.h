// defines: one add_<name>_command() per lmforge subcommand. Each command owns its options struct and flags in its
// own file (cli/<name>_command.cpp); main.cpp only lists them.
#pragma once
#include <CLI/CLI.hpp>

namespace lmforge::cli {

void add_prep_command(CLI::App& app);
void add_merge_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_tokenizer_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_check_command(CLI::App& app);

}  // namespace lmforge::cli
