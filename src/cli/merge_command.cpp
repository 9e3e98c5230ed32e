// defines: add_merge_command(): `lmforge merge`, Megatron's tools/merge_datasets.py (and Megatron-DeepSpeed's
//          tools/merge_preprocessed_data.py spelling, --datasets A B C) on lmforge's writer
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/last_value_wins.h"
#include "data/merge.h"
#include "prep/shard_assembly.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::cli {
namespace {

struct MergeOptions {
  std::string output_prefix;
  std::vector<std::string> input_prefixes;
  std::vector<std::string> datasets;  // --datasets A B C (merge_preprocessed_data.py, nargs='+')
  std::string input_dir;
  std::string shards_prefix;  // --shards: assemble a sharded prep run (prep/shard_assembly.h)
};

void run_merge(const MergeOptions& o) {
  std::vector<std::string> inputs = !o.input_dir.empty() ? data::dataset_prefixes_in_directory(o.input_dir)
                                    : !o.datasets.empty() ? o.datasets
                                                          : o.input_prefixes;
  const auto start = std::chrono::steady_clock::now();
  const data::MergeSummary s = data::merge_datasets(inputs, o.output_prefix);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "inputs:         " << s.inputs.size() << "\n";
  for (const auto& p : s.inputs) std::cout << "  " << p << "\n";
  std::cout << "dtype:          " << data::dtype_name(s.dtype) << "\n";
  std::cout << "documents:      " << format_count(s.documents);
  if (s.empty_documents) std::cout << " (" << format_count(s.empty_documents) << " empty)";
  std::cout << "\nsequences:      " << format_count(s.sequences) << "\ntokens:         " << format_count(s.tokens)
            << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "wall time:      %.2f s (%.1f MB/s of .bin copied)\n", seconds,
                static_cast<double>(s.bin_bytes) / std::max(seconds, 1e-9) / 1e6);
  std::cout << line;
  std::cout << "output:         " << o.output_prefix << ".bin / .idx (" << format_count(s.bin_bytes) << " + "
            << format_count(s.idx_bytes) << " bytes)\n";
}

}  // namespace

void add_merge_command(CLI::App& app) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "merge",
      "Concatenate indexed datasets (.bin/.idx pairs) into one, as Megatron's tools/merge_datasets.py: the .bin "
      "files are copied byte for byte in order, sequence lengths are concatenated and each further document index "
      "is appended shifted, so the result is byte-identical to Megatron's. All inputs must share one dtype. Inputs "
      "are validated before anything is written; the output is written under temporary names and renamed only "
      "when complete. Memory is bounded by the inputs' .idx sizes, not their .bin sizes.");
  auto* output = cmd->add_option("--output-prefix", options->output_prefix,
                                 "Output path prefix; writes <prefix>.bin and .idx (required unless --shards)");
  auto* prefixes = repeatable(cmd->add_option("--input-prefix", options->input_prefixes,
                                   "An input dataset's path prefix (without .bin/.idx); repeat the flag for each "
                                   "input. Merged in command-line order"));
  auto* dir = cmd->add_option("--input-dir", options->input_dir,
                              "Merge every X.bin/X.idx pair in this directory, in sorted order of file name (as "
                              "merge_datasets.py); other files are ignored");
  auto* datasets = cmd->add_option("--datasets", options->datasets,
                                   "Megatron-DeepSpeed's merge_preprocessed_data.py spelling: the input prefixes as "
                                   "one list (--datasets A B C), merged in that order; the same merge as "
                                   "--input-prefix A --input-prefix B --input-prefix C. Given twice, the last list "
                                   "counts (argparse's nargs='+')");
  prefixes->excludes(dir);
  dir->excludes(prefixes);
  datasets->excludes(prefixes)->excludes(dir);
  auto* shards = cmd->add_option("--shards", options->shards_prefix,
                                 "Assemble a sharded `lmforge prep` run (static ranks or an array job) given its "
                                 "--output-prefix: checks that every shard in <prefix>.shards/ is complete and for "
                                 "this plan, then writes <prefix>_<key>_document.bin/.idx (_sentence after "
                                 "--split-sentences), byte-identical to a single-process prep, streaming (memory independent of corpus size)");
  shards->excludes(prefixes)->excludes(dir)->excludes(datasets)->excludes(output);
  cmd->callback([options] {
    if (!options->shards_prefix.empty()) {
      prep::print_summary(prep::merge_shards(options->shards_prefix), std::cout);
      return;
    }
    if (options->output_prefix.empty()) throw Error("--output-prefix is required");
    if (options->input_prefixes.empty() && options->input_dir.empty() && options->datasets.empty())
      throw Error("give the inputs with --input-prefix (repeatable), --datasets A B C or --input-dir");
    run_merge(*options);
  });
}

}  // namespace lmforge::cli
