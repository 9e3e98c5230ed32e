// defines: ElectraPretrainingData::from_megatron(), from_text_files(), get()
#include "datasets/electra_pretraining_data.h"

#include "prep/python_random.h"
#include "util/error.h"

namespace lmforge::datasets {

ElectraPretrainingData ElectraPretrainingData::from_megatron(const std::vector<std::string>& prefixes,
                                                             const std::string& vocab_file,
                                                             const ElectraDataOptions& options) {
  // Only the special ids and the vocabulary's size are needed; the text tokenizer is built but not used.
  const prep::ElectraTokenizer tokenizer(vocab_file, true);
  ElectraPretrainingData data;
  data.examples_.max_seq_length = options.max_seq_length;
  data.examples_.cls_id = tokenizer.cls_id;
  data.examples_.sep_id = tokenizer.sep_id;
  prep::PythonRandom random(options.random_seed);
  const std::vector<std::string> order = prep::electra_job_inputs(prefixes, 0, 1, random);
  prep::ElectraExampleBuilder builder(options.max_seq_length, random);
  for (const std::string& prefix : order)
    prep::add_electra_megatron_dataset(prefix, tokenizer.vocab_lines, builder, data.examples_, data.stats_);
  return data;
}

ElectraPretrainingData ElectraPretrainingData::from_text_files(const std::vector<std::string>& files,
                                                               const std::string& vocab_file, bool lower_case,
                                                               const ElectraDataOptions& options) {
  const prep::ElectraTokenizer tokenizer(vocab_file, lower_case);
  ElectraPretrainingData data;
  data.examples_.max_seq_length = options.max_seq_length;
  data.examples_.cls_id = tokenizer.cls_id;
  data.examples_.sep_id = tokenizer.sep_id;
  prep::PythonRandom random(options.random_seed);
  const std::vector<std::string> order = prep::electra_job_inputs(files, 0, 1, random);
  prep::ElectraExampleBuilder builder(options.max_seq_length, random);
  for (const std::string& file : order)
    prep::add_electra_text_file(file, tokenizer, options.read, builder, data.examples_, data.stats_);
  return data;
}

void ElectraPretrainingData::get(size_t i, std::span<int32_t> input_ids, std::span<int32_t> input_mask,
                                 std::span<int32_t> segment_ids) const {
  const size_t m = size_t(seq_length());
  if (i >= size()) throw Error("ELECTRA example " + std::to_string(i) + " of " + std::to_string(size()));
  if (input_ids.size() != m || input_mask.size() != m || segment_ids.size() != m)
    throw Error("ELECTRA example " + std::to_string(i) + ": buffers of " + std::to_string(m) + " values expected");
  examples_.row(i, input_ids.data(), input_mask.data(), segment_ids.data());
}

}  // namespace lmforge::datasets
