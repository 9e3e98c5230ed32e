// defines: add_prep_command(): `lmforge prep`, Megatron's tools/preprocess_data.py flags on lmforge's pipeline
#include <algorithm>
#include <cctype>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/flags/value_range.h"
#include "cli/last_value_wins.h"
#include "cli/tokenizer_flags.h"
#include "prep/distributed.h"
#include "prep/electra_prep.h"
#include "prep/nvidia_hdf5_shards.h"
#include "prep/output_formats.h"
#include "prep/prep.h"
#include "prep/shard_plan.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

// "268435456", "256M", "1G", "64k" (binary units) to bytes, for `flag` (named in errors).
uint64_t parse_size(const std::string& flag, const std::string& text) {
  size_t used = 0;
  unsigned long long n = 0;
  try {
    // std::stoull accepts a sign and wraps "-5" to 2^64 − 5: only digits may start a size.
    if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) n = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0) throw Error(flag + " " + text + ": not a size (bytes, or a number with K, M or G)");
  std::string unit = text.substr(used);
  uint64_t scale = 1;
  if (unit == "K" || unit == "k" || unit == "KiB" || unit == "KB") scale = uint64_t(1) << 10;
  else if (unit == "M" || unit == "m" || unit == "MiB" || unit == "MB") scale = uint64_t(1) << 20;
  else if (unit == "G" || unit == "g" || unit == "GiB" || unit == "GB") scale = uint64_t(1) << 30;
  else if (!unit.empty()) throw Error(flag + " " + text + ": unknown unit '" + unit + "' (use K, M or G)");
  constexpr uint64_t kMax = uint64_t(1) << 40;  // 1024G: far above any useful shard, far below a wrap-around
  if (n == 0 || n > kMax / scale)
    throw Error(flag + " " + text + ": outside the valid range, 1 byte to 1024G");
  return n * scale;
}

}  // namespace

void add_prep_command(CLI::App& app) {
  auto options = std::make_shared<prep::PrepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "prep",
      "Tokenize loose-JSON corpora into Megatron indexed datasets (<output-prefix>_<key>_document.bin/.idx, "
      "or _sentence with --split-sentences), "
      "byte-identical to Megatron's tools/preprocess_data.py for the same input and flags.\n"
      "Other inputs and outputs (--input-format, --output-format): raw text, one document per line, with a "
      "word-level vocabulary (--input-format text --tokenizer-type WordLevel: the Megatron v1.1.5 projects' own "
      "preprocessor, byte for byte); NVIDIA DeepLearningExamples' BERT HDF5 shards (--output-format nvidia-hdf5 from "
      "sentence files, JSON lines or Megatron sentence datasets: the values its create_pretraining_data.py writes for "
      "the same text, vocabulary, flags and seed, with its flags and defaults; the documents are tokenized on every "
      "core, CPython's random stream is replayed in one thread in the script's order, rows are built and deflated on "
      "every core; see src/prep/nvidia_hdf5_prep.h). In sharded and claim mode nvidia-hdf5 makes one shard per input "
      "file, <output-prefix><file stem>.hdf5, as NVIDIA runs its script once per text shard (a static split of the "
      "files by rank, or --claim with leases in <output-prefix>.claims/; see src/prep/nvidia_hdf5_shards.h).\n\n"
      "Input: one JSON object per line; plain, .gz, .zst or .xz (detected from the content). Each --json-keys "
      "value must be a string (one sequence) or a list of strings (pre-split sentences, one sequence each, as "
      "Megatron). A line that is not a JSON object, lacks a key or holds another type stops the run with "
      "file:line and the reason before any dataset is written; --skip-invalid skips and counts such lines.\n"
      "Malformed text is repaired, not fatal: invalid UTF-8 bytes become U+FFFD (as Python's "
      "decode(errors='replace')) and \\uD800-\\uDFFF escapes without a partner become U+FFFD; both are counted "
      "in the summary. A document whose text gives no tokens is written as an empty document (a repeated "
      "document-index entry, no EOD), as Megatron does.\n"
      "Output is in input order for any --workers; it is written under temporary names and renamed only when "
      "complete, so an interrupted run never leaves a dataset under the final name.\n\n"
      "Distributed and resumable (sharded) mode: inputs are split into numbered shards (a plain file into byte "
      "ranges of --shard-size cut at line starts, a compressed file whole) by a plan derived from the inputs and "
      "flags alone; each process prepares shards into <output-prefix>.shards/ (each shard renamed into place "
      "and recorded by a manifest when complete), and the final <output-prefix>_<key>_document.bin/.idx is "
      "assembled from them, byte-identical to a single-process run. Rerunning the same command after a crash "
      "or preemption redoes only the missing shards (the log says how many were found complete); shards made "
      "under other inputs or flags are an error, never reused (inputs are compared by path, size, modification "
      "time and a hash of 4 KB samples at the start, middle and end of every --shard-size region, so content "
      "replaced in place with its size and time kept is found unless only unsampled bytes changed). Every process "
      "must see the inputs and "
      "<output-prefix>.shards/ at the same paths (across hosts: a shared or parallel file system). "
      "Sharded mode is on under mpirun, with --rank/"
      "--world-size or --shard-size, or when a launcher's environment gives more than one process:\n"
      "  mpirun -np N lmforge prep ...   MPI gives rank and size; rank 0 hands out shards on request (a slow "
      "process takes fewer), prints progress for all, and assembles at the end. Any failure ends the job "
      "non-zero with the rank and reason. Without --workers each rank takes its share of its node's cores.\n"
      "  Otherwise rank and world size come from, in this order: --rank/--world-size; SLURM_ARRAY_TASK_ID "
      "(minus SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_COUNT; SLURM_PROCID / SLURM_NTASKS; JOB_COMPLETION_INDEX "
      "(Kubernetes indexed job; give the count as --world-size); OMPI_COMM_WORLD_RANK/SIZE (with --no-mpi); "
      "PMI_RANK / PMI_SIZE. Rank r prepares shards r, r+N, r+2N, ...; with more than one process, run "
      "`lmforge merge --shards <output-prefix>` once all have finished (a world of one assembles itself).\n"
      "  --claim: no ranks at all. Any number of processes on any machines (an instance group of identical "
      "VMs, preemptible, started and added at any time) run the identical command; the first one writes the "
      "plan, the others wait for it and refuse to join if their output-defining flags differ (per-machine flags "
      "such as --workers may differ). Each process claims a free shard atomically, prepares it and claims the "
      "next; a claim whose heartbeat stops for --claim-lease seconds (judged by the file server's clock) is "
      "taken over; a committed shard is never replaced. When no shard is left, exactly one process assembles "
      "the datasets and every process exits 0 with a line \"nothing left to claim\" (so a start-up script can "
      "power the machine off). `lmforge inspect <output-prefix>.shards` shows progress from anywhere. The "
      "shard directory must be on a POSIX file system with atomic exclusive create and rename (local disk, "
      "NFS, Lustre, GPFS, CephFS); FUSE bucket mounts (gcsfuse, s3fs) give neither and are refused.");
  repeatable(cmd->add_option("--input", options->inputs,
                  "Input file(s), directories or glob patterns; repeat the flag or list several. A directory gives "
                  "its .jsonl/.json[.gz|.zst|.xz] files (--input-format json) or .txt[.gz|.zst|.xz] files (text, "
                  "sentences), sorted by name"))
      ->required();
  auto input_format = std::make_shared<std::string>();
  cmd->add_option("--input-format", *input_format,
                  "json: one JSON object per line, the text under --json-keys (default for --output-format megatron). "
                  "text: one document per line, the whole line (lines as Python's text-mode readlines() cuts them: "
                  "\\n, \\r\\n and a lone \\r each end one); writes <prefix>_text_sentence, and with --append-eod "
                  "every line, an empty one too, ends with the EOD, as the Megatron v1.1.5 projects' word-level "
                  "script (see --tokenizer-type WordLevel). sentences: one sentence per line, a blank line (empty "
                  "after Python's str.strip()) between documents, the input of Google's, NVIDIA's and ELECTRA's BERT "
                  "data scripts (default of --output-format nvidia-hdf5). megatron (nvidia-hdf5 only): Megatron sentence-level "
                  "datasets, each --input a .bin/.idx prefix, a document's sequences its sentences (ids as they are, "
                  "so made with the same vocabulary). With json, nvidia-hdf5 takes each JSON line as a document "
                  "and --split-sentences as its sentences")
      ->check(CLI::IsMember({"json", "text", "sentences", "megatron"}));
  std::string formats_help = "What to write:";
  for (const prep::OutputFormat& f : prep::output_formats()) formats_help += "\n  " + f.name + ": " + f.summary;
  cmd->add_option("--output-format", options->output_format, formats_help)->capture_default_str();
  cmd->add_option("--output-prefix", options->output_prefix,
                  "Output path prefix; writes <prefix>_<key>_document.bin and .idx (_sentence with --split-sentences)")
      ->required();
  cmd->add_option("--json-keys", options->json_keys, "JSON keys to tokenize; one dataset per key")
      ->capture_default_str();
  add_tokenizer_flags(cmd, options->tokenizer);
  cmd->add_flag("--append-eod", options->append_eod,
                "Append the end-of-document token (GPT-2: <|endoftext|> = 50256) to every non-empty document");
  cmd->add_flag("--split-sentences", options->split_sentences,
                "Sentence-level datasets, as BERT pretraining reads them: <prefix>_<key>_sentence.bin/.idx, each "
                "string value split into sentences, one sequence per sentence that has tokens (the document index "
                "marks where each document's sentences end; --append-eod extends the last). A list value stays "
                "as its pre-split items (Megatron would fail on it). Megatron splits with NLTK's punkt model, "
                "which cannot be downloaded here; lmforge uses ICU's sentence rules (UAX #29 with CLDR's "
                "abbreviation list for --lang) framed as punkt: line breaks are not sentence ends, the whitespace "
                "between sentences is dropped, text is split in 1,000,000-character pieces. Boundaries can differ "
                "from punkt's where punkt relies on learned statistics (unlisted abbreviations, initials, "
                "\"U.S. Army\"); see src/text/sentence_splitter.h");
  cmd->add_flag("--keep-newlines", options->keep_newlines,
                "With --split-sentences: keep the whitespace (newlines included) after each sentence in that "
                "sentence, as Megatron's punkt CustomLanguageVars; only the text's trailing whitespace is dropped");
  cmd->add_option("--lang", options->lang,
                  "With --split-sentences: language of the sentence rules, by punkt's name (english, german, "
                  "french, spanish, ...; mapped to ICU locales) or an ICU locale id (en, de_CH)")
      ->capture_default_str();
  cmd->add_option("--unk-token", options->tokenizer.unk_token,
                  "WordLevel: the vocab.json token that every word missing from the vocabulary becomes")
      ->capture_default_str();
  // NVIDIA's create_pretraining_data.py flags (and bertPrep.py's sharding), with the script's defaults; the
  // scripts' own spellings (--max_seq_length) are accepted too, so their command lines port unchanged.
  prep::NvidiaInstanceOptions& nv = options->nvidia;
  cmd->add_option("--max-seq-length,--max_seq_length", nv.max_seq_length,
                  "nvidia-hdf5: tokens per instance, [CLS] A [SEP] B [SEP] padded with 0 (5 to 512: NVIDIA's tokenizer "
                  "refuses longer rows); bertPrep.py passes 128 for phase 1, 512 for phase 2. electra-tfrecord: tokens per "
                  "example, the builder's --max-seq-length (at least 5)")
      ->capture_default_str();
  cmd->add_option("--max-predictions-per-seq,--max_predictions_per_seq", nv.max_predictions_per_seq,
                  "nvidia-hdf5: masked positions per instance (bertPrep.py: 20 with 128, 80 with 512)")
      ->capture_default_str();
  cmd->add_option("--masked-lm-prob,--masked_lm_prob", nv.masked_lm_prob,
                  "nvidia-hdf5: share of an instance's tokens to mask, round(n * p) half to even, at least 1")
      ->capture_default_str();
  cmd->add_option("--short-seq-prob,--short_seq_prob", nv.short_seq_prob,
                  "nvidia-hdf5: probability that a document pass aims at a random shorter length")
      ->capture_default_str();
  cmd->add_option("--dupe-factor,--dupe_factor", nv.dupe_factor,
                  "nvidia-hdf5: passes over the documents, each with fresh pairs and masks (the script's default 10; "
                  "bertPrep.py passes 5)")
      ->capture_default_str();
  cmd->add_option("--random-seed,--random_seed", nv.random_seed,
                  "nvidia-hdf5: seed of CPython's random.Random, whose draws are reproduced one for one; every output "
                  "shard restarts from it, as NVIDIA runs one process per shard with the same seed. electra-tfrecord: the seed "
                  "of Python's global random before the builder starts (the script never seeds it; the reference "
                  "run seeded 12345), every job starting from it")
      ->capture_default_str();
  cmd->add_flag("--do-lower-case,--do_lower_case", options->do_lower_case,
                "nvidia-hdf5: lower-case and strip accents (on by default, as in the script, where this store_true "
                "flag defaults to true); --tokenizer-type BertWordPieceCase turns it off. electra-tfrecord: the same, as "
                "the builder's --do-lower-case / --no-lower-case (default on, accents stripped with it)");
  cmd->add_option("--n-training-shards,--n_training_shards", options->n_training_shards,
                  "nvidia-hdf5: training files; with 1 and no test shards the output is <output-prefix>.hdf5, else "
                  "<output-prefix>_training_<i>.hdf5 (bertPrep.py's names). Documents are cut in input order into "
                  "runs of about equal sentence counts (bertPrep.py's TextSharding balances by NLTK sentences and "
                  "distributes differently); each file equals the script run on its documents")
      ->capture_default_str();
  cmd->add_option("--n-test-shards,--n_test_shards", options->n_test_shards,
                  "nvidia-hdf5: test files <output-prefix>_test_<i>.hdf5, made from the last --fraction-test-set of "
                  "the sentences")
      ->capture_default_str();
  cmd->add_option("--fraction-test-set,--fraction_test_set", options->fraction_test_set,
                  "nvidia-hdf5 with --n-test-shards: share of the sentences that go to the test files "
                  "(bertPrep.py's TextSharding default)")
      ->capture_default_str();
  cmd->add_option("--num-output-files", options->num_output_files,
                  "electra-tfrecord: files <output-prefix>.tfrecord-<i>-of-<n>; example k of a job goes to its "
                  "(k mod files)-th file (the builder's fixed 1000; many stay empty for a small corpus)")
      ->capture_default_str();
  cmd->add_option("--num-processes", options->num_processes,
                  "electra-tfrecord: the builder's --num-processes J, which defines the output: job j reads the input "
                  "files at positions j, j+J, ... shuffled by random.shuffle from --random-seed (each of the script's "
                  "processes inherits the seeded state) and writes the files i = j (mod J). prep runs the jobs one "
                  "after another, each on every core; sharded mode (--rank/--world-size, a launcher, --claim) shares "
                  "the jobs out")
      ->capture_default_str();
  cmd->add_option("--workers", options->workers, "Tokenizing threads (0: one per core)")->capture_default_str();
  // Megatron's preprocess_data.py flags that lmforge takes without a setting of its own behind them.
  auto dataset_impl = std::make_shared<std::string>();
  cmd->add_option("--dataset-impl", *dataset_impl,
                  "Megatron's output format: mmap (what lmforge writes, Megatron's default) is accepted; lazy and "
                  "cached (Megatron's older formats) are refused")
      ->check(CLI::IsMember({"mmap", "lazy", "cached"}));
  auto log_interval = std::make_shared<int64_t>(0);
  cmd->add_option("--log-interval", *log_interval,
                  "Megatron: documents between progress lines. Accepted with a notice: lmforge prints a progress "
                  "line every --progress-seconds instead (by time, whatever the documents' sizes)")
      ->check(at_least(1));
  cmd->add_flag("--skip-invalid", options->skip_invalid,
                "Skip invalid lines (not JSON, missing key, wrong type) instead of stopping; the first few are "
                "named with file:line and the summary counts them");
  auto max_line = std::make_shared<std::string>();
  cmd->add_option("--max-line-bytes", *max_line,
                  "Longest input line in bytes (K/M/G suffixes; default 256M). A longer line is invalid: the run "
                  "stops with file:line: line longer than N bytes, or --skip-invalid skips and counts it. Its "
                  "bytes are never held whole, so input that never ends a line (/dev/zero, a gzip of gigabytes "
                  "of zeros) cannot exhaust memory, and progress keeps moving while it is read past");
  cmd->add_option("--report-invalid", options->report_invalid,
                  "With --skip-invalid: how many skipped lines to name on stderr")
      ->capture_default_str();
  cmd->add_option("--progress-seconds", options->progress_seconds,
                  "Seconds between progress lines on stderr (default: 1 on a terminal, 10 otherwise)");
  auto distributed = std::make_shared<prep::DistributedOptions>();
  auto shard_size = std::make_shared<std::string>();
  cmd->add_option("--shard-size", *shard_size,
                  "Sharded mode: bytes of plain input per shard (K/M/G suffixes; default 256M when sharding). "
                  "Giving it turns on sharded, resumable mode for a single process too");
  cmd->add_option("--rank", distributed->rank.rank,
                  "Sharded mode without MPI: this process's rank, 0 to world size - 1 (default: from the launcher "
                  "environment)");
  cmd->add_option("--world-size", distributed->rank.world_size,
                  "Sharded mode without MPI: the number of processes (default: from the launcher environment)");
  cmd->add_flag("--no-mpi", distributed->rank.no_mpi,
                "Do not join MPI even when started by mpirun; take OMPI_COMM_WORLD_RANK/SIZE as a static split");
  cmd->add_flag("--claim", distributed->claim,
                "Sharded mode without ranks: claim shards from <output-prefix>.shards/ on a shared POSIX file "
                "system (not a FUSE bucket mount such as gcsfuse or s3fs: refused); see above");
  cmd->add_option("--claim-lease", distributed->claim_lease_seconds,
                  "With --claim: seconds without a heartbeat after which another process takes a claim over "
                  "(heartbeats every quarter of it). Give every process the same value; on NFS keep it well above "
                  "the attribute cache time (acregmax, 60 s by default)")
      ->capture_default_str();
  cmd->callback([cmd, options, distributed, shard_size, max_line, input_format, dataset_impl, log_interval] {
    if (*dataset_impl == "lazy" || *dataset_impl == "cached")
      throw Error("--dataset-impl " + *dataset_impl + ": lmforge writes Megatron's mmap indexed format (.bin/.idx, "
                  "what Megatron reads by default and lmforge train reads); the older lazy/cached formats are not "
                  "implemented (give --dataset-impl mmap, or leave it out)");
    if (*log_interval > 0)
      std::cerr << "lmforge prep: notice: --log-interval " << *log_interval
                << ": progress lines come every --progress-seconds (by time), not every N documents\n";
    const prep::OutputFormat& format = prep::find_output_format(options->output_format);
    options->input_format = input_format->empty() ? format.input_formats.front() : *input_format;
    if (std::find(format.input_formats.begin(), format.input_formats.end(), options->input_format) ==
        format.input_formats.end())
      throw Error("--output-format " + format.name + " does not read --input-format " + options->input_format);
    // Flags of another format are refused rather than ignored.
    for (const prep::OutputFormat& other : prep::output_formats())
      for (const std::string& flag : other.own_flags)
        if (other.name != format.name && cmd->count(flag) > 0 &&
            std::find(format.own_flags.begin(), format.own_flags.end(), flag) == format.own_flags.end())
          throw Error(flag + " applies to --output-format " + other.name);
    if (options->input_format != "json" && cmd->count("--json-keys") > 0)
      throw Error("--json-keys applies to --input-format json");
    if (options->tokenizer.type != "WordLevel" && cmd->count("--unk-token") > 0)
      throw Error("--unk-token applies to --tokenizer-type WordLevel");
    if ((format.name == "nvidia-hdf5" || format.name == "electra-tfrecord") && cmd->count("--tokenizer-type") > 0) {
      // NVIDIA's tokenizer is its own BertTokenizer; the two WordPiece names say cased or uncased.
      if (options->tokenizer.type == "BertWordPieceCase") {
        if (cmd->count("--do-lower-case") > 0)
          throw Error("--do-lower-case contradicts --tokenizer-type BertWordPieceCase");
        options->do_lower_case = false;
      } else if (options->tokenizer.type != "BertWordPieceLowerCase") {
        throw Error("--output-format " + format.name + " tokenizes with " +
                    (format.name == "nvidia-hdf5" ? "NVIDIA's BertTokenizer" : "ELECTRA's tokenization.py") +
                    ": --tokenizer-type may be BertWordPieceLowerCase (the default) or BertWordPieceCase, not " +
                    options->tokenizer.type);
      }
    }
    // A hub name becomes its snapshot in the local Hugging Face cache now, so that the shard plan fingerprints the
    // tokenizer.json it reads.
    if (options->tokenizer.type == "PretrainedFromHF" && !options->tokenizer.name_or_path.empty())
      options->tokenizer.name_or_path = text::find_hf_tokenizer(options->tokenizer.name_or_path);
    if (!max_line->empty()) options->max_line_bytes = parse_size("--max-line-bytes", *max_line);
    if (distributed->claim_lease_seconds <= 0) throw Error("--claim-lease must be a positive number of seconds");
    if (!shard_size->empty()) distributed->shard_bytes = parse_size("--shard-size", *shard_size);
    if (format.name == "nvidia-hdf5") {
      // One output shard per input file; no byte ranges, no MPI collectives (mpirun's ranks are a static split).
      if (!shard_size->empty())
        throw Error("--shard-size cuts JSON inputs into byte ranges; with --output-format nvidia-hdf5 every input "
                    "file is one shard");
      distributed->rank.no_mpi = true;
      if (auto rank = prep::sharded_mode(*distributed)) {
        if (auto summary = prep::run_nvidia_hdf5_sharded(*options, *distributed, *rank, std::cout))
          prep::print_summary(*summary, std::cout);
        return;
      }
    }
    if (format.name == "electra-tfrecord") {
      // Jobs (--num-processes) are the units; no byte ranges, no MPI collectives (mpirun's ranks are a static split).
      if (!shard_size->empty())
        throw Error("--shard-size cuts JSON inputs into byte ranges; --output-format electra-tfrecord shares out its "
                    "--num-processes jobs");
      distributed->rank.no_mpi = true;
      if (auto rank = prep::sharded_mode(*distributed)) {
        if (auto summary = prep::run_electra_tfrecord_sharded(*options, *distributed, *rank, std::cout))
          prep::print_summary(*summary, std::cout);
        return;
      }
    }
    if (auto rank = prep::sharded_mode(*distributed)) {
      if (auto summary = prep::run_sharded_prep(*options, *distributed, *rank, std::cout))
        prep::print_summary(*summary, std::cout);
      return;
    }
    const prep::PrepSummary summary = format.run(*options);
    prep::print_summary(summary, std::cout);
  });
}

}  // namespace lmforge::cli
