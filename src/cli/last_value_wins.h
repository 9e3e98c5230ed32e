// defines: take_last_values(), keep_last_list_occurrences(): Python argparse's "a flag given twice takes the last
//          value" for every lmforge command, as Megatron, DeepSpeed and fairseq scripts rely on
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace lmforge::cli {

// Every single-valued option of `app` and its subcommands (recursively) takes the last of repeated occurrences
// (argparse's store action) instead of CLI11's "At Most 1 required but received 2". Call once all options exist.
void take_last_values(CLI::App& app);

// argparse's nargs='*'/'+' store action replaces the list on every occurrence: `--data-path a b --data-path c`
// means [c]. CLI11 would append ([a b c]), so before parsing, every earlier occurrence of a list-valued option
// (with the values that follow it up to the next option) is dropped from `args` (argv without the program name,
// in order). Subcommand names are followed as CLI11 does; tokens after "--" are left alone.
// lmforge's own options whose occurrences add up ("repeat the flag": prep --input, merge --input-prefix, inspect
// --document; argparse's action='append') are exempt from both rules: mark them with this (CLI11's TakeAll policy).
CLI::Option* repeatable(CLI::Option* option);

std::vector<std::string> keep_last_list_occurrences(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace lmforge::cli
