// defines: run_nvidia_hdf5_prep(), read_sentence_documents(), nvidia_vocab_ids(), nvidia_output_files()
//          (see nvidia_hdf5_prep.h for how the work is spread over cores)
#include "prep/nvidia_hdf5_prep.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <unordered_map>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>

#include "data/indexed_dataset.h"
#include "data/line_reader.h"
#include "data/writer_lock.h"
#include "prep/json_document.h"
#include "prep/nvidia_hdf5_writer.h"
#include "prep/text_inputs.h"
#include "text/bert_wordpiece.h"
#include "text/python_str.h"
#include "text/sentence_splitter.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::prep {
namespace {

namespace fs = std::filesystem;

// One block of lines, tokenized: per kept line its id count, -1 where a blank line ends the document.
struct SentenceBlock {
  data::LineBlock lines;
  std::vector<int32_t> ids;
  std::vector<int32_t> lengths;
  uint64_t error_line = 0;  // first bad line (1-based within the file), 0 if none
  std::string error;
};

void tokenize_block(SentenceBlock& block, text::TextEncoder& encoder, const PrepOptions& options) {
  const std::string& bytes = block.lines.bytes;
  size_t pos = 0, overlong = 0;
  for (uint64_t n = 0; n < block.lines.line_count; ++n) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    const std::string_view raw(bytes.data() + pos, end - pos);
    pos = end + 1;
    const uint64_t line = block.lines.first_line + n;
    if (overlong < block.lines.overlong.size() && block.lines.overlong[overlong] == n) {
      ++overlong;
      block.error_line = line;
      block.error = "line longer than " + std::to_string(options.max_line_bytes) +
                    " bytes (--max-line-bytes raises the limit)";
      return;
    }
    if (const size_t bad = text::find_invalid_utf8(raw); bad != std::string_view::npos) {
      block.error_line = line;
      block.error = "invalid UTF-8 at byte " + std::to_string(bad + 1) +
                    " of the line (NVIDIA's script reads its input as strict UTF-8 and stops there too)";
      return;
    }
    text::for_each_universal_line(raw, [&](std::string_view piece) {
      const std::string_view sentence = text::python_strip(piece);
      if (sentence.empty()) {
        block.lengths.push_back(-1);
        return;
      }
      const size_t before = block.ids.size();
      encoder.encode(sentence, block.ids);
      if (block.ids.size() > before) block.lengths.push_back(static_cast<int32_t>(block.ids.size() - before));
    });
  }
}

std::string output_name(const std::string& prefix, const char* part, int index) {
  return prefix + "_" + part + "_" + std::to_string(index) + ".hdf5";
}

}  // namespace

SentenceDocuments read_sentence_documents(const std::vector<std::string>& files, const text::Tokenizer& tokenizer,
                                          const PrepOptions& options, PrepSummary& summary) {
  SentenceDocuments docs;
  const int workers = options.workers > 0 ? options.workers : int(std::max(1u, std::thread::hardware_concurrency()));
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, size_t(workers));
  tbb::enumerable_thread_specific<std::unique_ptr<text::TextEncoder>> encoders(
      [&tokenizer] { return tokenizer.make_encoder(); });
  for (const std::string& path : files) {
    std::unique_ptr<data::LineReader> reader = data::LineReader::open(path, options.max_line_bytes);
    tbb::parallel_pipeline(
        size_t(workers) * 4,
        tbb::make_filter<void, SentenceBlock*>(tbb::filter_mode::serial_in_order,
                                               [&](tbb::flow_control& control) -> SentenceBlock* {
                                                 auto block = std::make_unique<SentenceBlock>();
                                                 if (!reader->next_block(block->lines, options.block_bytes)) {
                                                   control.stop();
                                                   return nullptr;
                                                 }
                                                 return block.release();
                                               }) &
            tbb::make_filter<SentenceBlock*, SentenceBlock*>(tbb::filter_mode::parallel,
                                                             [&](SentenceBlock* block) {
                                                               tokenize_block(*block, *encoders.local(), options);
                                                               return block;
                                                             }) &
            tbb::make_filter<SentenceBlock*, void>(tbb::filter_mode::serial_in_order, [&](SentenceBlock* raw) {
              std::unique_ptr<SentenceBlock> block(raw);
              if (block->error_line) throw Error(input_location(path, block->error_line) + ": " + block->error);
              size_t at = 0;
              for (int32_t length : block->lengths) {
                if (length < 0) {
                  docs.end_document();
                  continue;
                }
                docs.add_sentence(block->ids.data() + at, size_t(length));
                at += size_t(length);
              }
              summary.text_bytes += block->lines.bytes.size();
              summary.tokens += block->ids.size();
            }));
    summary.input_bytes += reader->file_bytes_read();
  }
  docs.end_document();
  summary.documents = docs.documents();
  summary.sequences = docs.sentences();
  return docs;
}

namespace {

// A thread's JSON parser, sentence splitter and encoder for read_json_sentence_documents().
struct JsonSentenceWorker {
  JsonSentenceWorker(const PrepOptions& options, const text::Tokenizer& tokenizer)
      : parser(options.json_keys), encoder(tokenizer.make_encoder()) {
    if (options.split_sentences) splitter.emplace(text::SentenceSplitOptions{options.lang, options.keep_newlines});
  }
  JsonDocumentParser parser;
  std::unique_ptr<text::TextEncoder> encoder;
  std::optional<text::SentenceSplitter> splitter;
  ParsedDocument doc;
  std::vector<std::string_view> sentences;
};

struct JsonBlock {
  data::LineBlock lines;
  std::vector<int32_t> ids;
  std::vector<int32_t> lengths;  // per sentence with tokens; -1 ends a document (a JSON line)
  std::vector<std::pair<uint64_t, std::string>> invalid;
  uint64_t invalid_utf8 = 0, lone_surrogates = 0;
};

void parse_json_block(JsonBlock& block, JsonSentenceWorker& w, const PrepOptions& options) {
  const std::string& bytes = block.lines.bytes;
  size_t pos = 0, overlong = 0;
  for (uint64_t n = 0; n < block.lines.line_count; ++n) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    const std::string_view line(bytes.data() + pos, end - pos);
    pos = end + 1;
    std::string reason;
    if (overlong < block.lines.overlong.size() && block.lines.overlong[overlong] == n) {
      ++overlong;
      reason = "line longer than " + std::to_string(options.max_line_bytes) + " bytes (--max-line-bytes raises it)";
    } else {
      reason = w.parser.parse(line, bytes.capacity() - (size_t(line.data() - bytes.data()) + line.size()), w.doc);
    }
    if (!reason.empty()) {
      block.invalid.emplace_back(block.lines.first_line + n, std::move(reason));
      if (!options.skip_invalid) return;
      continue;
    }
    block.invalid_utf8 += w.doc.invalid_utf8_replaced;
    block.lone_surrogates += w.doc.lone_surrogates_replaced;
    const std::vector<std::string_view>* sentences = &w.doc.texts[0];
    if (w.splitter && !w.doc.is_list[0]) {
      w.sentences.clear();
      for (std::string_view text : w.doc.texts[0]) w.splitter->split(text, w.sentences);
      sentences = &w.sentences;
    }
    for (std::string_view sentence : *sentences) {
      const size_t before = block.ids.size();
      w.encoder->encode(text::python_strip(sentence), block.ids);
      if (block.ids.size() > before) block.lengths.push_back(static_cast<int32_t>(block.ids.size() - before));
    }
    block.lengths.push_back(-1);
  }
}

}  // namespace

SentenceDocuments read_json_sentence_documents(const std::vector<std::string>& files, const text::Tokenizer& tokenizer,
                                               const PrepOptions& options, PrepSummary& summary) {
  if (options.json_keys.size() != 1)
    throw Error("--output-format nvidia-hdf5 reads one --json-keys key (each JSON line is one document)");
  SentenceDocuments docs;
  const int workers = options.workers > 0 ? options.workers : int(std::max(1u, std::thread::hardware_concurrency()));
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, size_t(workers));
  tbb::enumerable_thread_specific<JsonSentenceWorker> state([&] { return JsonSentenceWorker(options, tokenizer); });
  uint64_t reported = 0;
  for (const std::string& path : files) {
    std::unique_ptr<data::LineReader> reader = data::LineReader::open(path, options.max_line_bytes);
    tbb::parallel_pipeline(
        size_t(workers) * 4,
        tbb::make_filter<void, JsonBlock*>(tbb::filter_mode::serial_in_order,
                                           [&](tbb::flow_control& control) -> JsonBlock* {
                                             auto block = std::make_unique<JsonBlock>();
                                             if (!reader->next_block(block->lines, options.block_bytes)) {
                                               control.stop();
                                               return nullptr;
                                             }
                                             // simdjson reads up to 64 bytes past a line.
                                             block->lines.bytes.reserve(block->lines.bytes.size() +
                                                                        simdjson::SIMDJSON_PADDING);
                                             return block.release();
                                           }) &
            tbb::make_filter<JsonBlock*, JsonBlock*>(tbb::filter_mode::parallel,
                                                     [&](JsonBlock* block) {
                                                       parse_json_block(*block, state.local(), options);
                                                       return block;
                                                     }) &
            tbb::make_filter<JsonBlock*, void>(tbb::filter_mode::serial_in_order, [&](JsonBlock* raw) {
              std::unique_ptr<JsonBlock> block(raw);
              for (const auto& [line, reason] : block->invalid) {
                if (!options.skip_invalid)
                  throw Error(input_location(path, line) + ": " + reason +
                              " (nothing was written; --skip-invalid skips such lines and reports them)");
                if (reported++ < options.report_invalid)
                  std::fprintf(stderr, "prep: skipped %s: %s\n", input_location(path, line).c_str(), reason.c_str());
              }
              summary.skipped_lines += block->invalid.size();
              size_t at = 0;
              for (int32_t length : block->lengths) {
                if (length < 0) {
                  docs.end_document();
                  continue;
                }
                docs.add_sentence(block->ids.data() + at, size_t(length));
                at += size_t(length);
              }
              summary.invalid_utf8_replaced += block->invalid_utf8;
              summary.lone_surrogates_replaced += block->lone_surrogates;
              summary.text_bytes += block->lines.bytes.size();
              summary.tokens += block->ids.size();
            }));
    summary.input_bytes += reader->file_bytes_read();
  }
  summary.documents = docs.documents();
  summary.sequences = docs.sentences();
  return docs;
}

SentenceDocuments read_megatron_sentence_documents(const std::vector<std::string>& prefixes, size_t vocabulary_size,
                                                   PrepSummary& summary) {
  SentenceDocuments docs;
  std::vector<int32_t> ids;
  for (std::string prefix : prefixes) {
    for (const char* ext : {".bin", ".idx"})  // a file name given for the prefix
      if (prefix.size() > 4 && prefix.compare(prefix.size() - 4, 4, ext) == 0) prefix.resize(prefix.size() - 4);
    const auto dataset = data::IndexedDataset::open(prefix);
    for (uint64_t d = 0; d < dataset->document_count(); ++d) {
      for (int64_t s = dataset->document_index(d); s < dataset->document_index(d + 1); ++s) {
        ids.clear();
        dataset->read_sequence(uint64_t(s), ids);
        for (int32_t id : ids)
          if (id < 0 || size_t(id) >= vocabulary_size)
            throw Error(prefix + ": sequence " + std::to_string(s) + " holds id " + std::to_string(id) +
                        ", outside the --vocab-file's " + std::to_string(vocabulary_size) +
                        " entries (was the dataset made with another vocabulary?)");
        if (!ids.empty()) docs.add_sentence(ids.data(), ids.size());
        summary.tokens += ids.size();
      }
      docs.end_document();
    }
    summary.input_bytes += dataset->bin_bytes() + dataset->idx_bytes();
  }
  summary.documents = docs.documents();
  summary.sequences = docs.sentences();
  return docs;
}

NvidiaVocabIds nvidia_vocab_ids(const std::string& vocab_file) {
  return nvidia_vocab_ids(text::read_wordpiece_vocab(vocab_file, text::WordPieceFlavor::kNvidia), vocab_file);
}

NvidiaVocabIds nvidia_vocab_ids(const std::vector<std::string>& lines, const std::string& vocab_file) {
  // load_vocab: vocab[token] = line number, in an OrderedDict: a repeated token keeps its first place in the key
  // order and takes its last line's id.
  std::unordered_map<std::string_view, size_t> key_index;
  key_index.reserve(lines.size());
  NvidiaVocabIds v;
  for (size_t line = 0; line < lines.size(); ++line) {
    auto [it, added] = key_index.try_emplace(lines[line], v.words.size());
    if (added) v.words.push_back(static_cast<int32_t>(line));
    else v.words[it->second] = static_cast<int32_t>(line);
  }
  auto id_of = [&](const char* token) {
    const auto it = key_index.find(token);
    if (it == key_index.end())
      throw Error(vocab_file + ": the vocabulary has no " + token + " token (NVIDIA's instances need [CLS], [SEP] "
                  "and [MASK])");
    return v.words[it->second];
  };
  v.cls = id_of("[CLS]");
  v.sep = id_of("[SEP]");
  v.mask = id_of("[MASK]");
  return v;
}

std::vector<NvidiaOutputFile> nvidia_output_files(const PrepOptions& options, const SentenceDocuments& docs) {
  const size_t n = docs.documents();
  if (options.n_training_shards == 1 && options.n_test_shards == 0)
    return {NvidiaOutputFile{options.output_prefix + ".hdf5", 0, n}};
  // Cut points by sentence count: document d goes to the part its first sentence falls in.
  const double total = double(docs.sentences());
  const double training = options.n_test_shards > 0 ? total * (1.0 - options.fraction_test_set) : total;
  std::vector<NvidiaOutputFile> files;
  auto cut = [&](const char* part, int shards, double from, double to, bool last_part, size_t& doc) {
    for (int i = 0; i < shards; ++i) {
      const double upto = from + (to - from) * double(i + 1) / double(shards);
      NvidiaOutputFile f{output_name(options.output_prefix, part, i), doc, doc};
      const bool takes_rest = last_part && i + 1 == shards;
      while (f.end_document < n && (takes_rest || double(docs.document_begin[f.end_document]) < upto))
        ++f.end_document;
      doc = f.end_document;
      files.push_back(f);
    }
  };
  size_t doc = 0;
  cut("training", options.n_training_shards, 0, training, options.n_test_shards == 0, doc);
  cut("test", options.n_test_shards, training, total, true, doc);
  return files;
}

void check_nvidia_hdf5_options(const PrepOptions& options) {
  if (options.input_format != "sentences" && options.input_format != "json" && options.input_format != "megatron")
    throw Error("--output-format nvidia-hdf5 reads --input-format sentences (one sentence per line, a blank line "
                "between documents), json or megatron, not " + options.input_format);
  if (options.append_eod) throw Error("--append-eod does not apply to --output-format nvidia-hdf5 (BERT has no EOD)");
  if (options.split_sentences && options.input_format != "json")
    throw Error("--split-sentences applies to --input-format json (sentences and megatron inputs are already split)");
  check_sentence_options(options);
  check_nvidia_instance_options(options.nvidia);
  if (options.n_training_shards < 1) throw Error("--n-training-shards must be at least 1");
  if (options.n_test_shards < 0) throw Error("--n-test-shards must be 0 or more");
  if (!(options.fraction_test_set > 0 && options.fraction_test_set < 1))
    throw Error("--fraction-test-set must be between 0 and 1");
  if (options.workers < 0) throw Error("--workers must be at least 1 (or 0 for every core)");
  if (options.tokenizer.vocab_file.empty())
    throw Error("--output-format nvidia-hdf5 needs --vocab-file (BERT's vocab.txt)");
}

std::vector<std::string> nvidia_input_files(const PrepOptions& options) {
  if (options.input_format == "sentences") return expand_text_inputs(options.inputs);
  if (options.input_format == "json") return data::expand_input_specs(options.inputs);
  return options.inputs;  // Megatron dataset prefixes
}

NvidiaTokenizer::NvidiaTokenizer(const PrepOptions& options) {
  // The vocabulary is read once for both (reading and checking its lines was a few percent of a small run).
  const std::string& file = options.tokenizer.vocab_file;
  std::vector<std::string> lines = text::read_wordpiece_vocab(file, text::WordPieceFlavor::kNvidia);
  vocab = nvidia_vocab_ids(lines, file);
  text::WordPieceOptions wp;
  wp.flavor = text::WordPieceFlavor::kNvidia;
  wp.lower_case = options.do_lower_case;
  tokenizer = text::make_bert_wordpiece_tokenizer(std::move(lines), wp, file);
}

SentenceDocuments read_nvidia_documents(const std::vector<std::string>& files, const NvidiaTokenizer& t,
                                        const PrepOptions& options, PrepSummary& summary) {
  if (options.input_format == "sentences") return read_sentence_documents(files, *t.tokenizer, options, summary);
  if (options.input_format == "json") return read_json_sentence_documents(files, *t.tokenizer, options, summary);
  const size_t lines = size_t(*std::max_element(t.vocab.words.begin(), t.vocab.words.end())) + 1;
  return read_megatron_sentence_documents(files, lines, summary);
}

int nvidia_workers(const PrepOptions& options) {
  return options.workers > 0 ? options.workers : int(std::max(1u, std::thread::hardware_concurrency()));
}

PrepSummary run_nvidia_hdf5_prep(const PrepOptions& options) {
  check_nvidia_hdf5_options(options);
  const int workers = nvidia_workers(options);
  const std::vector<std::string> files = nvidia_input_files(options);
  const NvidiaTokenizer nvidia(options);

  create_output_dir(options.output_prefix);
  data::WriterLock lock(data::output_prefix_lock_base(options.output_prefix), "output prefix " + options.output_prefix);
  ProgressLine progress(options.progress_seconds);
  PrepSummary summary;
  const SentenceDocuments docs = read_nvidia_documents(files, nvidia, options, summary);
  const std::vector<NvidiaOutputFile> outputs = nvidia_output_files(options, docs);
  for (const NvidiaOutputFile& f : outputs)
    for (const std::string& input : files) {
      std::error_code ec;  // an output that does not exist yet is no input
      if (fs::equivalent(input, f.path, ec))
        throw Error(f.path + ": is also an --input; choose another --output-prefix");
    }

  // Under the lock no other run writes these names: any <output>.tmp-* is a killed run's, removed here.
  for (const NvidiaOutputFile& f : outputs) {
    const fs::path dir = fs::path(f.path).parent_path().empty() ? fs::path(".") : fs::path(f.path).parent_path();
    const std::string stale = fs::path(f.path).filename().string() + ".tmp-";
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind(stale, 0) == 0) fs::remove(e.path(), ec);
  }

  // Shards are independent (each restarts the generator from the seed): up to `workers` are replayed at once.
  for (size_t group = 0; group < outputs.size(); group += size_t(workers)) {
    const size_t end = std::min(outputs.size(), group + size_t(workers));
    std::vector<NvidiaInstances> made(end - group);
    {
      tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, size_t(workers));
      tbb::parallel_for(size_t(group), end, [&](size_t k) {
        const NvidiaOutputFile& f = outputs[k];
        made[k - group] = create_nvidia_instances(docs, f.first_document, f.end_document, nvidia.vocab, options.nvidia);
      });
    }
    for (size_t k = group; k < end; ++k) {
      const std::string temporary = outputs[k].path + ".tmp-" + std::to_string(::getpid());
      try {
        write_nvidia_hdf5(temporary, made[k - group], workers);
        lock.check_held();
        fs::rename(temporary, outputs[k].path);
      } catch (...) {
        std::error_code ignored;
        fs::remove(temporary, ignored);
        throw;
      }
      summary.instances += made[k - group].size();
      summary.outputs.push_back(outputs[k].path);
      made[k - group] = {};
    }
  }
  progress.finish();
  summary.seconds = progress.elapsed_seconds();
  return summary;
}

}  // namespace lmforge::prep
