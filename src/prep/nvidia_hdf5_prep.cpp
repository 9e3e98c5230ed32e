// defines: run_nvidia_hdf5_prep(), read_sentence_documents(), nvidia_vocab_ids(), nvidia_output_files(),
//          slice_documents() (see nvidia_hdf5_prep.h for how the work is spread over cores)
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

#include "data/line_reader.h"
#include "data/writer_lock.h"
#include "prep/nvidia_hdf5_writer.h"
#include "prep/text_inputs.h"
#include "text/bert_wordpiece.h"
#include "text/python_str.h"
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

NvidiaVocabIds nvidia_vocab_ids(const std::string& vocab_file) {
  const std::vector<std::string> lines = text::read_wordpiece_vocab(vocab_file, text::WordPieceFlavor::kNvidia);
  // load_vocab: vocab[token] = line number, in an OrderedDict: a repeated token keeps its first place in the key
  // order and takes its last line's id.
  std::unordered_map<std::string, size_t> key_index;
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

SentenceDocuments slice_documents(const SentenceDocuments& all, size_t first, size_t end) {
  SentenceDocuments out;
  const uint64_t s0 = all.document_begin[first], s1 = all.document_begin[end];
  const uint64_t i0 = all.sentence_begin[s0], i1 = all.sentence_begin[s1];
  out.ids.assign(all.ids.begin() + long(i0), all.ids.begin() + long(i1));
  for (uint64_t s = s0 + 1; s <= s1; ++s) out.sentence_begin.push_back(all.sentence_begin[s] - i0);
  for (size_t d = first + 1; d <= end; ++d) out.document_begin.push_back(all.document_begin[d] - s0);
  return out;
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

PrepSummary run_nvidia_hdf5_prep(const PrepOptions& options) {
  if (options.input_format != "sentences")
    throw Error("--output-format nvidia-hdf5 reads --input-format sentences (one sentence per line, a blank line "
                "between documents), not " + options.input_format);
  if (options.append_eod) throw Error("--append-eod does not apply to --output-format nvidia-hdf5 (BERT has no EOD)");
  if (options.split_sentences)
    throw Error("--split-sentences does not apply to --input-format sentences (the lines are the sentences)");
  check_nvidia_instance_options(options.nvidia);
  if (options.n_training_shards < 1) throw Error("--n-training-shards must be at least 1");
  if (options.n_test_shards < 0) throw Error("--n-test-shards must be 0 or more");
  if (!(options.fraction_test_set > 0 && options.fraction_test_set < 1))
    throw Error("--fraction-test-set must be between 0 and 1");
  if (options.workers < 0) throw Error("--workers must be at least 1 (or 0 for every core)");
  if (options.tokenizer.vocab_file.empty())
    throw Error("--output-format nvidia-hdf5 needs --vocab-file (BERT's vocab.txt)");
  const int workers = options.workers > 0 ? options.workers : int(std::max(1u, std::thread::hardware_concurrency()));

  const std::vector<std::string> files = expand_text_inputs(options.inputs);
  text::WordPieceOptions wp;
  wp.flavor = text::WordPieceFlavor::kNvidia;
  wp.lower_case = options.do_lower_case;
  const auto tokenizer = text::make_bert_wordpiece_tokenizer(options.tokenizer.vocab_file, wp);
  const NvidiaVocabIds vocab = nvidia_vocab_ids(options.tokenizer.vocab_file);

  create_output_dir(options.output_prefix);
  data::WriterLock lock(data::output_prefix_lock_base(options.output_prefix), "output prefix " + options.output_prefix);
  ProgressLine progress(options.progress_seconds);
  PrepSummary summary;
  const SentenceDocuments docs = read_sentence_documents(files, *tokenizer, options, summary);
  const std::vector<NvidiaOutputFile> outputs = nvidia_output_files(options, docs);
  for (const NvidiaOutputFile& f : outputs)
    for (const std::string& input : files) {
      std::error_code ec;  // an output that does not exist yet is no input
      if (fs::equivalent(input, f.path, ec))
        throw Error(f.path + ": is also an --input; choose another --output-prefix");
    }

  // Shards are independent (each restarts the generator from the seed): up to `workers` are replayed at once.
  for (size_t group = 0; group < outputs.size(); group += size_t(workers)) {
    const size_t end = std::min(outputs.size(), group + size_t(workers));
    std::vector<NvidiaInstances> made(end - group);
    {
      tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, size_t(workers));
      tbb::parallel_for(size_t(group), end, [&](size_t k) {
        const NvidiaOutputFile& f = outputs[k];
        if (f.first_document == 0 && f.end_document == docs.documents())
          made[k - group] = create_nvidia_instances(docs, vocab, options.nvidia);
        else
          made[k - group] = create_nvidia_instances(slice_documents(docs, f.first_document, f.end_document), vocab,
                                                    options.nvidia);
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
