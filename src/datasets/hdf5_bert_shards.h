// defines: BertExample (one BERT sample, Megatron BertDataset's fields), Hdf5BertShard / read_hdf5_bert_shard()
//   (one NVIDIA DLE pre-masked shard, validated), probe_hdf5_bert_shard(), list_hdf5_bert_shards() (a directory,
//   glob or file → the training or validation shards, NVIDIA's naming rule), hdf5_bert_example(), and
//   Hdf5BertShards (the shards as one endless, seeded, resumable stream of samples)
// Format: ../shared/docs/bert-t5-reference-notes.md §5.1–5.2 (NVIDIA DeepLearningExamples BERT,
// create_pretraining_data.py → run_pretraining.py). Read through the HDF5 C library (serial build).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "datasets/bert_dataset.h"

namespace lmforge::datasets {

// One BERT training sample: Megatron's BertDataset struct (datasets/bert_dataset.h), so both data routes feed the
// same model code and print the same JSON fields. From an NVIDIA shard row (hdf5_bert_example()):
//   text         = input_ids (masking already applied when the shard was made), length L
//   types        = segment_ids
//   labels       = −1 everywhere, except labels[masked_lm_positions[j]] = masked_lm_ids[j] for j < n, where n is
//                  the index of the first 0 in masked_lm_positions (P if there is none; position 0 is [CLS] and is
//                  never masked) — run_pretraining.py's loader, §5.2
//   loss_mask    = 1 at those n positions, else 0
//   padding_mask = input_mask
//   is_random    = next_sentence_labels (1: B is a random sentence from another document — NSP, not Megatron's
//                  sentence-order swap)
//   truncated    = 0 (shards do not record truncation)
// (BertSample's scratch buffers are unused here.)
using BertExample = BertSample;

// The six datasets of one shard, row-major, N rows (instances), L positions, P prediction slots:
//   input_ids int32 [N,L], input_mask int8 [N,L], segment_ids int8 [N,L], masked_lm_positions int32 [N,P],
//   masked_lm_ids int32 [N,P], next_sentence_labels int8 [N].
struct Hdf5BertShard {
  std::string path;
  int64_t rows = 0, seq_length = 0, max_predictions = 0;
  std::vector<int32_t> input_ids, masked_lm_positions, masked_lm_ids;
  std::vector<int8_t> input_mask, segment_ids, next_sentence_labels;
};

// A shard's shapes, read from the file's metadata only (no data is decompressed).
struct Hdf5ShardInfo {
  std::string path;
  int64_t rows = 0, seq_length = 0, max_predictions = 0;
};

// Opens `path` and checks the six datasets exist with NVIDIA's shapes ([N,L], [N,P], [N]; one N, one L, one P) and
// integer types no wider than NVIDIA's (int32 ids and positions, int8 masks and labels; narrower integers are
// widened; wider ones, and unsigned ones of the same width, are refused since not all their values would fit).
// What each dataset declares is bounded by what the file stores (declared bytes ≤ stored bytes, or ≤ 1032× them
// when compressed: deflate's limit), so a damaged or hostile header cannot make the reader allocate what is not
// there; a shard whose arrays would need more than half the machine's memory is refused too.
// Error naming the file and dataset.
Hdf5ShardInfo probe_hdf5_bert_shard(const std::string& path);
// probe_hdf5_bert_shard(), then reads all six datasets (gzip is undone by HDF5) in blocks of rows of at most
// 16 MiB, so memory grows with what is decoded and a damaged block is named by its rows, and validates the values:
// input_mask, segment_ids and next_sentence_labels in {0,1}, input_ids ≥ 0, and the used masked_lm_positions
// (before the first 0) in [1, L), their masked_lm_ids ≥ 0. Error naming the file, dataset and row.
Hdf5BertShard read_hdf5_bert_shard(const std::string& path);
// Row `row` of a shard as a BertExample (see BertExample for the rule).
void hdf5_bert_example(const Hdf5BertShard& shard, int64_t row, BertExample& out);

// Whether a --data-path value names HDF5 shards rather than a Megatron dataset prefix: an existing directory, a path
// ending in .hdf5 or .h5, or a glob pattern (containing * ? or [).
bool is_hdf5_bert_data_path(const std::string& spec);

// For `lmforge train <command>` (gpt, t5), whose --data-path entries are Megatron dataset prefixes: an Error when
// `prefix` has no PREFIX.idx and is HDF5 shards (train bert data: a directory holding .hdf5/.h5 files, a path ending
// in .hdf5/.h5, a glob pattern) or a directory, saying what it is and what the command reads.
void check_megatron_prefix(const std::string& command, const std::string& prefix);
// fairseq's --data (train bert) names HDF5 shards: an Error when `spec` is not a pattern and does not exist, saying
// that a Megatron dataset prefix (SPEC.idx exists) belongs in --data-path.
void check_fairseq_data(const std::string& spec);

enum class Hdf5Split { kTrain, kValid };
// The shard files `spec` names, sorted by path (byte order, as NVIDIA's sorted(os.listdir())):
//   a directory → its regular files whose names end in .hdf5 or .h5 (NVIDIA takes any file with "training" in its
//                 name; other extensions are left out here so that logs or notes beside the shards do no harm);
//   a pattern with * ? or [ → the regular files glob(3) matches; anything else → that one file.
// A symbolic link among them whose target does not exist is an Error naming each such link and its target (a shard
// that cannot be read is never dropped silently).
// Each file is classified by its name (not its directory): containing "training" → train (NVIDIA's rule); else
// containing "test", "valid" or "eval" → validation; else Error naming the file (nothing is dropped silently).
// Returns the files of `split`; an empty training list is an Error, an empty validation list is not.
std::vector<std::string> list_hdf5_bert_shards(const std::string& spec, Hdf5Split split);

// A list of shards as one endless stream of samples, sample i for i = 0, 1, 2, ...:
//   S = Σ N_f over the files (one epoch); epoch e = i / S, offset o = i mod S.
//   Shard order of epoch e: a permutation π_e of the file indices 0..F−1 (files sorted by path); o falls in the
//   shard at slot s of π_e (the slots' rows laid end to end), at offset r in it.
//   Row: σ_{e,f}(r), a permutation of 0..N_f−1 for file f = π_e(s) in epoch e.
// Permutations (splitmix64, reproducible in a few lines of Python; tests/datasets/make_bert_hdf5.py is one):
//   mix(z)   = z ^= z>>30; z *= 0xBF58476D1CE4E5B9; z ^= z>>27; z *= 0x94D049BB133111EB; z ^ z>>31   (mod 2^64)
//   a stream with state x: next() = mix(x += 0x9E3779B97F4A7C15)
//   π_e uses the state mix(mix(seed ^ 0x5348415244) ^ e)            ("SHARD")
//   σ_{e,f} the state mix(mix(mix(seed ^ 0x524F57) ^ e) ^ f)        ("ROW")
//   Fisher–Yates: a = [0..n−1]; for j = n−1 down to 1: k = draw(j+1); swap a[j], a[k]
//   draw(b): r = next() until r ≥ (2^64 − b) mod b; return r mod b      (unbiased)
// So sample i depends only on (files, their row counts, seed, i): resuming at sample i needs no other state, and
// each row is taken exactly once per epoch. NVIDIA's own order (random.Random(seed + epoch) over files, torch's
// RandomSampler within a file, files dealt to ranks) is not reproduced.
//
// Memory: one shard's arrays at a time. sample() loads (and validates) the shard the sample lies in when it is not
// the cached one, so a reader walking the stream in order decompresses each shard once per epoch. Shape errors
// surface in the constructor (every file is probed), value errors when a shard is loaded. Not thread-safe: use
// one object per thread (HDF5 calls themselves are serialized inside).
class Hdf5BertShards {
 public:
  // Probes every file (Error: none given, a bad shard, or shards of different sequence lengths); all rows zero
  // is an Error as well.
  Hdf5BertShards(std::vector<std::string> files, uint64_t seed);

  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  int64_t seq_length() const { return seq_length_; }
  const std::vector<Hdf5ShardInfo>& shards() const { return shards_; }

  struct Location {
    int64_t epoch = 0;
    int64_t slot = 0;  // position of the shard in the epoch's shard order
    int64_t file = 0;  // index into shards()
    int64_t row = 0;   // row within that shard
  };
  Location locate(int64_t index);
  void sample(int64_t index, BertExample& out);
  // How many times sample() has read a shard from disk (for tests and logs).
  int64_t shard_loads() const { return shard_loads_; }
  // π_e: the file indices in the order epoch e reads them.
  std::vector<int64_t> shard_order(int64_t epoch) const;

 private:
  struct EpochPlan {
    int64_t epoch = -1;
    std::vector<int64_t> order;  // π_e
    std::vector<int64_t> ends;   // ends[s] = rows in slots 0..s
  };
  struct RowCache {
    int64_t epoch = -1, file = -1;
    std::vector<int64_t> permutation;  // σ_{e,f}
  };
  const EpochPlan& plan(int64_t epoch);

  std::vector<Hdf5ShardInfo> shards_;
  uint64_t seed_ = 0;
  int64_t samples_per_epoch_ = 0, seq_length_ = 0;
  EpochPlan plan_;
  RowCache rows_;
  Hdf5BertShard loaded_;  // the cached shard (path empty: none)
  int64_t loaded_file_ = -1;
  int64_t shard_loads_ = 0;
};

// The permutation of 0..n−1 drawn from a splitmix64 stream with the given state (Fisher–Yates as documented above).
std::vector<int64_t> splitmix_permutation(int64_t n, uint64_t state);
// splitmix64's finalizer mix(z) (see above).
uint64_t splitmix_mix(uint64_t z);

}  // namespace lmforge::datasets
