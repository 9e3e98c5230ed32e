// defines: tests of `lmforge merge` and `lmforge inspect` as a user runs them: results against numpy references, exit codes, messages;
//          merge_preprocessed_data.py's `--datasets A B C` spelling; `inspect <prefix>.shards` validating shards as
//          `merge --shards` does and working on a read-only mount
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

const std::string kExe = LMFORGE_EXE;
const std::string kGpt2 = shared_path("data/sample/sample_gpt2_text_document");
const std::string kBert = shared_path("data/sample/sample_bert_text_document");

// Megatron's merge rule written with numpy (merge_datasets.py's add_index + finalize), as an independent reference:
// writes the expected merged .idx of the given prefixes to `out`.
void numpy_merged_idx(const std::vector<std::string>& prefixes, const std::string& out) {
  const std::string script = out + ".py";
  write_file(script,
             "import numpy as np, sys\n"
             "out, prefixes = sys.argv[1], sys.argv[2:]\n"
             "lens, docs, dtype = [], [0], None\n"
             "for p in prefixes:\n"
             "    b = open(p + '.idx', 'rb').read()\n"
             "    S = int.from_bytes(b[18:26], 'little'); D = int.from_bytes(b[26:34], 'little')\n"
             "    dtype = b[17]\n"
             "    shift = len(lens)\n"
             "    lens += list(np.frombuffer(b, np.int32, S, 34))\n"
             "    docs += [int(x) + shift for x in np.frombuffer(b, np.int64, D, 34 + 12 * S)[1:]]\n"
             "item = {4: 4, 8: 2}[dtype]\n"
             "lens = np.array(lens, np.int32)\n"
             "ptr = np.zeros(len(lens), np.int64)\n"
             "ptr[1:] = np.cumsum(lens.astype(np.int64) * item)[:-1]\n"
             "with open(out, 'wb') as f:\n"
             "    f.write(b'MMIDIDX\\x00\\x00'); f.write((1).to_bytes(8, 'little')); f.write(bytes([dtype]))\n"
             "    f.write(len(lens).to_bytes(8, 'little')); f.write(len(docs).to_bytes(8, 'little'))\n"
             "    f.write(lens.tobytes()); f.write(ptr.tobytes()); f.write(np.array(docs, np.int64).tobytes())\n");
  std::string cmd = "/usr/bin/python3 " + script + " " + out;
  for (auto& p : prefixes) cmd += " " + p;
  auto r = run_command(cmd);
  ASSERT_EQ(r.status, 0) << r.output;
}

}  // namespace

TEST(MergeCli, HelpExplainsEveryFlag) {
  auto r = run_command(kExe + " merge --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* flag : {"--output-prefix", "--input-prefix", "--input-dir", "byte for byte", "dtype"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST(MergeCli, PrefixesInCommandLineOrderMatchNumpyReference) {
  TempDir dir;
  auto r = run_command(kExe + " merge --output-prefix " + dir.file("m") + " --input-prefix " + kBert +
                       " --input-prefix " + kGpt2);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("documents:      19,774"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens:         1,997,617"), std::string::npos) << r.output;
  EXPECT_TRUE(read_file(dir.file("m.bin")) == read_file(kBert + ".bin") + read_file(kGpt2 + ".bin"));
  numpy_merged_idx({kBert, kGpt2}, dir.file("expected.idx"));
  EXPECT_TRUE(read_file(dir.file("m.idx")) == read_file(dir.file("expected.idx")));
}

TEST(MergeCli, DirectoryInSortedNameOrder) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("in"));
  for (const char* ext : {".bin", ".idx"}) {
    std::filesystem::copy_file(kGpt2 + ext, dir.file(std::string("in/b_gpt2") + ext));
    std::filesystem::copy_file(kBert + ext, dir.file(std::string("in/a_bert") + ext));
  }
  write_file(dir.file("in/notes.txt"), "ignored\n");
  auto r = run_command(kExe + " merge --output-prefix " + dir.file("m") + " --input-dir " + dir.file("in"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_LT(r.output.find("a_bert"), r.output.find("b_gpt2")) << r.output;
  EXPECT_TRUE(read_file(dir.file("m.bin")) == read_file(kBert + ".bin") + read_file(kGpt2 + ".bin"));
  numpy_merged_idx({kBert, kGpt2}, dir.file("expected.idx"));
  EXPECT_TRUE(read_file(dir.file("m.idx")) == read_file(dir.file("expected.idx")));
}

TEST(MergeCli, MismatchedDtypeExitsOneNamingBothFiles) {
  TempDir dir;
  // An int32 copy of a tiny dataset, written byte by byte: one document [7].
  std::string idx("MMIDIDX\0\0", 9);
  auto put = [&](uint64_t v, int n) { idx.append(reinterpret_cast<const char*>(&v), static_cast<size_t>(n)); };
  put(1, 8);
  put(4, 1);
  put(1, 8);
  put(2, 8);
  put(1, 4);
  put(0, 8);
  put(0, 8);
  put(1, 8);
  write_file(dir.file("wide.idx"), idx);
  write_file(dir.file("wide.bin"), std::string("\7\0\0\0", 4));
  auto r = run_command(kExe + " merge --output-prefix " + dir.file("m") + " --input-prefix " + kGpt2 +
                       " --input-prefix " + dir.file("wide"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("lmforge merge: error: " + dir.file("wide.idx") + ": dtype int32 differs from uint16 of " +
                          kGpt2 + ".idx"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.bin")));
  // The int32 dataset itself is valid.
  EXPECT_EQ(run_command(kExe + " inspect " + dir.file("wide")).status, 0);
}

TEST(InspectCli, HelpExplainsEveryFlag) {
  auto r = run_command(kExe + " inspect --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* flag : {"--document", "--json", "--tokenizer-type", "--vocab-file", "--merge-file", "p99"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST(InspectCli, StatisticsOfMegatronSample) {
  auto r = run_command(kExe + " inspect " + kGpt2);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"dtype:          uint16 (code 8", "documents:      9,887 (0 empty)",
                           "sequences:      9,887", "tokens:         1,142,821", ".bin size:      2,285,642 bytes",
                           ".idx size:      197,782 bytes"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  auto j = run_command(kExe + " inspect --json " + kGpt2);
  ASSERT_EQ(j.status, 0) << j.output;
  EXPECT_NE(j.output.find("\"tokens\": 1142821"), std::string::npos) << j.output;
  // The JSON is valid JSON with the numpy-defined percentiles (checked in detail in data_test_dataset_stats).
  auto py = run_command(kExe + " inspect --json " + kGpt2 +
                        " | /usr/bin/python3 -c \"import json,sys; d=json.load(sys.stdin); "
                        "print(d['documents'], d['sequence_length']['max'])\"");
  EXPECT_EQ(py.output, "9887 31956\n");
}

TEST(InspectCli, DocumentDecodedWithGpt2) {
  auto r = run_command(kExe + " inspect " + kGpt2 + " --document 0 --document 3 --tokenizer-type GPT2BPETokenizer" +
                       " --vocab-file " + shared_path("data/vocab/gpt2-vocab.json") + " --merge-file " +
                       shared_path("data/vocab/gpt2-merges.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string sample = read_file(shared_path("data/sample/sample.jsonl"));
  // Text of documents 0 and 3 of the corpus the dataset came from, then the EOD Megatron appended.
  for (const char* text : {"The Bionic Dog drinks too much and kicks over the National",
                           "replaced by disco, which offers no guidance to any form of life more"}) {
    ASSERT_NE(sample.find(text), std::string::npos) << text;
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("<|endoftext|>"), std::string::npos);
}

TEST(InspectCli, DocumentIdsWithoutTokenizer) {
  auto r = run_command(kExe + " inspect --json " + kGpt2 + " --document 2");
  ASSERT_EQ(r.status, 0) << r.output;
  // Reference ids from Hugging Face (line 3 of the ids file) plus the EOD 50256.
  const std::string ids = read_file(shared_path("data/sample/sample.gpt2.ids.jsonl"));
  size_t line_start = 0;
  for (int i = 0; i < 2; ++i) line_start = ids.find('\n', line_start) + 1;
  size_t open = ids.find('[', line_start), close = ids.find(']', open);
  std::string expect = "\"ids\": [" + ids.substr(open + 1, close - open - 1) + ",50256]";
  EXPECT_NE(r.output.find(expect), std::string::npos) << expect << "\n" << r.output;
}

TEST(InspectCli, CorruptAndOutOfRangeExitOne) {
  TempDir dir;
  write_file(dir.file("bad.idx"), read_file(kGpt2 + ".idx").substr(0, 1000));
  write_file(dir.file("bad.bin"), read_file(kGpt2 + ".bin"));
  auto r = run_command(kExe + " inspect " + dir.file("bad"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("lmforge inspect: error: " + dir.file("bad.idx") + ": size 1000 bytes, expected 197782"),
            std::string::npos)
      << r.output;
  r = run_command(kExe + " inspect " + kGpt2 + " --document 9887");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--document 9887 is out of range (9887 documents"), std::string::npos) << r.output;
  r = run_command(kExe + " inspect " + dir.file("missing"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("missing.idx: cannot open: No such file"), std::string::npos) << r.output;
}

namespace {

const std::string kGpt2Flags = " --tokenizer-type GPT2BPETokenizer --vocab-file " +
                               shared_path("data/vocab/gpt2-vocab.json") + " --merge-file " +
                               shared_path("data/vocab/gpt2-merges.txt") + " --append-eod --workers 1";

// A finished claim-mode run over sample.jsonl in 512 KB shards (6 shards): <dir>/s.shards and s_text_document.
void claim_run(const TempDir& dir) {
  auto r = run_command("timeout 120 " + kExe + " prep --input " + shared_path("data/sample/sample.jsonl") +
                       " --output-prefix " + dir.file("s") + kGpt2Flags +
                       " --claim --claim-lease 2 --shard-size 512K");
  ASSERT_EQ(r.status, 0) << r.output;
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// merge_preprocessed_data.py --datasets A B C --output-prefix X: the merge of three preps of a corpus's parts is
// byte for byte the prep of the whole corpus (Megatron's own output for it, in ../shared).
TEST(MergeCli, DatasetsListSpellingEqualsOnePrepOfTheConcatenation) {
  TempDir dir;
  const std::string sample = read_file(shared_path("data/sample/sample.jsonl"));
  size_t cut1 = sample.find('\n', sample.size() / 3) + 1, cut2 = sample.find('\n', 2 * sample.size() / 3) + 1;
  const std::string parts[3] = {sample.substr(0, cut1), sample.substr(cut1, cut2 - cut1), sample.substr(cut2)};
  std::string datasets;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "part" + std::to_string(i);
    write_file(dir.file(name + ".jsonl"), parts[i]);
    auto r = run_command(kExe + " prep --input " + dir.file(name + ".jsonl") + " --output-prefix " + dir.file(name) +
                         kGpt2Flags);
    ASSERT_EQ(r.status, 0) << r.output;
    datasets += " " + dir.file(name + "_text_document");
  }
  auto r = run_command(kExe + " merge --datasets" + datasets + " --output-prefix " + dir.file("merged"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("inputs:         3"), std::string::npos) << r.output;
  EXPECT_TRUE(read_file(dir.file("merged.bin")) == read_file(kGpt2 + ".bin"));
  EXPECT_TRUE(read_file(dir.file("merged.idx")) == read_file(kGpt2 + ".idx"));
  // The older spellings still work and give the same bytes; --datasets with another input flag is refused.
  r = run_command(kExe + " merge --output-prefix " + dir.file("again") + " --input-prefix " +
                  dir.file("part0_text_document") + " --input-prefix " + dir.file("part1_text_document") +
                  " --input-prefix " + dir.file("part2_text_document"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(read_file(dir.file("again.idx")) == read_file(kGpt2 + ".idx"));
  r = run_command(kExe + " merge --datasets" + datasets + " --input-prefix " + kGpt2 + " --output-prefix " +
                  dir.file("x"));
  EXPECT_NE(r.status, 0) << r.output;
  r = run_command(kExe + " merge --help");
  EXPECT_NE(r.output.find("--datasets"), std::string::npos) << r.output;
}

// A manifest that is not JSON and a shard whose .bin was cut short are not "done": `merge --shards` would refuse
// or remake them, and inspect says which and why.
TEST(InspectCli, ShardDirectoryValidatesManifestsAndShardFilesAsMergeDoes) {
  TempDir dir;
  claim_run(dir);
  const std::string shards = dir.file("s.shards");
  auto r = run_command(kExe + " inspect " + shards);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("done 6 (2.9 MB), claimed 0, free 0\n"), std::string::npos) << r.output;
  write_file(shards + "/shard-000001.json", "{\"plan_id\": garbage");
  std::filesystem::resize_file(shards + "/shard-000002_text_document.bin", 1000);
  r = run_command(kExe + " inspect " + shards);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("done 4 ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("damaged 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  shard-000001: " + shards + "/shard-000001.json: not valid JSON"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  shard-000002: " + shards + "/shard-000002_text_document.bin"), std::string::npos)
      << r.output;
  // What merge says of the same directory.
  r = run_command(kExe + " merge --shards " + dir.file("s"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("shard-000001.json: not valid JSON"), std::string::npos) << r.output;
}

// `inspect <prefix>.shards` from a machine that mounts the directory read-only: it works, writes nothing and says
// which clock it judged the heartbeats by.
TEST(InspectCli, ShardDirectoryOnAReadOnlyMount) {
  TempDir dir;
  claim_run(dir);
  const std::string shards = dir.file("s.shards");
  const std::vector<std::string> before = listing(shards);
  std::string command;
  if (::geteuid() == 0) {
    // root writes through permissions: a read-only bind mount in a user and mount namespace of its own
    if (run_command("unshare -rm true").status != 0) GTEST_SKIP() << "no user namespaces for a read-only mount";
    command = "unshare -rm sh -c 'mount --bind -o ro " + shards + " " + shards + " && exec " + kExe + " inspect " +
              shards + "'";
  } else {
    std::filesystem::permissions(shards + "/claims", std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::remove);
    std::filesystem::permissions(shards, std::filesystem::perms::owner_write, std::filesystem::perm_options::remove);
    command = kExe + " inspect " + shards;
  }
  auto r = run_command(command);
  for (const std::string& d : {shards, shards + "/claims"})
    std::filesystem::permissions(d, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("done 6 (2.9 MB), claimed 0, free 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("clock:           heartbeat ages judged by this machine's clock, since " + shards +
                          "/claims is not writable here"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("assembled:       yes"), std::string::npos) << r.output;
  EXPECT_EQ(listing(shards), before);
  // With write access it judges by the file server's clock, and its probe is gone afterwards.
  r = run_command(kExe + " inspect " + shards);
  EXPECT_NE(r.output.find("heartbeat ages judged by the file server's clock (through a probe file in " + shards +
                          "/claims)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(listing(shards), before);
}

