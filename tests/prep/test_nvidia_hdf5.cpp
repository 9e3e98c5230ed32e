// prep --output-format nvidia-hdf5: CPython's generator draw for draw, the shared shard NVIDIA's own script wrote, the
// test's re-statement of that script (nvidia_pretraining_reference.py) at seq 512 / 80 predictions and on hard
// inputs, the same file for any --workers, bertPrep.py's shard names, NVIDIA's loader (re-stated) and errors.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "datasets/hdf5_bert_shards.h"
#include "prep/nvidia_hdf5_prep.h"
#include "prep/python_random.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;
namespace prep = lmforge::prep;

std::string tool(const std::string& name) {
  return "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) + "/tests/" + name;
}
std::string bert_vocab() { return shared_path("data/vocab/bert-base-uncased-vocab.txt"); }

prep::PrepOptions nvidia_options(const std::vector<std::string>& inputs, const std::string& prefix) {
  prep::PrepOptions o;
  o.inputs = inputs;
  o.output_prefix = prefix;
  o.input_format = "sentences";
  o.output_format = "nvidia-hdf5";
  o.tokenizer.vocab_file = bert_vocab();
  o.nvidia.dupe_factor = 5;  // bertPrep.py's
  o.workers = 2;
  o.progress_seconds = 1e9;
  return o;
}

void expect_same_hdf5(const std::string& a, const std::string& b) {
  const auto r = run_command(tool("prep/nvidia_pretraining_reference.py") + " compare " + a + " " + b);
  EXPECT_EQ(r.status, 0) << a << " vs " << b << ": " << r.output;
}

// The re-statement's file for the same inputs and options.
std::string reference(const prep::PrepOptions& o, const std::string& out) {
  std::string cmd = tool("prep/nvidia_pretraining_reference.py") + " make --vocab " + o.tokenizer.vocab_file +
                    " --output " + out + " --max-seq-length " + std::to_string(o.nvidia.max_seq_length) +
                    " --max-predictions-per-seq " + std::to_string(o.nvidia.max_predictions_per_seq) +
                    " --dupe-factor " + std::to_string(o.nvidia.dupe_factor) + " --random-seed " +
                    std::to_string(o.nvidia.random_seed);
  char probs[96];
  std::snprintf(probs, sizeof probs, " --masked-lm-prob %.17g --short-seq-prob %.17g", o.nvidia.masked_lm_prob,
                o.nvidia.short_seq_prob);
  cmd += probs;
  if (!o.do_lower_case) cmd += " --cased";
  cmd += " --input";
  for (const auto& i : o.inputs) cmd += " " + i;
  const auto r = run_command(cmd);
  EXPECT_EQ(r.status, 0) << r.output;
  return out;
}

TEST(PythonRandom, DrawsEqualCPythonsRandom) {
  const auto r = run_command(tool("prep/python_random_reference.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    int64_t seed = 0;
    words >> seed;
    prep::PythonRandom rng(seed);
    const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 10},       {2, 125}, {0, 30521},          {1, 1},
                                                             {0, 0},        {0, (int64_t(1) << 32) - 1},
                                                             {0, int64_t(1) << 32}, {5, int64_t(1) << 40}};
    size_t next_range = 0;
    for (std::string w; words >> w;) {
      if (w.rfind("r:", 0) == 0) {
        char hex[64];
        std::snprintf(hex, sizeof hex, "%a", rng.random());
        // Python's float.hex writes 0x1.b0580f98a7dbep-1, C's %a the same digits.
        EXPECT_EQ(std::stod(w.substr(2)), std::stod(hex)) << "seed " << seed << ": " << w << " vs " << hex;
      } else if (w.rfind("i:", 0) == 0) {
        const auto [a, b] = ranges[next_range++];
        EXPECT_EQ(std::to_string(rng.randint(a, b)), w.substr(2)) << "seed " << seed << " randint(" << a << ", " << b << ")";
      } else if (w.rfind("s:", 0) == 0) {
        std::vector<int> x(20);
        for (int i = 0; i < 20; ++i) x[size_t(i)] = i;
        rng.shuffle(x);
        std::string got;
        for (int v : x) got += (got.empty() ? "" : ",") + std::to_string(v);
        EXPECT_EQ(got, w.substr(2)) << "seed " << seed;
      } else if (w.rfind("h:", 0) == 0) {
        EXPECT_EQ(rng.random_below_half() ? "1" : "0", w.substr(2)) << "seed " << seed;
      } else if (w.rfind("t:", 0) == 0) {
        const size_t colon = w.find(':', 2);
        const int n = std::stoi(w.substr(2, colon - 2));
        std::vector<uint16_t> x(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) x[size_t(i)] = uint16_t(i);
        rng.shuffle(x);
        std::string got;
        for (uint16_t v : x) got += (got.empty() ? "" : ",") + std::to_string(v);
        EXPECT_EQ(got, w.substr(colon + 1)) << "seed " << seed << ", shuffle of " << n;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6 * (15 + 8 + 5));
}

// Acceptance: the shared shard that NVIDIA's create_pretraining_data.py wrote (seq 128, 20 predictions, dupe 5).
TEST(NvidiaHdf5, SampleEqualsTheShardNvidiasScriptWrote) {
  TempDir dir;
  const auto o = nvidia_options({shared_path("data/nvhdf5/sample_sentences.txt")}, dir.file("sample"));
  write_file(dir.file("sample.hdf5.tmp-999999"), "a killed run's temporary");
  const prep::PrepSummary s = prep::run_nvidia_hdf5_prep(o);
  EXPECT_FALSE(std::filesystem::exists(dir.file("sample.hdf5.tmp-999999")));
  EXPECT_EQ(s.instances, 68693u);
  ASSERT_EQ(s.outputs, std::vector<std::string>{dir.file("sample.hdf5")});
  expect_same_hdf5(dir.file("sample.hdf5"), shared_path("data/nvhdf5/sample_seq128.hdf5"));
  // lmforge's own reader (train bert's) takes it whole: types, shapes and values as NVIDIA's loader expects.
  const auto shard = lmforge::datasets::read_hdf5_bert_shard(dir.file("sample.hdf5"));
  EXPECT_EQ(shard.rows, 68693);
  EXPECT_EQ(shard.seq_length, 128);
  EXPECT_EQ(shard.max_predictions, 20);
}

// The first `documents` documents of the shared sentence file.
std::string sample_head(const TempDir& dir, int documents) {
  std::ifstream in(shared_path("data/nvhdf5/sample_sentences.txt"));
  std::string out, line;
  for (int blank = 0; blank < documents && std::getline(in, line);) {
    out += line + "\n";
    if (line.empty()) ++blank;
  }
  write_file(dir.file("head.txt"), out);
  return dir.file("head.txt");
}

TEST(NvidiaHdf5, Seq512With80PredictionsEqualsTheReStatement) {
  TempDir dir;
  auto o = nvidia_options({sample_head(dir, 400)}, dir.file("s512"));
  o.nvidia.max_seq_length = 512;
  o.nvidia.max_predictions_per_seq = 80;
  o.nvidia.dupe_factor = 3;
  prep::run_nvidia_hdf5_prep(o);
  expect_same_hdf5(dir.file("s512.hdf5"), reference(o, dir.file("ref512.hdf5")));
  // Any number of workers writes the same values.
  for (int workers : {1, 3}) {
    auto w = o;
    w.workers = workers;
    w.block_bytes = 4096;  // many blocks: tokenized out of order, appended in order
    w.output_prefix = dir.file("w" + std::to_string(workers));
    prep::run_nvidia_hdf5_prep(w);
    expect_same_hdf5(w.output_prefix + ".hdf5", dir.file("s512.hdf5"));
  }
}

// Inputs that exercise every rule: universal newlines, Unicode whitespace and blank-looking lines, lines that
// tokenize to nothing, literal [SEP]/[CLS]/[MASK] (kept whole, never masked when [SEP]/[CLS]), private-use and
// unassigned characters, CJK, accents, final sigma, words over 100 characters, long sentences that need truncation.
std::string hard_corpus() {
  std::string t;
  t += "The quick brown fox jumps over the lazy dog.\nIt was [MASK] and [SEP] then [CLS] x[SEP] [sep] [UNK]!\n";
  t += "\n   \t \n";
  t += "Ünïcödé ÀCCENTS: café naïve ΟΔΟΣ Σ σς.\r\nMac line\rends here.\rAnd \xe3\x80\x80 ideographic space.\n";
  t += "\xe2\x80\xa8\n";  // U+2028 alone: blank after strip, ends the document
  t += "\x0b\x0c\x1c\n";  // \v \f and a file separator: blank after strip
  t += "\x01\x02\xef\xbf\xbd\n";  // controls and U+FFFD only: no tokens, the document goes on
  t += "private \xee\x80\x80 use and unassigned \xf3\xa0\x82\x80 ok \xe4\xb8\xad\xe6\x96\x87 words.\n";
  t += std::string(120, 'a') + " long word and " + std::string(60, 'b') + "\n";
  for (int d = 0; d < 6; ++d) {
    t += "\n";
    for (int s = 0; s < 3 + d; ++s) {
      t += "Document " + std::to_string(d) + " sentence " + std::to_string(s) + " has";
      for (int w = 0; w < 4 + 7 * ((d + s) % 4); ++w) t += " word" + std::to_string(w) + ",";
      t += " done.\n";
    }
  }
  t += "\n\nLast doc without a final newline.";
  return t;
}

TEST(NvidiaHdf5, HardInputsEqualTheReStatement) {
  TempDir dir;
  write_file(dir.file("hard.txt"), hard_corpus());
  write_file(dir.file("one.txt"), "Only one document here.\nWith two sentences [SEP] inside.\n");
  struct Case {
    const char* name;
    std::vector<std::string> inputs;
    int seq, preds, dupe;
    double short_prob;
    int64_t seed;
    bool lower;
  };
  const std::vector<Case> cases = {
      {"short", {dir.file("hard.txt")}, 24, 5, 4, 0.5, 1, true},
      {"cased", {dir.file("hard.txt")}, 40, 7, 2, 0.1, 98765, false},
      {"two_files", {dir.file("one.txt"), dir.file("hard.txt")}, 16, 3, 3, 0.3, -5, true},
      {"one_document", {dir.file("one.txt")}, 12, 2, 6, 0.0, 7, true},  // ten draws all hit the only document
  };
  for (const Case& c : cases) {
    auto o = nvidia_options(c.inputs, dir.file(c.name));
    o.nvidia.max_seq_length = c.seq;
    o.nvidia.max_predictions_per_seq = c.preds;
    o.nvidia.dupe_factor = c.dupe;
    o.nvidia.short_seq_prob = c.short_prob;
    o.nvidia.random_seed = c.seed;
    o.do_lower_case = c.lower;
    SCOPED_TRACE(c.name);
    prep::run_nvidia_hdf5_prep(o);
    expect_same_hdf5(o.output_prefix + ".hdf5", reference(o, dir.file(std::string(c.name) + "_ref.hdf5")));
  }
}

TEST(NvidiaHdf5, TrainingAndTestShardsAreNamedAsBertPrepAndReadByNvidiasLoader) {
  TempDir dir;
  auto o = nvidia_options({sample_head(dir, 300)}, dir.file("out/books"));
  o.n_training_shards = 3;
  o.n_test_shards = 1;
  const prep::PrepSummary s = prep::run_nvidia_hdf5_prep(o);
  const std::vector<std::string> names = {"books_training_0.hdf5", "books_training_1.hdf5", "books_training_2.hdf5",
                                          "books_test_0.hdf5"};
  ASSERT_EQ(s.outputs.size(), names.size());
  uint64_t rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(s.outputs[i], dir.file("out/" + names[i]));
    const auto shard = lmforge::datasets::read_hdf5_bert_shard(s.outputs[i]);
    EXPECT_GT(shard.rows, 0) << names[i];
    rows += uint64_t(shard.rows);
  }
  EXPECT_EQ(rows, s.instances);
  // run_pretraining.py's pretraining_dataset.__getitem__ (tests/datasets/nvidia_hdf5_reference.py) on every row.
  const std::string check = dir.file("loader.py");
  write_file(check,
             "import sys, h5py\n"
             "sys.path.insert(0, '" + std::string(LMFORGE_SOURCE_DIR) + "/tests/datasets')\n"
             "from nvidia_hdf5_reference import nvidia_fields\n"
             "for path in sys.argv[1:]:\n"
             "    with h5py.File(path, 'r') as f:\n"
             "        n = len(f['input_ids'])\n"
             "        for i in range(0, n, max(1, n // 50)):\n"
             "            x = nvidia_fields(f, i, 20)\n"
             "            assert x['loss_mask'].sum() == (f['masked_lm_positions'][i] != 0).sum(), (path, i)\n"
             "            assert x['padding_mask'].sum() == (f['input_ids'][i] != 0).sum(), (path, i)\n"
             "print('ok')\n");
  std::string cmd = "/usr/bin/python3 " + check;
  for (const auto& f : s.outputs) cmd += " " + f;
  const auto r = run_command(cmd);
  EXPECT_EQ(r.status, 0) << r.output;
}

// The same documents and sentences given as JSON lines (list values: pre-split sentences) and as a Megatron
// sentence-level dataset (made by prep from those lines; plain ASCII, where Megatron's and NVIDIA's tokenizers agree)
// give the file the sentences format gives, which the tests above prove equal to NVIDIA's.
TEST(NvidiaHdf5, JsonAndMegatronInputsEqualTheSentencesFormat) {
  TempDir dir;
  std::string sentences, json;
  for (int d = 0; d < 40; ++d) {
    json += "{\"text\": [";
    for (int s = 0; s < 1 + d % 5; ++s) {
      std::string sentence = "Doc " + std::to_string(d) + " says thing " + std::to_string(s) + ":";
      for (int w = 0; w < 3 + (d * 7 + s * 3) % 17; ++w) sentence += " word" + std::to_string((d + w) % 9);
      sentences += sentence + ".\n";
      json += std::string(s ? ", " : "") + "\"" + sentence + ".\"";
    }
    sentences += "\n";
    json += "]}\n";
  }
  write_file(dir.file("s.txt"), sentences);
  write_file(dir.file("s.jsonl"), json);
  auto o = nvidia_options({dir.file("s.txt")}, dir.file("from_sentences"));
  o.nvidia.max_seq_length = 48;
  o.nvidia.max_predictions_per_seq = 8;
  prep::run_nvidia_hdf5_prep(o);

  auto j = o;
  j.inputs = {dir.file("s.jsonl")};
  j.input_format = "json";
  j.output_prefix = dir.file("from_json");
  prep::run_nvidia_hdf5_prep(j);
  expect_same_hdf5(dir.file("from_json.hdf5"), dir.file("from_sentences.hdf5"));

  prep::PrepOptions m;
  m.inputs = {dir.file("s.jsonl")};
  m.output_prefix = dir.file("meg");
  m.tokenizer.type = "BertWordPieceLowerCase";
  m.tokenizer.vocab_file = bert_vocab();
  m.progress_seconds = 1e9;
  prep::run_prep(m);  // list values: one sequence per sentence
  auto g = o;
  g.inputs = {dir.file("meg_text_document")};
  g.input_format = "megatron";
  g.output_prefix = dir.file("from_megatron");
  prep::run_nvidia_hdf5_prep(g);
  expect_same_hdf5(dir.file("from_megatron.hdf5"), dir.file("from_sentences.hdf5"));
}

std::string error_of(const prep::PrepOptions& o) {
  try {
    prep::run_nvidia_hdf5_prep(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NvidiaHdf5, BadInputAndFlagsAreErrorsAndWriteNothing) {
  TempDir dir;
  write_file(dir.file("bad.txt"), "fine line\n\nsecond \xff\xfe line\n");
  auto o = nvidia_options({dir.file("bad.txt")}, dir.file("bad"));
  std::string e = error_of(o);
  EXPECT_NE(e.find(dir.file("bad.txt") + ":3: invalid UTF-8"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.hdf5")));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();

  write_file(dir.file("ok.txt"), "a sentence\n");
  o = nvidia_options({dir.file("ok.txt")}, dir.file("x"));
  o.nvidia.max_seq_length = 600;
  EXPECT_NE(error_of(o).find("--max-seq-length 600"), std::string::npos);
  o = nvidia_options({dir.file("ok.txt")}, dir.file("x"));
  o.nvidia.max_predictions_per_seq = 0;
  EXPECT_NE(error_of(o).find("--max-predictions-per-seq"), std::string::npos);
  o = nvidia_options({dir.file("ok.txt")}, dir.file("x"));
  write_file(dir.file("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n");
  o.tokenizer.vocab_file = dir.file("vocab.txt");
  e = error_of(o);
  EXPECT_NE(e.find("[MASK]"), std::string::npos) << e;
  EXPECT_NE(e.find(dir.file("vocab.txt")), std::string::npos) << e;
  o = nvidia_options({dir.file("ok.txt")}, dir.file("x"));
  o.input_format = "text";
  EXPECT_NE(error_of(o).find("--input-format sentences"), std::string::npos);
}

}  // namespace
