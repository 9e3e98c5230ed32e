// defines: run_nvidia_hdf5_sharded() (see nvidia_hdf5_shards.h)
#include "prep/nvidia_hdf5_shards.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>

#include "data/lease.h"
#include "prep/nvidia_hdf5_prep.h"
#include "prep/nvidia_hdf5_writer.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::prep {
namespace {

namespace fs = std::filesystem;

// "books_training_0" of ".../books_training_0.txt[.gz|.zst|.xz]", ".../x.jsonl", a dataset prefix ".../x_text_sentence".
std::string stem_of(const std::string& input) {
  std::string name = fs::path(input).filename().string();
  for (const char* ext : {".gz", ".zst", ".xz"})
    if (name.size() > std::strlen(ext) && name.ends_with(ext)) name.resize(name.size() - std::strlen(ext));
  for (const char* ext : {".txt", ".jsonl", ".json"})
    if (name.size() > std::strlen(ext) && name.ends_with(ext)) name.resize(name.size() - std::strlen(ext));
  return name;
}

struct Unit {
  std::string input, output;
};

std::vector<Unit> plan_units(const PrepOptions& options) {
  if (options.n_training_shards != 1 || options.n_test_shards != 0)
    throw Error("--n-training-shards/--n-test-shards cut one run's documents into files; in sharded and claim mode "
                "every input file is one output shard (give the text shards themselves as --input)");
  std::vector<Unit> units;
  std::set<std::string> seen;
  for (const std::string& input : nvidia_input_files(options)) {
    const std::string stem = stem_of(input);
    if (!seen.insert(stem).second)
      throw Error(input + ": another input has the same name (" + stem + "), and each input file names its "
                  "output <output-prefix>" + stem + ".hdf5");
    units.push_back({input, options.output_prefix + stem + ".hdf5"});
  }
  return units;
}

// One input file to its output under a temporary name; returns that name and adds to `summary`.
std::string make_unit(const Unit& unit, const PrepOptions& options, const NvidiaTokenizer& nvidia,
                      PrepSummary& summary) {
  const SentenceDocuments docs = read_nvidia_documents({unit.input}, nvidia, options, summary);
  const NvidiaInstances instances = create_nvidia_instances(docs, nvidia.vocab, options.nvidia);
  const std::string temporary = unit.output + ".tmp-" + data::host_name() + "-" + std::to_string(::getpid());
  try {
    write_nvidia_hdf5(temporary, instances, nvidia_workers(options));
  } catch (...) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw;
  }
  summary.instances += instances.size();
  return temporary;
}

bool output_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Bytes of an input: a file, or a Megatron dataset prefix's .bin.
uintmax_t input_size(const std::string& input) {
  std::error_code ec;
  const uintmax_t n = fs::file_size(input, ec);
  if (!ec) return n;
  const uintmax_t bin = fs::file_size(input + ".bin", ec);
  return ec ? 0 : bin;
}

// What decides the outputs, for claimers to agree on (inputs by path and size, the vocabulary by size and time).
std::string claim_plan_text(const PrepOptions& options, const std::vector<Unit>& units) {
  std::ostringstream t;
  const NvidiaInstanceOptions& n = options.nvidia;
  t << "format: lmforge nvidia-hdf5 claim plan 1\ninput-format: " << options.input_format
    << "\nvocab-file: " << options.tokenizer.vocab_file << " " << fs::file_size(options.tokenizer.vocab_file)
    << "\nlower-case: " << options.do_lower_case << "\nmax-seq-length: " << n.max_seq_length
    << "\nmax-predictions-per-seq: " << n.max_predictions_per_seq << "\nmasked-lm-prob: " << n.masked_lm_prob
    << "\nshort-seq-prob: " << n.short_seq_prob << "\ndupe-factor: " << n.dupe_factor
    << "\nrandom-seed: " << n.random_seed << "\nsplit-sentences: " << options.split_sentences << " " << options.lang
    << "\n";
  for (const Unit& u : units) t << "input: " << u.input << " " << input_size(u.input) << "\n";
  return t.str();
}

std::optional<PrepSummary> run_claim(const PrepOptions& options, const std::vector<Unit>& units, double lease_seconds,
                                     std::ostream& out) {
  const std::string claims = options.output_prefix + ".claims";
  const data::LeaseOwner owner = data::this_process_owner();
  const std::string tag = data::join_claim_plan(claims, claim_plan_text(options, units), "shards");
  data::ServerClock clock(claims + "/probe-" + tag);
  const NvidiaTokenizer nvidia(options);
  PrepSummary summary;
  ProgressLine progress(options.progress_seconds);
  for (;;) {
    size_t missing = 0;
    for (const Unit& unit : units) {
      if (output_exists(unit.output)) continue;
      ++missing;
      auto lease = data::Lease::try_acquire(claims + "/" + stem_of(unit.input), lease_seconds, clock, owner);
      if (!lease || output_exists(unit.output)) continue;
      std::string temporary;
      {
        data::LeaseHeartbeat heartbeat(*lease, lease_seconds);
        temporary = make_unit(unit, options, nvidia, summary);
      }
      if (!lease->heartbeat()) {  // taken over while this process was stopped: the taker writes it
        fs::remove(temporary);
        continue;
      }
      if (data::commit_no_clobber(temporary, unit.output) == data::CommitResult::Committed) {
        summary.outputs.push_back(unit.output);
        out << "prep: wrote " << unit.output << "\n" << std::flush;
      } else {
        fs::remove(temporary);
      }
      --missing;
    }
    if (missing == 0) break;
    // Files claimed by live processes: wait, then look again (a claim whose heartbeat stops is taken over).
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(5.0, lease_seconds / 4)));
  }
  ::unlink(clock.probe_path().c_str());
  progress.finish();
  summary.seconds = progress.elapsed_seconds();
  out << "prep: nothing left to claim: all " << units.size() << " shards of " << options.output_prefix
      << " exist\n";
  return summary;
}

}  // namespace

std::optional<PrepSummary> run_nvidia_hdf5_sharded(const PrepOptions& options, const DistributedOptions& distributed,
                                                   const dist::RankInfo& rank, std::ostream& out) {
  check_nvidia_hdf5_options(options);
  const std::vector<Unit> units = plan_units(options);
  create_output_dir(options.output_prefix);
  if (distributed.claim) return run_claim(options, units, distributed.claim_lease_seconds, out);
  // Static: rank r takes files r, r + N, ...; a file whose output exists is done (a rerun redoes only the rest).
  const NvidiaTokenizer nvidia(options);
  PrepSummary summary;
  ProgressLine progress(options.progress_seconds);
  size_t found = 0;
  for (size_t i = size_t(rank.rank); i < units.size(); i += size_t(rank.world_size)) {
    if (output_exists(units[i].output)) {
      ++found;
      continue;
    }
    const std::string temporary = make_unit(units[i], options, nvidia, summary);
    fs::rename(temporary, units[i].output);
    summary.outputs.push_back(units[i].output);
  }
  progress.finish();
  summary.seconds = progress.elapsed_seconds();
  out << "prep: rank " << rank.rank << " of " << rank.world_size << " (" << rank.origin << "): wrote "
      << summary.outputs.size() << " shards, found " << found << " complete\n";
  return summary;
}

}  // namespace lmforge::prep
