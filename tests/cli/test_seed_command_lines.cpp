// The seed projects' command lines of ../shared/docs/seed-command-lines.md that need no launcher, run exactly as
// written there (only `lmforge` is this build's executable), each on data the test makes as the note describes:
// seed 003's preprocess_data.py line (argparse's --vocab for --vocab-file, --dataset-impl mmap) writing Megatron's
// bytes, and its hub tokenizer name found in a Hugging Face cache directory (ids against Hugging Face's own);
// seed 004's one-node fairseq line (--lr-scheduler left to its polynomial_decay default, --valid-subset test on
// NVIDIA's test shards). The launcher lines of seeds 001 and 002 are run as the single process the launcher would
// start (the per-family tokenizer default, --kv-channels, and a word-level vocab.json that only sizes the model) and
// whole, 2 ranks under torch's launcher (with the --use_env that torch's own check demands beside --no_python),
// against one process with the same global batch; seed 002's ds_pretrain_gpt2.sh lines and seed 003's deepspeed
// line run whole under `lmforge launch`, seed 003's environment recipe and seed 004's single-GPU line as one process,
// seed 004's two-node pair as two commands making 4 ranks.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <regex>
#include <sstream>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

// `line` as the note writes it, run in `dir` with every `lmforge` word the executable under test.
lmforge::testing::CommandResult run_in(const TempDir& dir, const std::string& line) {
  const std::string exe = std::string(LMFORGE_EXE) + " ";
  const std::string command = std::regex_replace(line, std::regex("(^|\\s)lmforge\\s"), "$1" + exe);
  return run_command("cd " + dir.path() + " && " + command);
}

void copy(const std::string& from, const std::string& to) {
  fs::create_directories(fs::path(to).parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// The iterations a training log reports ("iteration N/ M").
int last_iteration(const std::string& log) {
  int last = -1;
  const std::regex line(" iteration +([0-9]+)/ +[0-9]+ ");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) last = std::stoi((*it)[1]);
  return last;
}

// Every loss a training log prints, training and validation, in order ("lm loss: X", "lm loss value: X").
std::vector<double> logged_losses(const std::string& log) {
  std::vector<double> v;
  const std::regex loss("lm loss(?: value)?: ([0-9.E+-]+)");
  for (std::sregex_iterator it(log.begin(), log.end(), loss), end; it != end; ++it) v.push_back(std::stod((*it)[1]));
  return v;
}

// A log's logging intervals and evaluations in order: the losses each prints and, for an interval, how many of its
// iterations fp16's loss scaling skipped (-1 for an evaluation). A launcher may prefix each rank's lines.
struct LoggedStep {
  int skipped = -1;
  std::vector<double> losses;
};
std::vector<LoggedStep> logged_steps(const std::string& log) {
  std::vector<LoggedStep> steps;
  const std::regex loss("lm loss(?: value)?: ([0-9.E+-]+)"), skipped("number of skipped iterations: +([0-9]+)");
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const bool interval = line.find(" iteration ") != std::string::npos && line.find("consumed samples") != std::string::npos;
    if (!interval && line.find("validation loss at") == std::string::npos) continue;
    LoggedStep step;
    std::smatch m;
    if (interval && std::regex_search(line, m, skipped)) step.skipped = std::stoi(m[1]);
    for (std::sregex_iterator it(line.begin(), line.end(), loss), end; it != end; ++it)
      step.losses.push_back(std::stod((*it)[1]));
    steps.push_back(step);
  }
  return steps;
}

// A multi-process run's logged losses equal one process's with the same global batch within `tolerance` (relative,
// each value). With fp16 the layouts need not skip the same iterations: one process accumulates all its
// micro-batches' fp16 gradients (4 here), each of 2 ranks half of them before the ranks' sums meet in fp32, so at the
// loss scale where a sum of 4 just overflows fp16 the one process skips an iteration that the ranks apply (Megatron's
// fp16 gradients, accumulated and all-reduced in fp16, depend on the layout there too). So every step logged before
// the first update of either run (all iterations of its interval skipped: the validations at iteration 10 of the
// fp16 lines) must agree within `tolerance`; from then on an interval where the runs skipped different iterations
// (printed) moves the losses by what an update of this tiny model does, which `after_updates` bounds — the
// mixed-precision parity tests' 1e-2 (test_train_mixed_precision: bf16 under data and tensor parallelism).
void expect_same_losses(const lmforge::testing::CommandResult& many, const lmforge::testing::CommandResult& one,
                        double tolerance, double after_updates, const std::string& what, int log_interval = 5) {
  ASSERT_EQ(many.status, 0) << what << ":\n" << many.output;
  ASSERT_EQ(one.status, 0) << what << " (one process):\n" << one.output;
  EXPECT_EQ(last_iteration(many.output), 20) << many.output;
  const std::vector<LoggedStep> a = logged_steps(many.output), b = logged_steps(one.output);
  ASSERT_GE(b.size(), 2u) << one.output;  // (fairseq's lines log the last iteration and the final validation)
  ASSERT_EQ(a.size(), b.size()) << what << ":\n" << many.output << "\none process:\n" << one.output;
  bool updated = false;
  for (size_t step = 0; step < a.size(); step++) {
    updated |= a[step].skipped >= 0 && std::min(a[step].skipped, b[step].skipped) < log_interval;
    const double bound = updated ? after_updates : tolerance;
    if (a[step].skipped != b[step].skipped)
      std::printf("[ fp16 ] %s: logged step %zu: %d skipped iterations on the ranks, %d in one process\n",
                  what.c_str(), step, a[step].skipped, b[step].skipped);
    ASSERT_EQ(a[step].losses.size(), b[step].losses.size()) << what << ": logged step " << step;
    for (size_t i = 0; i < a[step].losses.size(); i++)
      EXPECT_NEAR(a[step].losses[i], b[step].losses[i], bound * std::abs(b[step].losses[i]))
          << what << ": logged step " << step;
  }
}

bool have_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

using lmforge::testing::free_port;

// The note's `$TL $DIST --no_python`: torch's legacy launcher with 2 processes. Its own check in torch 1.13 (and in
// every later torch) refuses --no_python without --use_env ("When using the '--no_python' flag, you must also set
// the '--use_env' flag"), before it starts anything, so the lines run here with --use_env added: that is the only
// way torch's launcher runs a program that is not Python. Without --use_env it would pass --local_rank=N, which
// lmforge accepts too (test_torch_launchers.cpp runs that through a Python wrapper).
std::string torch_launcher() {
  return "timeout 300 env OMP_NUM_THREADS=1 /usr/bin/python3 -m torch.distributed.launch --redirects 1 --tee 1 "
         "--nproc_per_node 2 --nnodes 1 --node_rank 0 --master_addr 127.0.0.1 --master_port " +
         std::to_string(free_port()) + " --use_env --no_python ";
}

// ---- seed 003 (Megatron-DeepSpeed, Turkish GPT-2) ----

TEST(SeedCommandLines, Seed003PreprocessDataLineWritesMegatronsBytes) {
  TempDir dir;
  copy(shared_path("data/sample/sample.jsonl"), dir.file("my-corpus.json"));
  copy(shared_path("data/vocab/gpt2-vocab.json"), dir.file("gpt2-vocab.json"));
  copy(shared_path("data/vocab/gpt2-merges.txt"), dir.file("gpt2-merges.txt"));
  const auto r = run_in(dir, "lmforge prep --input my-corpus.json --output-prefix my-gpt2 --vocab gpt2-vocab.json "
                             "--dataset-impl mmap --tokenizer-type GPT2BPETokenizer --merge-file gpt2-merges.txt "
                             "--append-eod --workers 8");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(read_file(dir.file("my-gpt2_text_document.bin")) ==
              read_file(shared_path("data/sample/sample_gpt2_text_document.bin")));
  EXPECT_TRUE(read_file(dir.file("my-gpt2_text_document.idx")) ==
              read_file(shared_path("data/sample/sample_gpt2_text_document.idx")));
  // preprocess_data.py's older formats are refused with the reason; its --log-interval is taken with a notice.
  const auto lazy = run_in(dir, "lmforge prep --input my-corpus.json --output-prefix lazy --vocab gpt2-vocab.json "
                                "--merge-file gpt2-merges.txt --dataset-impl lazy");
  EXPECT_NE(lazy.status, 0);
  EXPECT_NE(lazy.output.find("--dataset-impl lazy: lmforge writes Megatron's mmap indexed format"), std::string::npos)
      << lazy.output;
  EXPECT_FALSE(fs::exists(dir.file("lazy_text_document.bin")));
  const auto logged = run_in(dir, "lmforge prep --input my-corpus.json --output-prefix logged --vocab gpt2-vocab.json "
                                  "--merge-file gpt2-merges.txt --append-eod --log-interval 100");
  ASSERT_EQ(logged.status, 0) << logged.output;
  EXPECT_NE(logged.output.find("--log-interval 100: progress lines come every --progress-seconds"), std::string::npos);
  EXPECT_TRUE(read_file(dir.file("logged_text_document.bin")) ==
              read_file(shared_path("data/sample/sample_gpt2_text_document.bin")));
}

TEST(SeedCommandLines, Seed003HubTokenizerNameFromTheLocalHuggingFaceCache) {
  TempDir dir;
  // The cache as huggingface_hub leaves it after a download of t5-small's tokenizer (here: the T5 fixture, whose
  // ids Hugging Face computed in tests/text/hf_fixtures/t5.ref.jsonl).
  const fs::path repo = dir.file("hf/hub/models--t5-small");
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots/df1b051c49625cf57a3d0d8d3863ed4d13564fe4");
  copy(std::string(LMFORGE_SOURCE_DIR) + "/tests/text/hf_fixtures/t5.tokenizer.json",
       (repo / "snapshots/df1b051c49625cf57a3d0d8d3863ed4d13564fe4/tokenizer.json").string());
  write_file((repo / "refs/main").string(), "df1b051c49625cf57a3d0d8d3863ed4d13564fe4");
  // c4_en_train.jsonl: the sample documents the reference holds, in its order; the expected .bin their HF ids with
  // T5's </s> (id 1) appended to each, as uint16 (Megatron's dtype for a vocabulary under 65,500).
  std::vector<std::string> sample;
  {
    std::istringstream lines(read_file(shared_path("data/sample/sample.jsonl")));
    for (std::string line; std::getline(lines, line);) sample.push_back(line);
  }
  std::string corpus, expected;
  int documents = 0;
  std::istringstream refs(read_file(std::string(LMFORGE_SOURCE_DIR) + "/tests/text/hf_fixtures/t5.ref.jsonl"));
  simdjson::dom::parser parser;
  for (std::string line; std::getline(refs, line) && documents < 40;) {
    simdjson::dom::element e = parser.parse(line);
    if (std::string_view(e["src"]) != "sample") continue;
    corpus += sample.at(std::stoul(std::string(std::string_view(e["id"])))) + "\n";
    std::vector<int64_t> ids;
    for (int64_t v : simdjson::dom::array(e["ids"])) ids.push_back(v);
    ASSERT_FALSE(ids.empty());
    ids.push_back(1);
    for (int64_t v : ids) expected += {char(v & 0xff), char(v >> 8)};
    documents++;
  }
  write_file(dir.file("c4_en_train.jsonl"), corpus);
  const auto r = run_in(dir, "HF_HOME=$PWD/hf lmforge prep --input c4_en_train.jsonl --output-prefix c4_en_train "
                             "--dataset-impl mmap --tokenizer-type PretrainedFromHF --tokenizer-name-or-path t5-small "
                             "--workers 30 --append-eod");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(read_file(dir.file("c4_en_train_text_document.bin")) == expected);
  // Without the cache: the places looked in are named.
  const auto missing = run_in(dir, "HOME=$PWD HF_HOME=$PWD/nothing HF_HUB_CACHE= XDG_CACHE_HOME= lmforge prep --input "
                                   "c4_en_train.jsonl --output-prefix x --tokenizer-type PretrainedFromHF "
                                   "--tokenizer-name-or-path t5-small");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find(dir.file("nothing/hub/models--t5-small/snapshots") + " ($HF_HOME/hub: absent)"),
            std::string::npos)
      << missing.output;
}

// Seed 003's training lines, as written: `deepspeed --num_gpus 1 pretrain_gpt.py $GPT_ARGS ...` as lmforge launch,
// and its single-process environment recipe (no WORLD_SIZE: one process, as Megatron reads it). Both give the same
// losses: one process each, the same flags.
TEST(SeedCommandLines, Seed003LaunchAndEnvironmentRecipeTrainTheSameRun) {
  TempDir dir;
  for (const char* ext : {".bin", ".idx"})
    copy(shared_path(std::string("data/sample/sample_gpt2_text_document") + ext),
         dir.file(std::string("my-gpt2_text_document") + ext));
  copy(shared_path("data/vocab/gpt2-vocab.json"), dir.file("gpt2-vocab.json"));
  copy(shared_path("data/vocab/gpt2-merges.txt"), dir.file("gpt2-merges.txt"));
  const std::string g =
      " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
      "--micro-batch-size 2 --global-batch-size 4 --lr 0.00015 --train-iters 20 --lr-decay-iters 320000 "
      "--lr-decay-style cosine --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --lr-warmup-fraction .01 "
      "--fp16 --log-interval 5 --save-interval 10 --eval-interval 10 --eval-iters 2 --checkpoint-activations "
      "--data-path my-gpt2_text_document";
  const auto launched = run_in(dir, "lmforge launch --num_gpus 1 train gpt" + g + " --save ck3 --load ck3");
  ASSERT_EQ(launched.status, 0) << launched.output;
  EXPECT_EQ(last_iteration(launched.output), 20) << launched.output;
  const auto env = run_in(dir, "MASTER_ADDR=localhost MASTER_PORT=9994 RANK=0 LOCAL_RANK=0 lmforge train gpt" + g +
                                   " --save ck3e --load ck3e");
  ASSERT_EQ(env.status, 0) << env.output;
  EXPECT_EQ(last_iteration(env.output), 20) << env.output;
  // Every logged loss, training and validation (fp16's dynamic loss scale skips the first iterations, as
  // Megatron's does, so iteration 20 is the one logged training loss).
  EXPECT_EQ(logged_losses(launched.output).size(), 5u) << launched.output;
  EXPECT_EQ(logged_losses(launched.output), logged_losses(env.output));
}

// ---- seed 004 (fairseq-style BERT on NVIDIA HDF5 shards) ----

// pre/test_128/: NVIDIA-format shards (..._training_N.hdf5 and ..._test_N.hdf5, written by h5py as NVIDIA's
// create_pretraining_data.py writes them), pre/cfg/: vocab.txt and a shrunk Google bert_config.json.
void make_seed004_data(const TempDir& dir) {
  const std::string script = std::string(LMFORGE_SOURCE_DIR) + "/tests/train/make_bert_hdf5_train.py";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + dir.file("fx") + " >/dev/null").c_str()), 0);
  fs::create_directories(dir.file("pre/test_128"));
  for (const fs::directory_entry& f : fs::directory_iterator(dir.file("fx/shards")))
    copy(f.path().string(), dir.file("pre/test_128/") + f.path().filename().string());
  copy(shared_path("data/vocab/bert-base-uncased-vocab.txt"), dir.file("pre/cfg/vocab.txt"));
  write_file(dir.file("pre/cfg/bert_config.json"),
             "{\"vocab_size\": 30522, \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
             "\"intermediate_size\": 256, \"hidden_act\": \"gelu\", \"hidden_dropout_prob\": 0.1, "
             "\"attention_probs_dropout_prob\": 0.1, \"max_position_embeddings\": 64, \"type_vocab_size\": 2, "
             "\"initializer_range\": 0.02}\n");
}

const char* const kSeed004 =
    "--task bert --data pre/test_128/ --dict pre/cfg/vocab.txt --config_file pre/cfg/bert_config.json "
    "--max-sentences 4 --fast-stat-sync --max-update 20 --update-freq 2 --valid-subset test --num-workers 4 "
    "--warmup-updates 5 --total-num-update 40 --lr 0.0001 --weight-decay 0.01";

TEST(SeedCommandLines, Seed004OneNodeLineTrainsWithFairseqsDefaults) {
  TempDir dir;
  make_seed004_data(dir);
  const auto r = run_in(dir, std::string("lmforge train bert ") + kSeed004 + " --save-dir node1gpu4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(last_iteration(r.output), 20) << r.output;
  EXPECT_NE(r.output.find("--lr-scheduler not given: polynomial_decay"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("validation loss at"), std::string::npos) << r.output;
  // fairseq's polynomial_decay: update u+1 runs with lr(u) = 1e-4 u/5 during the 5 warm-up updates, then
  // 1e-4 (1 - (u-5)/35) (power 1, end 0) towards update 40; the log shows lr(u) after update u.
  std::regex line(" iteration +([0-9]+)/ +[0-9]+ .*learning rate: ([0-9.E+-]+) \\|");
  int seen = 0;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it) {
    const int u = std::stoi((*it)[1]);
    const double want = u <= 5 ? 1e-4 * u / 5.0 : 1e-4 * (1.0 - (u - 5.0) / 35.0);
    EXPECT_NEAR(std::stod((*it)[2]), want, 1e-6 * want) << "after update " << u;  // (the log's 7 digits)
    seen++;
  }
  EXPECT_GT(seen, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir.file("node1gpu4")));
}

// The single-GPU line: --distributed-world-size 1 is one process; --device-id names the GPU the process would take,
// which a CPU run reports and does not refuse.
TEST(SeedCommandLines, Seed004SingleGpuLineTrainsAsOneProcess) {
  TempDir dir;
  make_seed004_data(dir);
  const auto r = run_in(dir, std::string("lmforge train bert ") + kSeed004 +
                                 " --distributed-world-size 1 --device-id 1 --save-dir sing_gpu_test");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(last_iteration(r.output), 20) << r.output;
  EXPECT_TRUE(fs::exists(dir.file("sing_gpu_test")));
}

// --valid-subset test validates on NVIDIA's test shards; a validation shard that is not one is named.
TEST(SeedCommandLines, Seed004ValidSubsetTestNamesAValidationShardThatIsNoTestShard) {
  TempDir dir;
  make_seed004_data(dir);
  copy(dir.file("pre/test_128/wiki_test_0.hdf5"), dir.file("pre/test_128/wiki_valid_0.hdf5"));
  const auto r = run_in(dir, std::string("lmforge train bert ") + kSeed004 + " --save-dir x");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--valid-subset test: pre/test_128/wiki_valid_0.hdf5 is a validation shard but not a "
                          "test shard"),
            std::string::npos)
      << r.output;
}

// ---- seed 001 (Megatron large-batch BERT and T5 with LAMB), as the process torch's launcher starts ----

void make_seed001_data(const TempDir& dir) {
  copy(shared_path("data/sample/sample_bert_text_sentence.bin"), dir.file("d1/my-bert_text_sentence.bin"));
  copy(shared_path("data/sample/sample_bert_text_sentence.idx"), dir.file("d1/my-bert_text_sentence.idx"));
  copy(shared_path("data/vocab/bert-base-uncased-vocab.txt"), dir.file("d1/bert-large-uncased-vocab.txt"));
}

const char* const kSeed001Bert =
    "lmforge train bert --num-layers 2 --hidden-size 64 --num-attention-heads 4 --micro-batch-size 2 "
    "--global-batch-size 8 --seq-length 64 --max-position-embeddings 64 --train-iters 20 --data-path "
    "d1/my-bert_text_sentence --vocab-file d1/bert-large-uncased-vocab.txt --data-impl mmap --split 949,50,1 "
    "--distributed-backend nccl --lr 0.01 --lr-decay-style linear --min-lr 1.0e-5 --lr-decay-iters 20 "
    "--weight-decay 1e-2 --clip-grad 1.0 --lr-warmup-fraction .02 --log-interval 5 --eval-interval 10 "
    "--eval-iters 2 --fp16 --optimizer lamb";

const char* const kSeed001T5 =
    "lmforge train t5 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --kv-channels 16 --ffn-hidden-size "
    "256 --encoder-seq-length 64 --decoder-seq-length 16 --micro-batch-size 2 --global-batch-size 8 "
    "--max-position-embeddings 64 --train-iters 20 --lr-decay-iters 20 --data-path d1/my-bert_text_sentence "
    "--vocab-file d1/bert-large-uncased-vocab.txt --data-impl mmap --split 949,50,1 --lr 11.3e-3 --min-lr 0.00001 "
    "--lr-decay-style linear --lr-warmup-fraction .32 --weight-decay 1e-2 --clip-grad 1.0 --log-interval 5 "
    "--eval-interval 10 --eval-iters 2 --fp16 --vocab-extra-ids 100 --optimizer lamb";

TEST(SeedCommandLines, Seed001BertLineTakesPretrainBertsTokenizerDefault) {
  TempDir dir;
  make_seed001_data(dir);
  const auto r = run_in(dir, kSeed001Bert);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(last_iteration(r.output), 20) << r.output;
  const auto help = run_command(std::string(LMFORGE_EXE) + " train bert --help");
  EXPECT_NE(help.output.find("Default for train bert: BertWordPieceLowerCase, as Megatron's pretrain_bert.py sets it"),
            std::string::npos)
      << help.output;
}

TEST(SeedCommandLines, Seed001T5LineTakesKvChannels) {
  TempDir dir;
  make_seed001_data(dir);
  const std::string t5 = kSeed001T5;
  const auto r = run_in(dir, t5);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(last_iteration(r.output), 20) << r.output;
  // A head width other than hidden / heads is refused, naming both.
  const auto wide = run_in(dir, std::regex_replace(t5, std::regex("--kv-channels 16"), "--kv-channels 32"));
  EXPECT_NE(wide.status, 0);
  EXPECT_NE(wide.output.find("--kv-channels 32: lmforge's attention heads are --hidden-size / --num-attention-heads "
                             "= 64 / 4 = 16 channels wide"),
            std::string::npos)
      << wide.output;
}

// ---- seed 002 (Megatron v1.1.5 + DeepSpeed), as the process torch's launcher starts ----

// toy/: raw text made into a word-level dataset as the project's own preprocessor makes it (lmforge prep
// --input-format text --tokenizer-type WordLevel, tested byte for byte against that script in tests/prep), with its
// vocab.json (words, no byte-level tokens) and a subword-nmt bpe32k merges file.
void make_seed002_data(const TempDir& dir) {
  const char* words[] = {"the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "house", "\xe4\xb8\xad\xe5\x9b\xbd"};
  std::string vocab = "{\"<unk>\": 0, \"<|endoftext|>\": 1";
  for (int i = 0; i < 11; i++) vocab += ", \"" + std::string(words[i]) + "\": " + std::to_string(i + 2);
  vocab += ", \"sat@@\": 13}";
  fs::create_directories(dir.file("toy"));
  write_file(dir.file("toy/vocab.json"), vocab);
  write_file(dir.file("toy/bpe32k"), "#version: 0.2\ns a\nsa t@@\nc at</w>\nt h\nth e</w>\n");
  std::string text;
  uint32_t x = 12345;
  for (int line = 0; line < 200; line++) {
    const int n = 20 + line % 17;
    for (int w = 0; w < n; w++) {
      x = x * 1103515245u + 12345u;
      text += std::string(w ? " " : "") + (x % 13 == 12 ? "zebra" : words[(x >> 16) % 11]);
    }
    text += "\n";
  }
  write_file(dir.file("toy/nist02-32k.txt"), text);
  const auto r = run_in(dir, "lmforge prep --input toy/nist02-32k.txt --input-format text --tokenizer-type WordLevel "
                             "--vocab-file toy/vocab.json --append-eod --output-prefix toy/nist02-32k");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(fs::exists(dir.file("toy/nist02-32k_text_sentence.idx"))) << r.output;
}

// pretrain_gpt2_distributed.sh's flags (v1.1.5 spellings: --model-parallel-size, --batch-size per rank, --warmup).
const char* const kSeed002Gpt =
    "lmforge train gpt --model-parallel-size 1 --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
    "--batch-size 2 --seq-length 64 --max-position-embeddings 64 --train-iters 20 --lr-decay-iters 320000 "
    "--save ck2 --load ck2 --data-path toy/nist02-32k_text_sentence --vocab-file toy/vocab.json --merge-file "
    "toy/bpe32k --data-impl mmap --split 900,50,50 --distributed-backend nccl --lr 0.00015 --lr-decay-style "
    "cosine --min-lr 1.0e-5 --weight-decay 1e-2 --clip-grad 1.0 --warmup .01 --checkpoint-activations "
    "--log-interval 5 --save-interval 10 --eval-interval 10 --eval-iters 2 --fp16";

TEST(SeedCommandLines, Seed002WordLevelVocabularySizesTheModelAndGenerateRefusesIt) {
  TempDir dir;
  make_seed002_data(dir);
  const auto r = run_in(dir, kSeed002Gpt);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(last_iteration(r.output), 20) << r.output;
  EXPECT_NE(r.output.find("is not a byte-level BPE tokenizer"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("needs only its size, 14 tokens, and its end-of-text id, 1"), std::string::npos) << r.output;
  // generate tokenizes its prompt: the same vocabulary is refused, saying why.
  const auto g = run_in(dir, "lmforge generate --load ck2 --vocab-file toy/vocab.json --merge-file toy/bpe32k "
                             "--prompt 'the cat' --max-new-tokens 2");
  EXPECT_NE(g.status, 0);
  EXPECT_NE(g.output.find("This command tokenizes or decodes text, which needs a byte-level BPE vocabulary"),
            std::string::npos)
      << g.output;
}

// ds_pretrain_gpt2.sh under `lmforge launch` (deepspeed's place), both forms the script has: --num_nodes/--num_gpus,
// and the multi-node form with -i host:slots and a hostfile, each with the DeepSpeed JSON whose zero stage (2) wins
// over the line's --zero-stage 0, as DeepSpeed's does.
TEST(SeedCommandLines, Seed002DeepSpeedScriptLinesRunUnderLaunch) {
  TempDir dir;
  make_seed002_data(dir);
  write_file(dir.file("ds.json"),
             "{\"train_batch_size\": 2, \"zero_optimization\": {\"stage\": 2, \"contiguous_gradients\": true, "
             "\"reduce_scatter\": true}, \"fp16\": {\"enabled\": true, \"loss_scale\": 0, "
             "\"initial_scale_power\": 16}}\n");
  write_file(dir.file("hostfile"), "127.0.0.1 slots=2\n");
  const std::string ds =
      " --model-parallel-size 2 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
      "--max-position-embeddings 64 --batch-size 2 --train-iters 20 --lr-decay-iters 320000 --save ckds --load ckds "
      "--data-path toy/nist02-32k_text_sentence --vocab-file toy/vocab.json --merge-file toy/bpe32k --data-impl mmap "
      "--split 900,50,50 --distributed-backend nccl --lr 1.5e-4 --lr-decay-style cosine --min-lr 1.0e-5 "
      "--weight-decay 1e-2 --clip-grad 1.0 --warmup 0.01 --checkpoint-activations --log-interval 5 "
      "--save-interval 10 --eval-interval 10 --eval-iters 2 --fp16 --tensorboard-dir tb --deepspeed "
      "--deepspeed_config ds.json --zero-stage 0 --zero-reduce-bucket-size 50000000 "
      "--zero-allgather-bucket-size 5000000000 --zero-contigious-gradients --zero-reduce-scatter "
      "--checkpoint-num-layers 1 --partition-activations --contigious-checkpointing --synchronize-each-layer";
  const auto one = run_in(dir, "lmforge launch --num_nodes 1 --num_gpus 2 train gpt" + ds);
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_EQ(last_iteration(one.output), 20) << one.output;
  EXPECT_TRUE(fs::exists(dir.file("ckds/latest_checkpointed_iteration.txt"))) << one.output;
  // The second form starts where the first saved (--load ckds): more iterations on the same checkpoint.
  fs::remove_all(dir.file("ckds"));
  const auto hosts = run_in(dir, "lmforge launch --master_port 6030 -i 127.0.0.1:0,1 --hostfile hostfile train gpt" + ds);
  ASSERT_EQ(hosts.status, 0) << hosts.output;
  EXPECT_EQ(last_iteration(hosts.output), 20) << hosts.output;
}

// ---- the launcher lines whole: 2 processes against one with the same global batch ----

// Seed 001's BERT and T5 lines under torch's launcher (2 ranks, global batch 8 on each side: 4 and 2 micro-batches
// per rank), fp16 from a loss scale of 2^32 that halves through ~18 overflowing iterations (expect_same_losses: the
// layouts may skip different iterations at the end).
TEST(SeedCommandLines, Seed001LinesRunWholeUnderTorchsLauncher) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3 (Debian's python3-torch)";
  TempDir dir;
  make_seed001_data(dir);
  for (const char* line : {kSeed001Bert, kSeed001T5}) {
    const auto many = run_in(dir, torch_launcher() + line);
    const auto one = run_in(dir, std::string("timeout 300 ") + line);
    expect_same_losses(many, one, 1e-6, 1e-2, std::string("2 ranks under torch.distributed.launch: ") + line);
  }
}

// Seed 002's pretrain_gpt2_distributed.sh line under torch's launcher: --batch-size is per rank (v1.1.5), so one
// process with the same global batch is the line with --global-batch-size 4 (and its own checkpoint directory).
TEST(SeedCommandLines, Seed002DistributedScriptLineRunsWholeUnderTorchsLauncher) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3 (Debian's python3-torch)";
  TempDir dir;
  make_seed002_data(dir);
  const auto many = run_in(dir, torch_launcher() + kSeed002Gpt);
  ASSERT_TRUE(fs::exists(dir.file("ck2/latest_checkpointed_iteration.txt"))) << many.output;
  const std::string single =
      std::regex_replace(std::string(kSeed002Gpt), std::regex("--save ck2 --load ck2"), "--save ck2one --load ck2one");
  const auto one = run_in(dir, "timeout 300 " + single + " --global-batch-size 4");
  expect_same_losses(many, one, 1e-6, 1e-2, "pretrain_gpt2_distributed.sh, 2 ranks under torch.distributed.launch");
}

// Seed 004's two-node line as written: two commands of --distributed-gpus 2 making a world of 4 over tcp://, the
// first in the background. 4 ranks x --max-sentences 4 x --update-freq 2 = 32 sentences per update, which one
// process takes as --update-freq 8 (the later value of a repeated flag wins, as in argparse); fp32: every logged
// step equal, at the parity tests' 1e-6.
TEST(SeedCommandLines, Seed004TwoNodeLinesMakeAWorldOfFourThatTrainsLikeOneProcess) {
  TempDir dir;
  make_seed004_data(dir);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  const std::string f = std::string("timeout 300 lmforge train bert ") + kSeed004 +
                        " --save-dir node2 --distributed-init-method " + url +
                        " --distributed-world-size 4 --distributed-gpus 2 --distributed-rank ";
  const auto many = run_in(dir, "{ " + f + "0 & } ; first=$! ; " + f + "2 ; second=$? ; wait $first ; first=$? ; " +
                                    "[ $first -eq 0 ] || exit $first ; exit $second");
  const auto one = run_in(dir, std::string("timeout 300 lmforge train bert ") + kSeed004 +
                                   " --save-dir one --update-freq 8");
  expect_same_losses(many, one, 1e-6, 1e-6, "seed 004's two commands (4 ranks)");
  EXPECT_TRUE(fs::exists(dir.file("node2"))) << many.output;
}

}  // namespace
