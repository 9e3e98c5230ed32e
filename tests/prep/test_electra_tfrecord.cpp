// `lmforge prep --output-format electra-tfrecord`: Google's own TFRecords of the sample corpus reproduced example for
// example (../shared/data/electra/tfrecords_s128), and on a second corpus (several files, edge cases) at length 512
// and with the script's --num-processes, equal to tests/prep/electra_builder_reference.py (a re-statement of
// build_pretraining_dataset.py without TensorFlow); sharded and claim mode give the same files; the TFRecord framing
// and CRC32C; errors naming file:line and flags.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "datasets/electra_pretraining_data.h"
#include "prep/electra_tfrecord.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;
namespace prep = lmforge::prep;

const std::string kExe = LMFORGE_EXE;
const std::string kReference = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                               "/tests/prep/electra_builder_reference.py";
std::string bert_vocab() { return shared_path("data/vocab/bert-base-uncased-vocab.txt"); }

using Example = std::map<std::string, std::vector<int64_t>>;

std::vector<Example> parse_file(const std::string& path) {
  std::vector<Example> out;
  const prep::TfRecordFile file = prep::read_tfrecord_file(path);  // checks both CRCs of every record
  for (size_t r = 0; r < file.records.size(); ++r)
    out.push_back(prep::parse_int64_example(file.records[r], path + " record " + std::to_string(r)));
  return out;
}

// Files <prefix>.tfrecord-i-of-n under both prefixes hold the same examples; returns how many.
size_t expect_same_records(const std::string& ours, const std::string& reference, int n, int max_length) {
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    const std::string name = ".tfrecord-" + std::to_string(i) + "-of-" + std::to_string(n);
    const std::vector<Example> a = parse_file(ours + name), b = parse_file(reference + name);
    EXPECT_EQ(a.size(), b.size()) << name;
    for (size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
      EXPECT_EQ(a[k], b[k]) << name << " record " << k;
      EXPECT_EQ(a[k].size(), 3u);
      for (const auto& [key, values] : a[k]) EXPECT_EQ(values.size(), size_t(max_length)) << key;
      if (a[k] != b[k]) return total;  // one difference is enough to read
    }
    total += a.size();
  }
  EXPECT_FALSE(std::filesystem::exists(ours + ".tfrecord-" + std::to_string(n) + "-of-" + std::to_string(n)));
  return total;
}

TEST(ElectraTfrecord, Crc32cAndFramingAreTensorFlows) {
  EXPECT_EQ(prep::crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value
  const std::string long_text(1000, 'a');
  EXPECT_EQ(prep::crc32c(long_text.data() + 3, 997), prep::crc32c(long_text.data() + 1, 997));
  std::string file;
  const std::vector<int64_t> ids = {101, 7592, 0, 1LL << 40, -1};
  const std::pair<std::string_view, std::span<const int64_t>> features[] = {{"input_ids", ids}};
  std::string payload;
  prep::append_int64_example(payload, features);
  prep::append_tfrecord(file, payload);
  prep::append_tfrecord(file, "");
  TempDir dir;
  write_file(dir.file("f"), file);
  const prep::TfRecordFile back = prep::read_tfrecord_file(dir.file("f"));
  ASSERT_EQ(back.records.size(), 2u);
  EXPECT_EQ(prep::parse_int64_example(back.records[0], "r0").at("input_ids"), ids);
  EXPECT_TRUE(prep::parse_int64_example(back.records[1], "r1").empty());
  file[20] ^= 1;  // a flipped payload bit: the data CRC no longer matches
  write_file(dir.file("g"), file);
  try {
    prep::read_tfrecord_file(dir.file("g"));
    ADD_FAILURE() << "corrupt record accepted";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("record 0 at byte 0: data CRC mismatch"), std::string::npos) << e.what();
  }
}

TEST(ElectraTfrecord, CommandLineReproducesGooglesRecordsOfTheSampleCorpus) {
  TempDir dir;
  const auto r = run_command(kExe + " prep --input " + shared_path("data/nvhdf5/sample_sentences.txt") +
                             " --input-format sentences --output-format electra-tfrecord --vocab-file " + bert_vocab() +
                             " --do-lower-case --max-seq-length 128 --random-seed 12345 --output-prefix " +
                             dir.file("X/pretrain_data"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("instances:      11,534"), std::string::npos) << r.output;
  EXPECT_EQ(expect_same_records(dir.file("X/pretrain_data"),
                                shared_path("data/electra/tfrecords_s128/pretrain_data"), 1000, 128),
            11534u);
}

// The reference's second corpus (three files of sample.jsonl's documents, or every `every`-th of them, and one of
// edge cases) in `dir`/corpus.
void make_corpus(TempDir& dir, int every) {
  const auto c = run_command(kReference + " make-corpus " + shared_path("data") + " " + dir.file("corpus") + " " +
                             std::to_string(every));
  ASSERT_EQ(c.status, 0) << c.output;
}

// Every 4th document of sample.jsonl (and the edge cases): ~3,400 examples of 512, not the whole corpus's 13,571,
// whose pure-Python reference build took 17 s of CPU for no case the quarter lacks.
TEST(ElectraTfrecord, EqualsTheBuilderAt512OnAnotherCorpus) {
  TempDir dir;
  make_corpus(dir, 4);
  const auto ref = run_command(kReference + " build " + dir.file("corpus") + " " + bert_vocab() + " " +
                               dir.file("ref") + " 512 4321");
  ASSERT_EQ(ref.status, 0) << ref.output;
  const auto r = run_command(kExe + " prep --input " + dir.file("corpus") + " --input-format sentences" +
                             " --output-format electra-tfrecord --vocab-file " + bert_vocab() +
                             " --max-seq-length 512 --random-seed 4321 --workers 2 --output-prefix " +
                             dir.file("out/pretrain_data"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_GT(expect_same_records(dir.file("out/pretrain_data"), dir.file("ref/pretrain_data"), 1000, 512), 1000u);
}

TEST(ElectraTfrecord, ScriptsProcessSplitInOneRunStaticRanksAndClaimMode) {
  TempDir dir;
  make_corpus(dir, 4);
  const auto ref = run_command(kReference + " build " + dir.file("corpus") + " " + bert_vocab() + " " +
                               dir.file("ref") + " 128 99 3 7");
  ASSERT_EQ(ref.status, 0) << ref.output;
  const std::string base = kExe + " prep --input " + dir.file("corpus") + " --input-format sentences" +
                           " --output-format electra-tfrecord --vocab-file " + bert_vocab() +
                           " --random-seed 99 --num-processes 3 --num-output-files 7 --workers 1 --output-prefix ";
  auto r = run_command(base + dir.file("one/pretrain_data"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_GT(expect_same_records(dir.file("one/pretrain_data"), dir.file("ref/pretrain_data"), 7, 128), 1000u);

  // Static ranks: rank r runs jobs r, r + 2, ...; a rerun finds them complete.
  for (int rank = 0; rank < 2; ++rank) {
    r = run_command(base + dir.file("static/pretrain_data") + " --rank " + std::to_string(rank) + " --world-size 2");
    ASSERT_EQ(r.status, 0) << r.output;
  }
  r = run_command(base + dir.file("static/pretrain_data") + " --rank 0 --world-size 2");
  EXPECT_NE(r.output.find("wrote 0 of --num-processes 3 jobs, found 2 complete"), std::string::npos) << r.output;
  expect_same_records(dir.file("static/pretrain_data"), dir.file("ref/pretrain_data"), 7, 128);

  // Claim mode: two processes at once share the jobs; both end with nothing left to claim.
  lmforge::testing::CommandResult a, b;
  std::thread other([&] { b = run_command(base + dir.file("claim/pretrain_data") + " --claim"); });
  a = run_command(base + dir.file("claim/pretrain_data") + " --claim");
  other.join();
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(a.output.find("nothing left to claim"), std::string::npos) << a.output;
  expect_same_records(dir.file("claim/pretrain_data"), dir.file("ref/pretrain_data"), 7, 128);
  // Another seed is another plan: refused, not mixed in.
  r = run_command(kExe + " prep --input " + dir.file("corpus") + " --output-format electra-tfrecord --vocab-file " +
                  bert_vocab() + " --random-seed 98 --num-processes 3 --num-output-files 7 --output-prefix " +
                  dir.file("claim/pretrain_data") + " --claim");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("other inputs or flags"), std::string::npos) << r.output;
}

TEST(ElectraTfrecord, MegatronSentenceDatasetInputGivesTheDataSourcesExamples) {
  // --input-format megatron: each prefix is one "file" of the script; the records are the examples the training data
  // source (checked against the reference builder in tests/datasets) makes of the same dataset.
  TempDir dir;
  const std::string prefix = shared_path("data/sample/sample_bert_text_sentence");
  const auto r = run_command(kExe + " prep --input " + prefix + " --input-format megatron --output-format " +
                             "electra-tfrecord --vocab-file " + bert_vocab() + " --max-seq-length 64 --random-seed 5" +
                             " --num-output-files 2 --output-prefix " + dir.file("m"));
  ASSERT_EQ(r.status, 0) << r.output;
  lmforge::datasets::ElectraDataOptions options;
  options.max_seq_length = 64;
  options.random_seed = 5;
  const auto data = lmforge::datasets::ElectraPretrainingData::from_megatron({prefix}, bert_vocab(), options);
  const std::vector<Example> files[] = {parse_file(dir.file("m.tfrecord-0-of-2")),
                                        parse_file(dir.file("m.tfrecord-1-of-2"))};
  ASSERT_EQ(files[0].size() + files[1].size(), data.size());
  std::vector<int32_t> ids(64), mask(64), segments(64);
  for (size_t k = 0; k < data.size(); ++k) {
    data.get(k, ids, mask, segments);
    const Example& e = files[k % 2][k / 2];
    ASSERT_EQ(e.at("input_ids"), std::vector<int64_t>(ids.begin(), ids.end())) << k;
    ASSERT_EQ(e.at("input_mask"), std::vector<int64_t>(mask.begin(), mask.end())) << k;
    ASSERT_EQ(e.at("segment_ids"), std::vector<int64_t>(segments.begin(), segments.end())) << k;
  }
}

TEST(ElectraTfrecord, BadInputAndFlagsAreNamedAndNothingIsWritten) {
  TempDir dir;
  write_file(dir.file("a.txt"), "fine line\n\nbad \xff byte\n");
  const std::string base = kExe + " prep --input " + dir.file("a.txt") + " --output-format electra-tfrecord" +
                           " --vocab-file " + bert_vocab() + " --num-output-files 3 --output-prefix " +
                           dir.file("o/p");
  auto r = run_command(base);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find(dir.file("a.txt") + ":3: invalid UTF-8 at byte 5"), std::string::npos) << r.output;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("o")))
    EXPECT_EQ(e.path().filename().string().find("p.tfrecord"), std::string::npos) << e.path();
  r = run_command(base + " --num-processes 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--num-processes 4 exceeds --num-output-files 3"), std::string::npos) << r.output;
  r = run_command(base + " --max-seq-length 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--max-seq-length must be at least 5"), std::string::npos) << r.output;
  r = run_command(base + " --dupe-factor 5");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--dupe-factor applies to --output-format nvidia-hdf5"), std::string::npos) << r.output;
  r = run_command(kExe + " prep --input " + dir.file("a.txt") + " --output-prefix " + dir.file("m") +
                  " --vocab-file " + bert_vocab() + " --num-output-files 5");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--num-output-files applies to --output-format electra-tfrecord"), std::string::npos)
      << r.output;
  r = run_command(kExe + " prep --help");
  for (const char* text : {"electra-tfrecord", "--num-output-files", "--num-processes"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text;
}

}  // namespace
