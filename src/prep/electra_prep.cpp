// defines: run_electra_tfrecord_prep(), run_electra_tfrecord_sharded(), check_electra_options(),
//          electra_output_path() (see electra_prep.h)
#include "prep/electra_prep.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <thread>

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include "data/lease.h"
#include "data/writer_lock.h"
#include "prep/electra_examples.h"
#include "prep/electra_tfrecord.h"
#include "prep/text_inputs.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::prep {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> electra_inputs(const PrepOptions& options) {
  if (options.input_format == "sentences") return expand_text_inputs(options.inputs);
  return options.inputs;  // Megatron sentence-level dataset prefixes
}

int workers_of(const PrepOptions& options) {
  return options.workers > 0 ? options.workers : int(std::max(1u, std::thread::hardware_concurrency()));
}

// The output files of job `job`: i = job (mod jobs), ascending (the script's writer list).
std::vector<int> job_outputs(const PrepOptions& options, int job) {
  std::vector<int> outs;
  for (int i = job; i < options.num_output_files; i += options.num_processes) outs.push_back(i);
  return outs;
}

// A file written under a temporary name, to be renamed to `final_path`.
struct Written {
  std::string temporary, final_path;
};

void remove_all(const std::vector<Written>& files) {
  std::error_code ignored;
  for (const Written& w : files) fs::remove(w.temporary, ignored);
}

void write_file(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(path + ": cannot create (" + std::string(std::strerror(errno)) + ")");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0 &&
                  ::fsync(::fileno(f)) == 0;
  const int saved = errno;
  if (std::fclose(f) != 0 || !ok)
    throw Error(path + ": write failed (" + std::string(std::strerror(ok ? errno : saved)) + ")");
}

// Builds job `job`'s examples and writes its files under temporary names `<final>.tmp-<tag>`.
std::vector<Written> make_job(const PrepOptions& options, const ElectraTokenizer& tokenizer,
                              const std::vector<std::string>& inputs, int job, const std::string& tag,
                              PrepSummary& summary) {
  PythonRandom random(options.nvidia.random_seed);  // each process of the script starts from the parent's state
  const std::vector<std::string> files = electra_job_inputs(inputs, job, options.num_processes, random);
  const int m = options.nvidia.max_seq_length;
  ElectraExamples examples;
  examples.max_seq_length = m;
  examples.cls_id = tokenizer.cls_id;
  examples.sep_id = tokenizer.sep_id;
  ElectraExampleBuilder builder(m, random);
  ElectraReadStats stats;
  const ElectraReadOptions read{options.workers, options.block_bytes, options.max_line_bytes};
  for (const std::string& file : files) {
    if (options.input_format == "sentences") add_electra_text_file(file, tokenizer, read, builder, examples, stats);
    else add_electra_megatron_dataset(file, tokenizer.vocab_lines, builder, examples, stats);
  }
  summary.input_bytes += stats.input_bytes;
  summary.text_bytes += stats.text_bytes;
  summary.sequences += stats.sentences;
  summary.tokens += stats.tokens;
  summary.instances += examples.size();

  const std::vector<int> outs = job_outputs(options, job);
  std::vector<Written> written;
  for (const int i : outs) {
    const std::string path = electra_output_path(options.output_prefix, i, options.num_output_files);
    written.push_back({path + ".tmp-" + tag, path});
  }
  try {
    tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, size_t(workers_of(options)));
    tbb::parallel_for(size_t(0), outs.size(), [&](size_t w) {
      // Example k goes to writer k mod W (ExampleWriter: self._writers[self.n_written % len(self._writers)]).
      std::vector<int64_t> ids(static_cast<size_t>(m)), mask(ids), segments(ids);
      const std::pair<std::string_view, std::span<const int64_t>> features[] = {
          {"input_ids", ids}, {"input_mask", mask}, {"segment_ids", segments}};
      std::string bytes, payload;
      for (size_t k = w; k < examples.size(); k += outs.size()) {
        examples.row(k, ids.data(), mask.data(), segments.data());
        payload.clear();
        append_int64_example(payload, features);
        append_tfrecord(bytes, payload);
      }
      write_file(written[w].temporary, bytes);
    });
  } catch (...) {
    remove_all(written);
    throw;
  }
  return written;
}

// A job is done when all its files exist (they are renamed into place only after all were written).
bool job_done(const PrepOptions& options, int job) {
  for (const int i : job_outputs(options, job))
    if (::access(electra_output_path(options.output_prefix, i, options.num_output_files).c_str(), F_OK) != 0)
      return false;
  return true;
}

std::string outputs_name(const PrepOptions& options) {
  return options.output_prefix + ".tfrecord-{0.." + std::to_string(options.num_output_files - 1) + "}-of-" +
         std::to_string(options.num_output_files);
}

// Removes a killed run's <output>.tmp-* files (under the writer lock or a job's lease nobody else writes them).
void remove_stale_temporaries(const PrepOptions& options, const std::string& tag_prefix) {
  const fs::path prefix(options.output_prefix);
  const fs::path dir = prefix.parent_path().empty() ? fs::path(".") : prefix.parent_path();
  const std::string stem = prefix.filename().string() + ".tfrecord-";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(stem, 0) == 0 && name.find(".tmp-" + tag_prefix) != std::string::npos) fs::remove(e.path(), ec);
  }
}

// What decides the outputs, for claimers to agree on.
std::string claim_plan_text(const PrepOptions& options, const std::vector<std::string>& inputs) {
  std::ostringstream t;
  t << "format: lmforge electra-tfrecord claim plan 1\ninput-format: " << options.input_format
    << "\nvocab-file: " << options.tokenizer.vocab_file << " " << fs::file_size(options.tokenizer.vocab_file)
    << "\nlower-case: " << options.do_lower_case << "\nmax-seq-length: " << options.nvidia.max_seq_length
    << "\nrandom-seed: " << options.nvidia.random_seed << "\nnum-output-files: " << options.num_output_files
    << "\nnum-processes: " << options.num_processes << "\n";
  for (const std::string& input : inputs) {
    std::error_code ec;
    uintmax_t size = fs::file_size(input, ec);
    if (ec) size = fs::file_size(input + ".bin", ec);
    t << "input: " << input << " " << (ec ? 0 : size) << "\n";
  }
  return t.str();
}

std::optional<PrepSummary> run_claim(const PrepOptions& options, const std::vector<std::string>& inputs,
                                     double lease_seconds, std::ostream& out) {
  const std::string claims = options.output_prefix + ".claims";
  const data::LeaseOwner owner = data::this_process_owner();
  const std::string tag = data::join_claim_plan(claims, claim_plan_text(options, inputs), "files");
  data::ServerClock clock(claims + "/probe-" + tag);
  const ElectraTokenizer tokenizer(options.tokenizer.vocab_file, options.do_lower_case);
  PrepSummary summary;
  ProgressLine progress(options.progress_seconds);
  for (;;) {
    int missing = 0;
    for (int job = 0; job < options.num_processes; ++job) {
      if (job_done(options, job)) continue;
      ++missing;
      auto lease = data::Lease::try_acquire(claims + "/job-" + std::to_string(job), lease_seconds, clock, owner);
      if (!lease || job_done(options, job)) continue;
      std::vector<Written> written;
      {
        data::LeaseHeartbeat heartbeat(*lease, lease_seconds);
        written = make_job(options, tokenizer, inputs, job, tag, summary);
      }
      if (!lease->heartbeat()) {  // taken over while this process was stopped: the taker writes the job
        remove_all(written);
        continue;
      }
      // The same flags give the same bytes, so a file another process published first is as good as ours.
      for (const Written& w : written)
        if (data::commit_no_clobber(w.temporary, w.final_path) == data::CommitResult::AlreadyThere)
          fs::remove(w.temporary);
      out << "prep: wrote job " << job << " of " << options.num_processes << " (" << written.size() << " files)\n"
          << std::flush;
      --missing;
    }
    if (missing == 0) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(5.0, lease_seconds / 4)));
  }
  ::unlink(clock.probe_path().c_str());
  progress.finish();
  summary.seconds = progress.elapsed_seconds();
  summary.outputs.push_back(outputs_name(options));
  out << "prep: nothing left to claim: all " << options.num_processes << " jobs of " << options.output_prefix
      << " exist\n";
  return summary;
}

}  // namespace

std::string electra_output_path(const std::string& prefix, int i, int n) {
  return prefix + ".tfrecord-" + std::to_string(i) + "-of-" + std::to_string(n);
}

void check_electra_options(const PrepOptions& options) {
  if (options.input_format != "sentences" && options.input_format != "megatron")
    throw Error("--output-format electra-tfrecord reads --input-format sentences (one sentence per line, a blank line "
                "between documents) or megatron (sentence-level datasets), not " + options.input_format);
  if (options.append_eod) throw Error("--append-eod does not apply to --output-format electra-tfrecord");
  if (options.split_sentences)
    throw Error("--split-sentences does not apply to --output-format electra-tfrecord (its inputs are already split)");
  const int m = options.nvidia.max_seq_length;
  if (m < 5) throw Error("--max-seq-length must be at least 5 (the builder draws random lengths from 5 to it)");
  if (options.num_output_files < 1) throw Error("--num-output-files must be at least 1");
  if (options.num_processes < 1) throw Error("--num-processes must be at least 1");
  if (options.num_processes > options.num_output_files)
    throw Error("--num-processes " + std::to_string(options.num_processes) + " exceeds --num-output-files " +
                std::to_string(options.num_output_files) + ": a job would have no file to write (the script fails "
                "the same way)");
  if (options.workers < 0) throw Error("--workers must be at least 1 (or 0 for every core)");
  if (options.tokenizer.vocab_file.empty())
    throw Error("--output-format electra-tfrecord needs --vocab-file (BERT's vocab.txt)");
}

PrepSummary run_electra_tfrecord_prep(const PrepOptions& options) {
  check_electra_options(options);
  const std::vector<std::string> inputs = electra_inputs(options);
  const ElectraTokenizer tokenizer(options.tokenizer.vocab_file, options.do_lower_case);
  create_output_dir(options.output_prefix);
  data::WriterLock lock(data::output_prefix_lock_base(options.output_prefix), "output prefix " + options.output_prefix);
  remove_stale_temporaries(options, "");  // under the lock no other run writes these names
  ProgressLine progress(options.progress_seconds);
  PrepSummary summary;
  const std::string tag = std::to_string(::getpid());
  for (int job = 0; job < options.num_processes; ++job) {
    const std::vector<Written> written = make_job(options, tokenizer, inputs, job, tag, summary);
    try {
      lock.check_held();
      for (const Written& w : written) fs::rename(w.temporary, w.final_path);
    } catch (...) {
      remove_all(written);
      throw;
    }
  }
  progress.finish();
  summary.seconds = progress.elapsed_seconds();
  summary.outputs.push_back(outputs_name(options));
  return summary;
}

std::optional<PrepSummary> run_electra_tfrecord_sharded(const PrepOptions& options,
                                                        const DistributedOptions& distributed,
                                                        const dist::RankInfo& rank, std::ostream& out) {
  check_electra_options(options);
  const std::vector<std::string> inputs = electra_inputs(options);
  create_output_dir(options.output_prefix);
  if (distributed.claim) return run_claim(options, inputs, distributed.claim_lease_seconds, out);
  // Static: rank r runs jobs r, r + N, ...; a job whose files all exist is done.
  const ElectraTokenizer tokenizer(options.tokenizer.vocab_file, options.do_lower_case);
  PrepSummary summary;
  ProgressLine progress(options.progress_seconds);
  int made = 0, found = 0;
  const std::string tag = data::host_name() + "-" + std::to_string(::getpid());
  for (int job = rank.rank; job < options.num_processes; job += rank.world_size) {
    if (job_done(options, job)) {
      ++found;
      continue;
    }
    const std::vector<Written> written = make_job(options, tokenizer, inputs, job, tag, summary);
    for (const Written& w : written) fs::rename(w.temporary, w.final_path);
    ++made;
  }
  progress.finish();
  summary.seconds = progress.elapsed_seconds();
  if (made) summary.outputs.push_back(outputs_name(options) + " (this rank's jobs)");
  out << "prep: rank " << rank.rank << " of " << rank.world_size << " (" << rank.origin << "): wrote " << made
      << " of --num-processes " << options.num_processes << " jobs, found " << found << " complete\n";
  return summary;
}

}  // namespace lmforge::prep
