// defines: output_formats(), find_output_format()
#include "prep/output_formats.h"

#include "prep/electra_prep.h"
#include "prep/nvidia_hdf5_prep.h"
#include "util/error.h"

namespace lmforge::prep {

std::span<const OutputFormat> output_formats() {
  static const std::vector<OutputFormat> formats = {
      {"megatron",
       "Megatron indexed datasets <output-prefix>_<key>_<level>.bin/.idx, byte-identical to Megatron's "
       "tools/preprocess_data.py (and, for --input-format text, to the word-level script of Megatron v1.1.5 projects)",
       {"json", "text"},
       {},
       &run_prep},
      {"nvidia-hdf5",
       "NVIDIA DeepLearningExamples' BERT pretraining shards (.hdf5: input_ids, input_mask, segment_ids, "
       "masked_lm_positions, masked_lm_ids, next_sentence_labels), value for value what its "
       "create_pretraining_data.py writes for the same text, vocabulary, flags and seed",
       {"sentences", "json", "megatron"},
       {"--max-seq-length", "--max-predictions-per-seq", "--masked-lm-prob", "--short-seq-prob", "--dupe-factor",
        "--random-seed", "--do-lower-case", "--n-training-shards", "--n-test-shards", "--fraction-test-set"},
       &run_nvidia_hdf5_prep},
      {"electra-tfrecord",
       "ELECTRA's pretraining TFRecords <output-prefix>.tfrecord-<i>-of-<n> (input_ids, input_mask, segment_ids), "
       "example for example what google-research/electra's build_pretraining_dataset.py writes for the same files, "
       "vocabulary, flags and seed of Python's random (see src/prep/electra_prep.h)",
       {"sentences", "megatron"},
       {"--max-seq-length", "--random-seed", "--do-lower-case", "--num-output-files", "--num-processes"},
       &run_electra_tfrecord_prep},
  };
  return formats;
}

const OutputFormat& find_output_format(const std::string& name) {
  std::string names;
  for (const OutputFormat& f : output_formats()) {
    if (f.name == name) return f;
    names += (names.empty() ? "" : ", ") + f.name;
  }
  throw Error("--output-format " + name + ": unknown format; valid formats: " + names);
}

}  // namespace lmforge::prep
