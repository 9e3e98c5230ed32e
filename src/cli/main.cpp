// lmforge: one executable, one subcommand per job. Errors a user can cause print one line and exit 1.
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/flags/abbreviations.h"
#include "cli/last_value_wins.h"
#include "dist/launcher.h"
#include "kernels/cpu/omp_spin.h"
#include "util/error.h"

namespace {

// The commands that run training or decoding steps (hundreds of OpenMP regions each, with serial code between
// them), the only ones worth restarting for a shorter OpenMP spin: the first word that is not a flag (torch's
// launcher may put --local_rank=N before it). prep, merge and inspect keep their start-up at one process image
// (prep's nvidia-hdf5 runs in ~0.4 s of CPU, of which a second start would be a tenth).
bool runs_training_steps(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    const std::string word = argv[i];
    return word == "train" || word == "generate" || word == "check";
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (runs_training_steps(argc, argv))
    lmforge::kernels::cpu::use_short_omp_spin(argv);  // may restart the program (kernels/cpu/omp_spin.h)
  CLI::App app{"lmforge: prepare corpora and pretrain GPT/BERT-class language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lmforge 0.1.0");
  lmforge::cli::add_prep_command(app);
  lmforge::cli::add_merge_command(app);
  lmforge::cli::add_inspect_command(app);
  lmforge::cli::add_train_command(app);
  lmforge::cli::add_generate_command(app);
  lmforge::cli::add_tokenizer_command(app);
  lmforge::cli::add_launch_command(app);
  lmforge::cli::add_check_command(app);
  // argparse's semantics, which Megatron/DeepSpeed/fairseq scripts rely on: a flag given twice takes the last value.
  lmforge::cli::take_last_values(app);
  try {
    std::vector<std::string> given(argv + 1, argv + argc);
    // torch.distributed.launch's --local_rank=N (before the subcommand under --no_python): recorded as LOCAL_RANK.
    if (const int local_rank = lmforge::dist::take_local_rank_flag(given); local_rank >= 0)
      ::setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 0);
    // argparse's abbreviated long flags (--vocab for --vocab-file) next: the rules below look flags up by name.
    std::vector<std::string> args =
        lmforge::cli::keep_last_list_occurrences(app, lmforge::cli::expand_abbreviations(app, given));
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
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
