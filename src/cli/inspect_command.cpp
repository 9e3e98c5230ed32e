// defines: add_inspect_command(): `lmforge inspect`, validation, statistics and decoded documents of an indexed dataset
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/last_value_wins.h"
#include "cli/tokenizer_flags.h"
#include "data/dataset_stats.h"
#include "data/indexed_dataset.h"
#include "prep/claim_prep.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::cli {
namespace {

struct InspectOptions {
  std::string prefix;
  std::vector<uint64_t> documents;
  text::TokenizerOptions tokenizer;
  bool json = false;
};

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Percentiles print as integers when they are (the usual case), else with one decimal.
std::string length_value(double v) {
  return v == static_cast<double>(static_cast<int64_t>(v)) ? format_count(static_cast<uint64_t>(v)) : fixed(v, 1);
}

void print_stats(const data::DatasetStats& s, std::ostream& out) {
  const auto& p = s.sequence_lengths;
  out << "dataset:        " << s.prefix << " (.bin/.idx valid)\n";
  out << "dtype:          " << data::dtype_name(s.dtype) << " (code " << static_cast<int>(s.dtype) << ", "
      << data::dtype_size(s.dtype) << " bytes per token)\n";
  out << "documents:      " << format_count(s.documents) << " (" << format_count(s.empty_documents) << " empty)\n";
  out << "sequences:      " << format_count(s.sequences) << "\n";
  out << "tokens:         " << format_count(s.tokens) << "\n";
  out << ".bin size:      " << format_count(s.bin_bytes) << " bytes\n";
  out << ".idx size:      " << format_count(s.idx_bytes) << " bytes\n";
  if (s.sequences == 0) {
    out << "sequence length: (no sequences)\n";
    return;
  }
  out << "sequence length: min " << format_count(static_cast<uint64_t>(p.min)) << ", p50 " << length_value(p.p50)
      << ", p90 " << length_value(p.p90) << ", p99 " << length_value(p.p99) << ", max "
      << format_count(static_cast<uint64_t>(p.max)) << ", mean " << fixed(p.mean, 1) << "\n";
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

void check_ids_in_vocab(const std::vector<int32_t>& ids, const text::Tokenizer& tok, const data::IndexedDataset& ds,
                        uint64_t seq) {
  for (int32_t id : ids)
    if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
      throw Error(ds.prefix() + ".bin: token id " + std::to_string(id) + " in sequence " + std::to_string(seq) +
                  " is outside the " + std::to_string(tok.vocab_size()) + "-entry vocabulary of " + tok.type_name() +
                  " (wrong --vocab-file or --tokenizer-type?)");
}

void print_document(const data::IndexedDataset& ds, uint64_t k, const text::Tokenizer* tok, bool json,
                    std::ostream& out) {
  if (k >= ds.document_count())
    throw Error(ds.prefix() + ": --document " + std::to_string(k) + " is out of range (" +
                std::to_string(ds.document_count()) + " documents, numbered from 0)");
  const int64_t first = ds.document_index(k), last = ds.document_index(k + 1);
  std::vector<int32_t> ids;
  if (json) {
    out << "{\"document\": " << k << ", \"sequences\": [";
    for (int64_t s = first; s < last; ++s) {
      ds.read_sequence(static_cast<uint64_t>(s), ids);
      out << (s > first ? ", " : "") << "{\"index\": " << s << ", \"ids\": [";
      for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
      out << "]";
      if (tok) {
        check_ids_in_vocab(ids, *tok, ds, static_cast<uint64_t>(s));
        out << ", \"text\": " << json_quote(tok->decode(ids));
      }
      out << "}";
    }
    out << "]}\n";
    return;
  }
  uint64_t tokens = 0;
  for (int64_t s = first; s < last; ++s) tokens += static_cast<uint64_t>(ds.sequence_length(static_cast<uint64_t>(s)));
  out << "\ndocument " << k << ": sequences [" << first << ", " << last << "), " << format_count(tokens)
      << " tokens" << (first == last ? " (empty document)" : "") << "\n";
  for (int64_t s = first; s < last; ++s) {
    ds.read_sequence(static_cast<uint64_t>(s), ids);
    out << "-- sequence " << s << " (" << format_count(ids.size()) << " tokens)"
        << (tok ? ", decoded with " + tok->type_name() : ", ids (give --vocab-file to decode)") << ":\n";
    if (tok) {
      check_ids_in_vocab(ids, *tok, ds, static_cast<uint64_t>(s));
      out << tok->decode(ids) << "\n";
    } else {
      out << ids_text(ids) << "\n";
    }
  }
}

void run_inspect(const InspectOptions& o, std::ostream& out) {
  if (std::filesystem::is_directory(o.prefix)) {  // a sharded run in progress: its shards and claimers
    prep::print_claim_status(o.prefix, out);
    return;
  }
  auto ds = data::IndexedDataset::open(o.prefix);  // validates; corruption is an Error naming file and field
  std::unique_ptr<text::Tokenizer> tok;
  const bool tokenizer_given = !o.tokenizer.vocab_file.empty() || !o.tokenizer.model_file.empty() ||
                               !o.tokenizer.name_or_path.empty() || o.tokenizer.vocab_size != 0;
  if (!o.documents.empty() && tokenizer_given) tok = text::make_tokenizer(o.tokenizer);
  const data::DatasetStats stats = data::compute_dataset_stats(*ds);
  if (o.json) {
    out << data::format_dataset_stats_json(stats) << "\n";
  } else {
    print_stats(stats, out);
  }
  for (uint64_t k : o.documents) print_document(*ds, k, tok.get(), o.json, out);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Validate an indexed dataset (.bin/.idx) and print its statistics: dtype, documents (and how many are empty), "
      "sequences, tokens, file sizes and the sequence-length distribution (min, p50, p90, p99, max, mean; "
      "percentiles as numpy.percentile). A corrupt or inconsistent pair is reported with the file and the field "
      "that is wrong, and the exit status is 1. With --document, prints that document's sequences, decoded to text "
      "when a tokenizer is given, else as token ids.\n"
      "Given a shard directory (<output-prefix>.shards of `lmforge prep` in sharded or --claim mode), prints the "
      "run's progress instead, from any machine that mounts it, read-only mounts included: shards done/claimed/free "
      "(each manifest and shard .bin/.idx validated as `merge --shards` validates them; damaged ones listed with the "
      "reason), each claimer with its heartbeat age, the shard in hand and its throughput, the total throughput of "
      "the live claimers with an ETA, and whether the datasets are assembled (checked against the sizes the "
      "assembly recorded). Heartbeat ages are judged by the file server's clock through a probe file when the "
      "directory is writable, else by this machine's clock; the output says which.");
  cmd->add_option("prefix", options->prefix,
                  "Dataset path prefix, without .bin/.idx (e.g. out/corpus_text_document), or a shard directory "
                  "(out/corpus.shards)")
      ->required();
  repeatable(cmd->add_option("--document", options->documents,
                  "Print document K (0-based; repeat the flag or list several): its sequences as text with "
                  "--vocab-file (and --merge-file for GPT-2), else as ids"));
  add_tokenizer_flags(cmd, options->tokenizer);
  cmd->add_flag("--json", options->json,
                "Machine-readable output: one JSON object with the statistics, then one JSON object per --document "
                "({\"document\", \"sequences\": [{\"index\", \"ids\", \"text\"}]})");
  cmd->callback([options] { run_inspect(*options, std::cout); });
}

}  // namespace lmforge::cli
