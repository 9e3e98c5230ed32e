// defines: ElectraExampleBuilder, ElectraTokenizer, add_electra_text_file(), add_electra_megatron_dataset(),
//          electra_job_inputs() (see electra_examples.h)
#include "prep/electra_examples.h"

#include <algorithm>
#include <thread>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>

#include "data/indexed_dataset.h"
#include "text/bert_wordpiece.h"
#include "text/python_str.h"
#include "util/error.h"

namespace lmforge::prep {

ElectraExampleBuilder::ElectraExampleBuilder(int max_seq_length, PythonRandom& random)
    : max_length_(max_seq_length), target_length_(max_seq_length), random_(random) {
  if (max_seq_length < 5) throw Error("ELECTRA examples need a length of at least 5 (randint(5, M))");
}

void ElectraExampleBuilder::add_sentence(std::span<const int32_t> ids, ElectraExamples& out) {
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  sentence_end_.push_back(ids_.size());
  if (ids_.size() >= size_t(target_length_)) create_example(out);
}

void ElectraExampleBuilder::end_document(ElectraExamples& out) {
  if (!ids_.empty()) create_example(out);  // `(not line) and self._current_length != 0`
}

void ElectraExampleBuilder::create_example(ElectraExamples& out) {
  // Small chance of a single segment, as in classification tasks; -3 for the [CLS] and two [SEP] to come.
  const size_t first_target = random_.random() < 0.1 ? 100000 : size_t(target_length_ - 3) / 2;
  first_.clear();
  second_.clear();
  size_t start = 0;
  for (const size_t end : sentence_end_) {
    const size_t n = end - start;
    // Python's `or`/`and` short-circuit: the 50 % draw happens only when the first two tests fail and the third's
    // first two parts hold.
    const bool to_first = first_.empty() || first_.size() + n < first_target ||
                          (second_.empty() && first_.size() < first_target && random_.random() < 0.5);
    (to_first ? first_ : second_).insert((to_first ? first_ : second_).end(), ids_.begin() + long(start),
                                         ids_.begin() + long(end));
    start = end;
  }
  const size_t m = size_t(max_length_);
  if (first_.size() > m - 2) first_.resize(m - 2);                       // first_segment[:M - 2]
  const size_t room = m >= first_.size() + 3 ? m - first_.size() - 3 : 0;  // max(0, M - |A| - 3)
  if (second_.size() > room) second_.resize(room);
  ids_.clear();
  sentence_end_.clear();
  // Small chance of a random-length next example.
  target_length_ = random_.random() < 0.05 ? int(random_.randint(5, max_length_)) : max_length_;

  out.tokens.insert(out.tokens.end(), first_.begin(), first_.end());
  out.tokens.insert(out.tokens.end(), second_.begin(), second_.end());
  out.begin.push_back(out.tokens.size());
  out.first_length.push_back(uint32_t(first_.size()));
}

ElectraTokenizer::ElectraTokenizer(const std::string& vocab_file, bool lower_case) {
  const std::vector<std::string> lines = text::read_wordpiece_vocab(vocab_file, text::WordPieceFlavor::kNvidia);
  vocab_lines = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] == "[CLS]") cls_id = int32_t(i);
    if (lines[i] == "[SEP]") sep_id = int32_t(i);
  }
  if (cls_id < 0 || sep_id < 0)
    throw Error(vocab_file + ": the vocabulary has no " + std::string(cls_id < 0 ? "[CLS]" : "[SEP]") +
                " token (ELECTRA's examples are [CLS] A [SEP] B [SEP])");
  text::WordPieceOptions wp;
  wp.flavor = text::WordPieceFlavor::kNvidia;  // clean text deletes every C* character, as ELECTRA's
  wp.never_split = false;                      // ELECTRA's BasicTokenizer has no never_split list
  wp.max_input_chars_per_word = 200;           // ELECTRA's WordpieceTokenizer default (NVIDIA's is 100)
  wp.lower_case = lower_case;
  tokenizer = text::make_bert_wordpiece_tokenizer(vocab_file, wp);
}

namespace {

// A block of lines, tokenized: per line with tokens its id count, -1 for a blank line.
struct ElectraBlock {
  data::LineBlock lines;
  std::vector<int32_t> ids;
  std::vector<int32_t> lengths;
  uint64_t error_line = 0;
  std::string error;
};

void tokenize_block(ElectraBlock& block, text::TextEncoder& encoder, size_t max_line_bytes) {
  const std::string& bytes = block.lines.bytes;
  std::string without_cr;
  size_t pos = 0, overlong = 0;
  for (uint64_t n = 0; n < block.lines.line_count; ++n) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    std::string_view line(bytes.data() + pos, end - pos);
    pos = end + 1;
    if (overlong < block.lines.overlong.size() && block.lines.overlong[overlong] == n) {
      ++overlong;
      block.error_line = block.lines.first_line + n;
      block.error = "line longer than " + std::to_string(max_line_bytes) + " bytes (--max-line-bytes raises the limit)";
      return;
    }
    if (line.find('\r') != std::string_view::npos) {  // TensorFlow's ReadLine drops every '\r'
      without_cr.assign(line);
      std::erase(without_cr, '\r');
      line = without_cr;
    }
    if (const size_t bad = text::find_invalid_utf8(line); bad != std::string_view::npos) {
      block.error_line = block.lines.first_line + n;
      block.error = "invalid UTF-8 at byte " + std::to_string(bad + 1) +
                    " of the line (ELECTRA's script reads its input through TensorFlow's GFile as strict UTF-8 and "
                    "stops there too)";
      return;
    }
    const std::string_view sentence = text::python_strip(line);
    if (sentence.empty()) {
      block.lengths.push_back(-1);
      continue;
    }
    const size_t before = block.ids.size();
    encoder.encode(sentence, block.ids);
    if (block.ids.size() > before) block.lengths.push_back(int32_t(block.ids.size() - before));
  }
}

}  // namespace

void add_electra_text_file(const std::string& path, const ElectraTokenizer& tokenizer,
                           const ElectraReadOptions& options, ElectraExampleBuilder& builder, ElectraExamples& out,
                           ElectraReadStats& stats) {
  const int workers = options.workers > 0 ? options.workers : int(std::max(1u, std::thread::hardware_concurrency()));
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, size_t(workers));
  tbb::enumerable_thread_specific<std::unique_ptr<text::TextEncoder>> encoders(
      [&tokenizer] { return tokenizer.tokenizer->make_encoder(); });
  std::unique_ptr<data::LineReader> reader = data::LineReader::open(path, options.max_line_bytes);
  tbb::parallel_pipeline(
      size_t(workers) * 4,
      tbb::make_filter<void, ElectraBlock*>(tbb::filter_mode::serial_in_order,
                                            [&](tbb::flow_control& control) -> ElectraBlock* {
                                              auto block = std::make_unique<ElectraBlock>();
                                              if (!reader->next_block(block->lines, options.block_bytes)) {
                                                control.stop();
                                                return nullptr;
                                              }
                                              return block.release();
                                            }) &
          tbb::make_filter<ElectraBlock*, ElectraBlock*>(tbb::filter_mode::parallel,
                                                         [&](ElectraBlock* block) {
                                                           tokenize_block(*block, *encoders.local(),
                                                                          options.max_line_bytes);
                                                           return block;
                                                         }) &
          tbb::make_filter<ElectraBlock*, void>(tbb::filter_mode::serial_in_order, [&](ElectraBlock* raw) {
            std::unique_ptr<ElectraBlock> block(raw);
            if (block->error_line) throw Error(input_location(path, block->error_line) + ": " + block->error);
            size_t at = 0;
            for (const int32_t length : block->lengths) {
              if (length < 0) {
                builder.end_document(out);
                continue;
              }
              builder.add_sentence(std::span<const int32_t>(block->ids.data() + at, size_t(length)), out);
              at += size_t(length);
              ++stats.sentences;
            }
            stats.text_bytes += block->lines.bytes.size();
            stats.tokens += block->ids.size();
          }));
  builder.end_document(out);  // write_examples: add_line("") after the file's last line
  stats.input_bytes += reader->file_bytes_read();
}

void add_electra_megatron_dataset(const std::string& prefix_spec, size_t vocabulary_size,
                                  ElectraExampleBuilder& builder, ElectraExamples& out, ElectraReadStats& stats) {
  std::string prefix = prefix_spec;
  for (const char* ext : {".bin", ".idx"})  // a file name given for the prefix
    if (prefix.size() > 4 && prefix.compare(prefix.size() - 4, 4, ext) == 0) prefix.resize(prefix.size() - 4);
  const auto dataset = data::IndexedDataset::open(prefix);
  std::vector<int32_t> ids;
  for (uint64_t d = 0; d < dataset->document_count(); ++d) {
    for (int64_t s = dataset->document_index(d); s < dataset->document_index(d + 1); ++s) {
      ids.clear();
      dataset->read_sequence(uint64_t(s), ids);
      for (const int32_t id : ids)
        if (id < 0 || size_t(id) >= vocabulary_size)
          throw Error(prefix + ": sequence " + std::to_string(s) + " holds id " + std::to_string(id) +
                      ", outside the vocabulary's " + std::to_string(vocabulary_size) +
                      " entries (was the dataset made with another vocabulary?)");
      if (!ids.empty()) builder.add_sentence(ids, out);
      ++stats.sentences;
      stats.tokens += ids.size();
    }
    builder.end_document(out);
  }
  builder.end_document(out);  // the end of the "file"
  stats.input_bytes += dataset->bin_bytes() + dataset->idx_bytes();
}

std::vector<std::string> electra_job_inputs(const std::vector<std::string>& inputs, int job, int jobs,
                                            PythonRandom& random) {
  std::vector<std::string> mine;
  for (size_t i = size_t(job); i < inputs.size(); i += size_t(jobs)) mine.push_back(inputs[i]);
  random.shuffle(mine);
  return mine;
}

}  // namespace lmforge::prep
