// defines: run_prep(), print_summary()
//
// Three-stage pipeline (oneTBB parallel_pipeline): a serial reader hands out blocks of whole lines in input order,
// workers parse JSON and tokenize blocks in parallel (each thread owns its parser and tokenizer cache), and a
// serial in-order writer appends the blocks' documents to the datasets. The output is therefore in input order for
// any number of workers, and memory is bounded by the number of blocks in flight, not by the corpus.
#include "prep/prep.h"

#include <glob.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <ostream>
#include <thread>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>

#include "data/indexed_dataset.h"
#include "data/line_reader.h"
#include "data/writer_lock.h"
#include "prep/json_document.h"
#include "prep/range_reader.h"
#include "prep/text_inputs.h"
#include "text/python_str.h"
#include "text/sentence_splitter.h"
#include "text/utf8_repair.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::prep {
namespace {

struct InvalidLine {
  uint64_t line;
  std::string reason;
};

// Everything one block becomes, per JSON key: its token ids, and per accepted line the lengths of its sequences.
struct KeyTokens {
  std::vector<int32_t> ids;
  std::vector<int32_t> sequence_lengths;
  std::vector<uint32_t> sequences_per_document;
};

struct Block {
  size_t piece_index = 0;
  uint64_t file_bytes_read = 0;  // position of the reader in its piece after this block, for progress
  data::LineBlock lines;
  std::vector<KeyTokens> keys;
  std::vector<InvalidLine> invalid;
  uint64_t invalid_utf8 = 0, lone_surrogates = 0;
};

}  // namespace

// A thread's parser and encoder. Not file-private: PieceEncoders::Impl, a class of the header, holds one per thread.
struct PrepWorker {
  JsonDocumentParser parser;
  std::unique_ptr<text::TextEncoder> encoder;
  ParsedDocument doc;
  std::vector<int32_t> scratch;
  std::optional<text::SentenceSplitter> splitter;  // with --split-sentences (ICU iterators are per thread)
  std::vector<std::string_view> sentences;
  std::string repaired;  // --input-format text: a line with invalid UTF-8, repaired
  std::vector<std::array<size_t, 3>> line_start;  // encode_line(): each key's sizes before the line
};

namespace {

void encode_document(Block& block, PrepWorker& worker, const PrepOptions& options, std::optional<int32_t> eod);

// Runs `encode`, which appends one line's tokens to the block. A text the tokenizer refuses (an Error from it;
// NullTokenizer: not token ids) leaves nothing of the line in the block, whatever keys or sentences came before it,
// and makes the line invalid with that reason; false then.
template <class Encode>
bool encode_line(Block& block, PrepWorker& worker, uint64_t line_number, Encode encode) {
  worker.line_start.clear();
  for (const KeyTokens& k : block.keys)
    worker.line_start.push_back({k.ids.size(), k.sequence_lengths.size(), k.sequences_per_document.size()});
  try {
    encode();
    return true;
  } catch (const Error& e) {
    for (size_t k = 0; k < block.keys.size(); ++k) {
      block.keys[k].ids.resize(worker.line_start[k][0]);
      block.keys[k].sequence_lengths.resize(worker.line_start[k][1]);
      block.keys[k].sequences_per_document.resize(worker.line_start[k][2]);
    }
    block.invalid.push_back({line_number, e.what()});
    return false;
  }
}

// --input-format text: every line (as Python's text-mode readlines() cuts them: a lone '\r' ends one too) is one
// document of one sequence, its ids and then the EOD, so that an empty line still gives its EOD, as the word-level
// script that reads this format writes it. Without --append-eod an empty line is an empty document. Invalid UTF-8
// is repaired (U+FFFD, counted) as for JSON text.
void encode_text_line(Block& block, PrepWorker& worker, std::string_view raw, std::optional<int32_t> eod) {
  KeyTokens& out = block.keys[0];
  text::for_each_universal_line(raw, [&](std::string_view line) {
    if (text::find_invalid_utf8(line) != std::string_view::npos) {
      worker.repaired.clear();
      block.invalid_utf8 += text::repair_utf8(line, worker.repaired);
      line = worker.repaired;
    }
    const size_t before = out.ids.size();
    worker.encoder->encode(line, out.ids);
    if (eod) out.ids.push_back(*eod);
    const size_t count = out.ids.size() - before;
    if (count > 0) out.sequence_lengths.push_back(static_cast<int32_t>(count));
    out.sequences_per_document.push_back(count > 0 ? 1 : 0);
  });
}

// Parse and tokenize every line of a block (runs on any worker thread).
void encode_block(Block& block, PrepWorker& worker, const PrepOptions& options, std::optional<int32_t> eod) {
  const std::string& bytes = block.lines.bytes;
  const size_t readable_end = bytes.capacity();
  block.keys.assign(options.json_keys.size(), {});
  size_t pos = 0;
  size_t overlong = 0;  // next entry of block.lines.overlong
  for (uint64_t n = 0; n < block.lines.line_count; ++n) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    std::string_view line(bytes.data() + pos, end - pos);
    const uint64_t line_number = block.lines.first_line + n;
    const size_t next = end + 1;
    std::string reason;
    if (overlong < block.lines.overlong.size() && block.lines.overlong[overlong] == n) {
      ++overlong;  // its bytes were dropped by the reader
      reason = "line longer than " + std::to_string(options.max_line_bytes) +
               " bytes (--max-line-bytes raises the limit)";
    } else if (options.input_format == "text") {
      pos = next;
      if (!encode_line(block, worker, line_number, [&] { encode_text_line(block, worker, line, eod); }) &&
          !options.skip_invalid)
        return;  // the writer stops at the first invalid line anyway
      continue;
    } else {
      reason = worker.parser.parse(line, readable_end - (pos + line.size()), worker.doc);
    }
    pos = next;
    if (!reason.empty()) {
      block.invalid.push_back({line_number, std::move(reason)});
      if (!options.skip_invalid) return;  // the writer stops at the first invalid line anyway
      continue;
    }
    if (!encode_line(block, worker, line_number, [&] { encode_document(block, worker, options, eod); })) {
      if (!options.skip_invalid) return;
      continue;
    }
    block.invalid_utf8 += worker.doc.invalid_utf8_replaced;
    block.lone_surrogates += worker.doc.lone_surrogates_replaced;
  }
}

// One parsed JSON line's keys: its sentences' ids, sequence lengths and EOD, appended to the block.
void encode_document(Block& block, PrepWorker& worker, const PrepOptions& options, std::optional<int32_t> eod) {
  for (size_t k = 0; k < options.json_keys.size(); ++k) {
    KeyTokens& out = block.keys[k];
    uint32_t sequences = 0;
    // Megatron: each sentence that yields tokens is one sequence; empty ones are dropped; EOD joins the last.
    const std::vector<std::string_view>* sentences = &worker.doc.texts[k];
    if (worker.splitter && !worker.doc.is_list[k]) {  // a list value is already split
      worker.sentences.clear();
      for (std::string_view text : worker.doc.texts[k]) worker.splitter->split(text, worker.sentences);
      sentences = &worker.sentences;
    }
    for (std::string_view sentence : *sentences) {
      const size_t before = out.ids.size();
      worker.encoder->encode(sentence, out.ids);
      const size_t count = out.ids.size() - before;
      if (count == 0) continue;
      out.sequence_lengths.push_back(static_cast<int32_t>(count));
      ++sequences;
    }
    if (sequences > 0 && eod) {
      out.ids.push_back(*eod);
      ++out.sequence_lengths.back();
    }
    out.sequences_per_document.push_back(sequences);
  }
}

uint64_t file_size_or_zero(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Temporaries of an earlier run that was killed ("<name>.tmp-<pid>" whose process is gone) are removed, so a
// rerun leaves the directory clean. Files of a live process (another prep writing the same prefix) are kept.
void remove_stale_temporaries(const std::string& dataset_prefix) {
  for (const char* ext : {".bin", ".idx"}) {
    const std::string pattern = dataset_prefix + ext + ".tmp-*";
    glob_t matches{};
    if (::glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
      for (size_t i = 0; i < matches.gl_pathc; ++i) {
        const std::string path = matches.gl_pathv[i];
        const long pid = std::strtol(path.c_str() + path.rfind('-') + 1, nullptr, 10);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::remove(path.c_str());
      }
    }
    ::globfree(&matches);
  }
}

std::string megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

}  // namespace

struct PieceEncoders::Impl {
  tbb::enumerable_thread_specific<PrepWorker> workers;
};

PieceEncoders::PieceEncoders(const PrepOptions& options, const text::Tokenizer& tokenizer)
    : impl(std::make_unique<Impl>(Impl{tbb::enumerable_thread_specific<PrepWorker>([&options, &tokenizer] {
        PrepWorker w{JsonDocumentParser(options.json_keys), tokenizer.make_encoder(), {}, {}, {}, {}, {}, {}};
        if (options.split_sentences)
          w.splitter.emplace(text::SentenceSplitOptions{options.lang, options.keep_newlines});
        return w;
      })})) {}

PieceEncoders::~PieceEncoders() = default;

void prepare_pieces(const PrepOptions& options, const text::Tokenizer& tokenizer,
                    const std::vector<InputPiece>& pieces, const std::vector<data::IndexedDatasetWriter*>& writers,
                    PrepSummary& summary, const std::function<void(uint64_t bytes_done)>& on_block,
                    ProgressLine* progress, PieceEncoders* encoders) {
  std::optional<int32_t> eod;
  if (options.append_eod) eod = tokenizer.eod_id();
  std::vector<uint64_t> piece_offsets;  // bytes of all pieces before piece i, for progress
  uint64_t total = 0;
  for (const auto& p : pieces) {
    piece_offsets.push_back(total);
    total += p.size;
  }

  const int workers = options.workers > 0 ? options.workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(workers));
  std::unique_ptr<PieceEncoders> own;
  if (!encoders) {
    own = std::make_unique<PieceEncoders>(options, tokenizer);
    encoders = own.get();
  }
  tbb::enumerable_thread_specific<PrepWorker>& worker_state = encoders->impl->workers;

  size_t piece_index = 0;
  std::unique_ptr<data::LineReader> reader;
  uint64_t reported_invalid = 0;

  // The line number within the file of a line numbered within its piece (a range starts mid-file).
  auto location = [&](size_t piece, uint64_t line) {
    const InputPiece& p = pieces[piece];
    const uint64_t before = (!p.whole_file && p.begin > 0) ? count_lines_before(p.path, p.begin) : 0;
    return input_location(p.path, line + before);
  };

  auto read_stage = [&](tbb::flow_control& control) -> Block* {
    auto block = std::make_unique<Block>();
    while (true) {
      if (!reader) {
        if (piece_index >= pieces.size()) {
          control.stop();
          return nullptr;
        }
        const InputPiece& p = pieces[piece_index];
        if (p.whole_file)
          reader = data::LineReader::open(p.path, options.max_line_bytes);
        else
          reader = std::make_unique<RangeLineReader>(p.path, p.begin, p.end, options.max_line_bytes);
      }
      if (reader->next_block(block->lines, options.block_bytes)) {
        // simdjson reads up to 64 bytes past a line; keep that much allocated after the block's last line.
        block->lines.bytes.reserve(block->lines.bytes.size() + simdjson::SIMDJSON_PADDING);
        block->piece_index = piece_index;
        block->file_bytes_read = reader->file_bytes_read();
        return block.release();
      }
      reader.reset();
      ++piece_index;
    }
  };

  auto encode_stage = [&](Block* block) -> Block* {
    encode_block(*block, worker_state.local(), options, eod);
    return block;
  };

  auto write_stage = [&](Block* raw) {
    std::unique_ptr<Block> block(raw);
    if (!block->invalid.empty()) {
      if (!options.skip_invalid) {
        const auto& bad = block->invalid.front();
        throw Error(location(block->piece_index, bad.line) + ": " + bad.reason +
                    " (nothing was written; --skip-invalid skips such lines and reports them)");
      }
      for (const auto& bad : block->invalid) {
        if (reported_invalid++ < options.report_invalid) {
          if (progress) progress->finish();
          std::fprintf(stderr, "prep: skipped %s: %s\n", location(block->piece_index, bad.line).c_str(),
                       bad.reason.c_str());
        }
      }
      summary.skipped_lines += block->invalid.size();
    }
    for (size_t k = 0; k < writers.size(); ++k) {
      const KeyTokens& key = block->keys[k];
      size_t id_pos = 0, seq_pos = 0;
      for (uint32_t sequences : key.sequences_per_document) {
        for (uint32_t s = 0; s < sequences; ++s, ++seq_pos) {
          const auto length = static_cast<size_t>(key.sequence_lengths[seq_pos]);
          writers[k]->add_sequence(std::span<const int32_t>(key.ids.data() + id_pos, length));
          id_pos += length;
        }
        writers[k]->end_document();
        if (k == 0) {
          ++summary.documents;
          if (sequences == 0) ++summary.empty_documents;
        }
      }
      summary.tokens += key.ids.size();
      summary.sequences += key.sequence_lengths.size();
    }
    summary.invalid_utf8_replaced += block->invalid_utf8;
    summary.lone_surrogates_replaced += block->lone_surrogates;
    summary.text_bytes += block->lines.bytes.size();
    if (on_block) on_block(piece_offsets[block->piece_index] + block->file_bytes_read);
  };

  tbb::parallel_pipeline(
      static_cast<size_t>(workers) * 4,
      tbb::make_filter<void, Block*>(tbb::filter_mode::serial_in_order, read_stage) &
          tbb::make_filter<Block*, Block*>(tbb::filter_mode::parallel, encode_stage) &
          tbb::make_filter<Block*, void>(tbb::filter_mode::serial_in_order, write_stage));
  summary.input_bytes += total;
}

PrepSummary run_prep(const PrepOptions& options) {
  if (options.inputs.empty()) throw Error("no --input given");
  if (options.output_prefix.empty()) throw Error("no --output-prefix given");
  check_json_keys(options);
  if (options.workers < 0) throw Error("--workers must be at least 1 (or 0 for every core)");
  check_sentence_options(options);

  if (options.input_format != "json" && options.input_format != "text")
    throw Error("--output-format megatron reads --input-format json or text, not " + options.input_format +
                " (sentences are read by --output-format nvidia-hdf5)");
  const std::vector<std::string> files =
      options.input_format == "text" ? expand_text_inputs(options.inputs) : data::expand_input_specs(options.inputs);
  refuse_output_over_input(options, files);
  const auto tokenizer = text::make_tokenizer(options.tokenizer);
  check_eod(options, *tokenizer);
  const data::DType dtype = data::dtype_for_vocab_size(tokenizer->vocab_size());

  std::vector<InputPiece> pieces;
  uint64_t total_bytes = 0;
  for (const auto& f : files) {
    InputPiece p;
    p.path = f;
    p.size = file_size_or_zero(f);
    total_bytes += p.size;
    pieces.push_back(std::move(p));
  }

  create_output_dir(options.output_prefix);
  // One writer per prefix: a second run on it fails here naming this one's host and pid.
  data::WriterLock lock(data::output_prefix_lock_base(options.output_prefix), "output prefix " + options.output_prefix);

  PrepSummary summary;
  std::vector<std::unique_ptr<data::IndexedDatasetWriter>> writers;
  std::vector<data::IndexedDatasetWriter*> writer_ptrs;
  for (const auto& key : options.json_keys) {
    const std::string prefix = options.output_prefix + "_" + key + "_" + dataset_level(options);
    remove_stale_temporaries(prefix);
    writers.push_back(std::make_unique<data::IndexedDatasetWriter>(prefix, dtype));
    writer_ptrs.push_back(writers.back().get());
    summary.outputs.push_back(prefix);
  }

  ProgressLine progress(options.progress_seconds);
  uint64_t bytes_done = 0;
  auto report_progress = [&](bool force) {
    if (!force && !progress.due()) return;
    const double t = std::max(progress.elapsed_seconds(), 1e-9);
    std::string line = "prep: " + format_count(summary.documents) + " docs | " + megabytes(bytes_done);
    if (total_bytes) line += " of " + megabytes(total_bytes) + " (" + std::to_string(100 * bytes_done / total_bytes) + "%)";
    char rates[96];
    std::snprintf(rates, sizeof rates, " | %.1f MB/s | %.2f M tokens/s", bytes_done / t / 1e6, summary.tokens / t / 1e6);
    line += rates;
    if (total_bytes && bytes_done > 0 && bytes_done < total_bytes)
      line += " | ETA " + format_duration(t * double(total_bytes - bytes_done) / double(bytes_done));
    if (summary.skipped_lines) line += " | skipped " + format_count(summary.skipped_lines);
    progress.print(line);
  };

  try {
    prepare_pieces(options, *tokenizer, pieces, writer_ptrs, summary,
                   [&](uint64_t done) {
                     bytes_done = done;
                     report_progress(false);
                   },
                   &progress);
  } catch (...) {
    progress.finish();
    throw;  // writers are destroyed unfinished: their temporaries are removed
  }
  bytes_done = total_bytes;
  report_progress(true);
  progress.finish();

  lock.check_held();
  for (auto& writer : writers) writer->finish();
  summary.seconds = progress.elapsed_seconds();
  return summary;
}

void check_json_keys(const PrepOptions& options) {
  if (options.json_keys.empty()) throw Error("--json-keys needs at least one key");
  for (size_t i = 0; i < options.json_keys.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (options.json_keys[i] == options.json_keys[j])
        throw Error("--json-keys names \"" + options.json_keys[i] +
                    "\" twice; give each key once (each key is one dataset)");
}

void create_output_dir(const std::string& output_prefix) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(output_prefix).parent_path();
  if (parent.empty()) return;
  // The first part of the path that exists and is not a directory is what the user has to fix.
  for (fs::path part; const auto& piece : parent) {
    part /= piece;
    std::error_code ec;
    const auto st = fs::status(part, ec);
    if (!ec && fs::exists(st) && !fs::is_directory(st))
      throw Error("--output-prefix " + output_prefix + ": " + part.string() +
                  " is a file, not a directory, so nothing can be written under it");
  }
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec)
    throw Error("--output-prefix " + output_prefix + ": cannot create directory " + parent.string() + ": " +
                ec.message());
}

// --input-format text is named as the word-level scripts that read it name their output (<prefix>_text_sentence).
std::string dataset_level(const PrepOptions& options) {
  return options.split_sentences || options.input_format == "text" ? "sentence" : "document";
}

void refuse_output_over_input(const PrepOptions& options, const std::vector<std::string>& input_files) {
  namespace fs = std::filesystem;
  for (const auto& key : options.json_keys)
    for (const char* ext : {".bin", ".idx"}) {
      const std::string output = options.output_prefix + "_" + key + "_" + dataset_level(options) + ext;
      std::error_code ec;
      if (!fs::exists(output, ec)) continue;
      for (const std::string& input : input_files)
        if (fs::equivalent(input, output, ec))
          throw Error(input + ": is also the output " + output + " of --output-prefix " + options.output_prefix +
                      "; the run would overwrite its own input (choose another --output-prefix)");
    }
}

void check_sentence_options(const PrepOptions& options) {
  if (options.split_sentences) {
    text::SentenceSplitter check({options.lang, options.keep_newlines});  // an unknown --lang is an Error here
    return;
  }
  if (options.keep_newlines) throw Error("--keep-newlines applies with --split-sentences only");
  if (options.lang != "english") throw Error("--lang applies with --split-sentences only");
}

void check_eod(const PrepOptions& options, const text::Tokenizer& tokenizer) {
  if (options.append_eod && !tokenizer.eod_id())
    throw Error("--append-eod: tokenizer " + tokenizer.type_name() + " has no end-of-document token" +
                (options.tokenizer.type == "PretrainedFromHF"
                     ? "; name one of its tokens with --eod-token, or drop --append-eod"
                     : " (Megatron's BERT tokenizers have none); drop --append-eod"));
}

void print_summary(const PrepSummary& s, std::ostream& out) {
  const double t = std::max(s.seconds, 1e-9);
  char line[160];
  out << "documents:      " << format_count(s.documents);
  if (s.empty_documents) out << " (" << format_count(s.empty_documents) << " empty, kept as empty documents)";
  out << "\nsequences:      " << format_count(s.sequences) << "\ntokens:         " << format_count(s.tokens) << "\n";
  out << "skipped lines:  " << format_count(s.skipped_lines) << "\n";
  if (s.invalid_utf8_replaced || s.lone_surrogates_replaced)
    out << "replaced:       " << format_count(s.invalid_utf8_replaced) << " invalid UTF-8 sequences, "
        << format_count(s.lone_surrogates_replaced) << " lone surrogate escapes (each became U+FFFD)\n";
  std::snprintf(line, sizeof line, "input:          %.1f MB on disk, %.1f MB of text\n", s.input_bytes / 1e6,
                s.text_bytes / 1e6);
  out << line;
  std::snprintf(line, sizeof line, "wall time:      %.2f s (%.1f MB/s of text, %.2f M tokens/s)\n", s.seconds,
                s.text_bytes / t / 1e6, s.tokens / t / 1e6);
  out << line;
  if (s.instances) out << "instances:      " << format_count(s.instances) << "\n";
  for (const auto& prefix : s.outputs) {
    // Megatron datasets are named by their prefix; files of other formats by their whole name.
    const bool whole_name = (prefix.size() > 5 && prefix.compare(prefix.size() - 5, 5, ".hdf5") == 0) ||
                            prefix.find(".tfrecord-") != std::string::npos;
    out << "output:         " << prefix << (whole_name ? "\n" : ".bin / .idx\n");
  }
}

}  // namespace lmforge::prep
