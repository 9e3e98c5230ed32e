// defines: expand_abbreviations(): Python argparse's abbreviated long flags (`--vocab` for `--vocab-file`) on every
//          lmforge command, resolved first among the flags of the program the command imitates (Megatron's
//          preprocess_data.py for `prep`, merge_preprocessed_data.py for `merge`, Megatron's pretrain_*.py and their
//          DeepSpeed/fairseq spellings for `train`), then among lmforge's own
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace lmforge::cli {

// Rewrites `args` (argv without the program name, in order) so that every long-flag token that is not a flag of
// its command but the start of one or more ("--vocab", "--vocab=x") names the flag in full. Resolution, as argparse
// (allow_abbrev, its default) does it in the imitated program:
//   1. a flag the command has under that exact name stays;
//   2. the imitated program's flags starting with the prefix: one → that flag; several → CLI::ParseError listing
//      them (argparse refuses the same line: "ambiguous option");
//   3. none there: lmforge's flags of the command starting with it: one → it; several → the same error;
//   4. none at all: left for CLI11 to report as an unknown flag.
// Several names of one option (--seq-length, --encoder-seq-length) count as one match when all match. Subcommand
// names are followed as CLI11 does; option values are skipped; tokens after "--" are left alone.
std::vector<std::string> expand_abbreviations(const CLI::App& app, const std::vector<std::string>& args);

// The flags of the program `command` imitates ("prep", "merge", "train gpt", ...: the command's name path below
// lmforge), as that program spells them; empty when the command imitates none (lmforge's own commands).
std::vector<std::string> imitated_program_flags(const CLI::App& command);

}  // namespace lmforge::cli
