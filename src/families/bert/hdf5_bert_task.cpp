// defines: Hdf5BertTask
#include "families/bert/hdf5_bert_task.h"

#include <algorithm>

#include "util/error.h"
#include "util/strings.h"

namespace lmforge::train {
namespace {


// The shards were masked for one sequence length; the model's position table and the batches follow --seq-length.
void check_seq_length(const datasets::Hdf5BertShards& shards, int64_t seq_length, const char* which) {
  if (shards.seq_length() != seq_length)
    throw Error("--seq-length " + int_text(seq_length) + " differs from the sequence length " + int_text(shards.seq_length()) +
                " of the " + which + " shards (" + shards.shards().front().path +
                "): NVIDIA's shards are masked and padded for one length; pass --seq-length " +
                int_text(shards.seq_length()));
}

// The first id of `values` that is not below `vocab` (−1: none).
int64_t first_outside(const std::vector<int32_t>& values, int64_t vocab) {
  for (size_t p = 0; p < values.size(); p++)
    if (values[p] >= vocab) return (int64_t)p;
  return -1;
}

}  // namespace

Hdf5BertTask::Hdf5BertTask(const Hdf5BertTaskConfig& config) : config_(config) {
  using datasets::Hdf5Split;
  streams_[(int)SplitKind::TRAIN] = std::make_unique<datasets::Hdf5BertShards>(
      datasets::list_hdf5_bert_shards(config.spec, Hdf5Split::kTrain), config.seed);
  check_seq_length(*streams_[0], config.seq_length, "training");
  const std::vector<std::string> valid = datasets::list_hdf5_bert_shards(config.spec, Hdf5Split::kValid);
  if (valid.empty()) {
    no_validation_ = "no validation shards (file names with 'test', 'valid' or 'eval') in " + config.spec;
  } else if (config.samples_per_split[(int)SplitKind::VALID] <= 0) {
    no_validation_ = int_text((int64_t)valid.size()) + " validation shards in " + config.spec + " left unread (no "
                     "evaluation is asked: --eval-iters 0)";
  } else {
    streams_[(int)SplitKind::VALID] = std::make_unique<datasets::Hdf5BertShards>(valid, config.seed);
    check_seq_length(*streams_[1], config.seq_length, "validation");
  }
  read(SplitKind::TRAIN, 0);
}

std::vector<std::string> Hdf5BertTask::loss_names() const {
  if (config_.binary_head) return {"lm loss", "nsp loss"};
  return {"lm loss"};
}

int64_t Hdf5BertTask::split_size(SplitKind split) const {
  const auto& s = streams_[(int)split];
  if (!s) return 0;
  const int64_t per_epoch = s->samples_per_epoch();
  const int64_t epochs = std::max<int64_t>(1, (config_.samples_per_split[(int)split] + per_epoch - 1) / per_epoch);
  return epochs * per_epoch;
}

void Hdf5BertTask::read(SplitKind split, int64_t index) {
  datasets::Hdf5BertShards& s = *streams_[(int)split];
  s.sample(index, sample_);
  // The embedding and the MLM head have rows for the tokenizer's ids only: a shard made with another vocabulary
  // is named here instead of failing inside the model.
  const int64_t vocab = config_.vocab_size;
  const int64_t in_text = first_outside(sample_.text, vocab), in_labels = first_outside(sample_.labels, vocab);
  // NVIDIA's samples are sentence pairs: segment_ids 1 marks the second, a row of the token-type table.
  const int64_t in_types = config_.binary_head ? first_outside(sample_.types, config_.type_vocab_size) : -1;
  if (in_text < 0 && in_labels < 0 && in_types < 0) return;
  const datasets::Hdf5BertShards::Location at = s.locate(index);
  if (in_types >= 0)
    throw Error(s.shards()[(size_t)at.file].path + ": row " + int_text(at.row) + " has segment_ids " +
                int_text(sample_.types[(size_t)in_types]) + " (position " + int_text(in_types) +
                ": the shards hold sentence pairs), but the model has " + int_text(config_.type_vocab_size) +
                " token type" + (config_.type_vocab_size == 1 ? "" : "s") + " (" + config_.type_vocab_source +
                "); set \"type_vocab_size\": 2 as NVIDIA's bert_config.json has it, or train without segments and "
                "the next-sentence head (--bert-no-binary-head)");
  const bool text = in_text >= 0;
  const int64_t p = text ? in_text : in_labels;
  const int32_t id = text ? sample_.text[(size_t)p] : sample_.labels[(size_t)p];
  throw Error(s.shards()[(size_t)at.file].path + ": row " + int_text(at.row) + " holds token id " + int_text(id) + " in " +
              (text ? "input_ids" : "masked_lm_ids") + " (position " + int_text(p) + "), outside the vocabulary of " +
              int_text(vocab) + " tokens (" + config_.tokenizer_note + "); were the shards made with another vocabulary?");
}

void Hdf5BertTask::fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) {
  if (!streams_[(int)split])
    throw Error(std::string("HDF5 BERT shards: there is no ") + split_kind_name(split) + " split");
  const int B = micro_batch, T = (int)config_.seq_length;
  const bool head = config_.binary_head;
  const size_t n = (size_t)B * T;
  batch.B = B;
  batch.T = T;
  batch.tokens.resize(n);
  batch.targets.resize(n);
  batch.loss_mask.resize(n);
  batch.token_types.resize(head ? n : 0);
  batch.padding.resize(n);
  batch.labels.resize(head ? B : 0);
  for (int b = 0; b < B; b++) {
    read(split, first + b);
    const size_t at = (size_t)b * T;
    std::copy(sample_.text.begin(), sample_.text.end(), batch.tokens.begin() + at);
    std::copy(sample_.labels.begin(), sample_.labels.end(), batch.targets.begin() + at);
    std::transform(sample_.loss_mask.begin(), sample_.loss_mask.end(), batch.loss_mask.begin() + at,
                   [](int32_t m) { return (float)m; });
    std::copy(sample_.padding_mask.begin(), sample_.padding_mask.end(), batch.padding.begin() + at);
    if (head) {
      std::copy(sample_.types.begin(), sample_.types.end(), batch.token_types.begin() + at);
      batch.labels[b] = sample_.is_random;
    }
  }
}

std::string Hdf5BertTask::summary() const {
  std::string out;
  for (int k = 0; k < 2; k++) {
    const auto& s = streams_[k];
    if (!s) continue;
    out += std::string("bert ") + split_kind_name(SplitKind(k)) + ": NVIDIA HDF5 shards, " +
           int_text((int64_t)s->shards().size()) + " files, " + int_text(s->samples_per_epoch()) + " samples per epoch, " +
           "sequence length " + int_text(s->seq_length()) + ", order seeded by --seed " + int_text((int64_t)config_.seed) +
           "\n";
  }
  if (!no_validation_.empty()) out += "bert validation: " + no_validation_ + ": no evaluation\n";
  out += "bert: masks are the shards' own (static, NVIDIA's create_pretraining_data.py); splits come from the file "
         "names (--split does not apply); ";
  out += config_.binary_head ? "the second loss is next-sentence prediction (\"nsp loss\")\n"
                             : "--bert-no-binary-head: next_sentence_labels and segment_ids are not used\n";
  return out;
}

std::string Hdf5BertTask::sample_json(SplitKind split, int64_t index) {
  read(split, index);
  std::string line = datasets::bert_sample_json((datasets::Split)split, index, sample_);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

}  // namespace lmforge::train
