// defines: add_prep_command(): `lmforge prep`, Megatron's tools/preprocess_data.py flags on lmforge's pipeline
#include <iostream>

#include "cli/commands.h"
#include "cli/tokenizer_flags.h"
#include "prep/prep.h"

namespace lmforge::cli {

void add_prep_command(CLI::App& app) {
  auto options = std::make_shared<prep::PrepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "prep",
      "Tokenize loose-JSON corpora into Megatron indexed datasets (<output-prefix>_<key>_document.bin/.idx), "
      "byte-identical to Megatron's tools/preprocess_data.py for the same input and flags.\n\n"
      "Input: one JSON object per line; plain, .gz, .zst or .xz (detected from the content). Each --json-keys "
      "value must be a string (one sequence) or a list of strings (pre-split sentences, one sequence each, as "
      "Megatron). A line that is not a JSON object, lacks a key or holds another type stops the run with "
      "file:line and the reason before any dataset is written; --skip-invalid skips and counts such lines.\n"
      "Malformed text is repaired, not fatal: invalid UTF-8 bytes become U+FFFD (as Python's "
      "decode(errors='replace')) and \\uD800-\\uDFFF escapes without a partner become U+FFFD; both are counted "
      "in the summary. A document whose text gives no tokens is written as an empty document (a repeated "
      "document-index entry, no EOD), as Megatron does.\n"
      "Output is in input order for any --workers; it is written under temporary names and renamed only when "
      "complete, so an interrupted run never leaves a dataset under the final name.");
  cmd->add_option("--input", options->inputs,
                  "Input JSON-lines file(s), directories (their .jsonl/.json[.gz|.zst|.xz] files, sorted) or glob "
                  "patterns; repeat the flag or list several")
      ->required();
  cmd->add_option("--output-prefix", options->output_prefix,
                  "Output path prefix; writes <prefix>_<key>_document.bin and .idx")
      ->required();
  cmd->add_option("--json-keys", options->json_keys, "JSON keys to tokenize; one dataset per key")
      ->capture_default_str();
  add_tokenizer_flags(cmd, options->tokenizer);
  cmd->add_flag("--append-eod", options->append_eod,
                "Append the end-of-document token (GPT-2: <|endoftext|> = 50256) to every non-empty document");
  cmd->add_option("--workers", options->workers, "Tokenizing threads (0: one per core)")->capture_default_str();
  cmd->add_flag("--skip-invalid", options->skip_invalid,
                "Skip invalid lines (not JSON, missing key, wrong type) instead of stopping; the first few are "
                "named with file:line and the summary counts them");
  cmd->add_option("--report-invalid", options->report_invalid,
                  "With --skip-invalid: how many skipped lines to name on stderr")
      ->capture_default_str();
  cmd->add_option("--progress-seconds", options->progress_seconds,
                  "Seconds between progress lines on stderr (default: 1 on a terminal, 10 otherwise)");
  cmd->callback([options] {
    const prep::PrepSummary summary = prep::run_prep(*options);
    prep::print_summary(summary, std::cout);
  });
}

}  // namespace lmforge::cli
