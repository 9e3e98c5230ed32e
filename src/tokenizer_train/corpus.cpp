// read_corpus(): a TBB pipeline as prep's (an in-order reader, parallel line processing into per-thread sinks, an
// in-order stage that reports progress and the first bad line), so errors name the same line whatever the
// thread count.
#include "tokenizer_train/corpus.h"

#include <simdjson.h>
#include <sys/stat.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>

#include <optional>
#include <thread>

#include "prep/json_document.h"
#include "text/utf8_repair.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::tokenizer_train {
namespace {

constexpr size_t kBlockBytes = size_t(1) << 20;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_json_lines_name(std::string name) {
  for (std::string_view z : {".gz", ".zst", ".xz"})
    if (ends_with(name, z)) name.resize(name.size() - z.size());
  return ends_with(name, ".jsonl") || ends_with(name, ".json");
}

struct Block {
  size_t file = 0;
  data::LineBlock lines;
  uint64_t file_bytes_read = 0;
  // Filled by the processing stage.
  uint64_t documents = 0, training_lines = 0, replaced = 0;
  std::optional<std::pair<uint64_t, std::string>> invalid;  // first bad line: number, reason
};

struct Worker {
  explicit Worker(const CorpusOptions& options, const std::function<std::unique_ptr<LineSink>()>& make_sink)
      : parser(options.json_keys), sink(make_sink()) {}
  prep::JsonDocumentParser parser;
  prep::ParsedDocument doc;
  std::unique_ptr<LineSink> sink;
  std::string text;  // a document's text + "\n", or a repaired block
};

void process_json(Block& block, Worker& worker, const CorpusOptions& options) {
  const std::string& bytes = block.lines.bytes;
  const size_t readable_end = bytes.capacity();
  size_t pos = 0, overlong = 0;
  for (uint64_t n = 0; n < block.lines.line_count; ++n) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    std::string_view line(bytes.data() + pos, end - pos);
    std::string reason;
    if (overlong < block.lines.overlong.size() && block.lines.overlong[overlong] == n) {
      ++overlong;
      reason = "line longer than " + std::to_string(options.max_line_bytes) + " bytes (--max-line-bytes raises it)";
    } else {
      reason = worker.parser.parse(line, readable_end - (pos + line.size()), worker.doc);
    }
    pos = end + 1;
    if (!reason.empty()) {
      block.invalid.emplace(block.lines.first_line + n, std::move(reason));
      return;
    }
    ++block.documents;
    block.replaced += worker.doc.invalid_utf8_replaced + worker.doc.lone_surrogates_replaced;
    for (const auto& texts : worker.doc.texts) {
      for (std::string_view text : texts) {
        worker.text.assign(text);
        worker.text += '\n';
        for_each_line(worker.text, [&](std::string_view l) {
          worker.sink->add_line(l);
          ++block.training_lines;
        });
      }
    }
  }
}

void process_text(Block& block, Worker& worker, const CorpusOptions& options) {
  if (!block.lines.overlong.empty()) {
    block.invalid.emplace(block.lines.first_line + block.lines.overlong.front(),
                          "line longer than " + std::to_string(options.max_line_bytes) +
                              " bytes (--max-line-bytes raises it)");
    return;
  }
  std::string_view text = block.lines.bytes;
  if (!simdjson::validate_utf8(text.data(), text.size())) {
    block.replaced += text::repair_utf8(text, worker.text);
    text = worker.text;
  }
  for_each_line(text, [&](std::string_view l) {
    worker.sink->add_line(l);
    ++block.training_lines;
  });
  block.documents += block.lines.line_count;
}

uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

}  // namespace

CorpusSummary read_corpus(const CorpusOptions& options, const std::function<std::unique_ptr<LineSink>()>& make_sink,
                          std::vector<std::unique_ptr<LineSink>>& sinks, const std::function<std::string()>& status) {
  if (options.json_keys.empty()) throw Error("--json-keys: give at least one key");
  const std::vector<std::string> files = data::expand_input_specs(options.inputs);
  std::vector<bool> json(files.size());
  CorpusSummary summary;
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    json[i] = options.format == InputFormat::kJsonLines ||
              (options.format == InputFormat::kAuto && is_json_lines_name(files[i]));
    total_bytes += file_size(files[i]);
  }
  summary.files = files.size();
  const int threads = options.threads > 0 ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
  tbb::enumerable_thread_specific<std::unique_ptr<Worker>> workers;
  std::unique_ptr<Worker> ordered_worker;  // options.ordered: one sink sees every block, in order
  ProgressLine progress(options.progress_seconds);

  size_t file_index = 0;
  std::unique_ptr<data::LineReader> reader;
  uint64_t bytes_before_file = 0;  // on-disk bytes of the files finished
  auto read_stage = [&](tbb::flow_control& control) -> Block* {
    auto block = std::make_unique<Block>();
    while (true) {
      if (!reader) {
        if (file_index >= files.size()) {
          control.stop();
          return nullptr;
        }
        reader = data::LineReader::open(files[file_index], options.max_line_bytes);
      }
      if (reader->next_block(block->lines, kBlockBytes)) {
        // simdjson reads up to 64 bytes past a line; keep that much allocated after the block's last line.
        block->lines.bytes.reserve(block->lines.bytes.size() + simdjson::SIMDJSON_PADDING);
        block->file = file_index;
        block->file_bytes_read = reader->file_bytes_read();
        return block.release();
      }
      bytes_before_file += reader->file_bytes_read();
      reader.reset();
      ++file_index;
    }
  };
  auto process_stage = [&](Block* block) -> Block* {
    std::unique_ptr<Worker>& worker = options.ordered ? ordered_worker : workers.local();
    if (!worker) worker = std::make_unique<Worker>(options, make_sink);
    if (json[block->file])
      process_json(*block, *worker, options);
    else
      process_text(*block, *worker, options);
    return block;
  };
  auto report_stage = [&](Block* raw) {
    std::unique_ptr<Block> block(raw);
    if (block->invalid)
      throw Error(input_location(files[block->file], block->invalid->first) + ": " + block->invalid->second);
    summary.documents += block->documents;
    summary.lines += block->training_lines;
    summary.replaced += block->replaced;
    if (progress.due()) {
      const uint64_t done = bytes_before_file + block->file_bytes_read;
      const double seconds = progress.elapsed_seconds();
      const double rate = seconds > 0 ? double(done) / seconds : 0;
      std::string line = "read " + format_count(done >> 20) + " / " + format_count(total_bytes >> 20) + " MB, " +
                         format_count(summary.documents) + " documents, " +
                         std::to_string(int(rate / 1e6)) + " MB/s";
      if (rate > 0 && total_bytes > done) line += ", ETA " + format_duration(double(total_bytes - done) / rate);
      if (status) line += ", " + status();
      progress.print(line);
    }
  };
  const tbb::filter_mode process_mode = options.ordered ? tbb::filter_mode::serial_in_order : tbb::filter_mode::parallel;
  try {
    tbb::parallel_pipeline(size_t(threads) * 4,
                           tbb::make_filter<void, Block*>(tbb::filter_mode::serial_in_order, read_stage) &
                               tbb::make_filter<Block*, Block*>(process_mode, process_stage) &
                               tbb::make_filter<Block*, void>(tbb::filter_mode::serial_in_order, report_stage));
  } catch (...) {
    progress.finish();
    throw;
  }
  progress.finish();
  if (ordered_worker) sinks.push_back(std::move(ordered_worker->sink));
  for (auto& worker : workers)
    if (worker) sinks.push_back(std::move(worker->sink));
  summary.input_bytes = total_bytes;
  summary.seconds = progress.elapsed_seconds();
  return summary;
}

}  // namespace lmforge::tokenizer_train
