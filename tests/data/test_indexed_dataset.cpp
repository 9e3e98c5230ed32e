// defines: tests of the Megatron .bin/.idx reader and writer against Megatron's own files and hand-built corrupt ones
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "util/error.h"

namespace fs = std::filesystem;
using lmforge::Error;
using namespace lmforge::data;

namespace {

const std::string kSample = std::string(LMFORGE_SHARED_DIR) + "/data/sample/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing test input " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string md5_of(const std::string& path) {
  std::string cmd = "md5sum '" + path + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[64] = {0};
  size_t n = fread(buf, 1, 32, p);
  pclose(p);
  return std::string(buf, n);
}

// The "ids" arrays of a Hugging Face reference file ({"id": "...", "ids": [..]} per line), in order.
std::vector<std::vector<int32_t>> read_reference_ids(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing test input " + path);
  std::vector<std::vector<int32_t>> docs;
  std::string line;
  while (std::getline(in, line)) {
    size_t p = line.find("\"ids\":[");
    if (p == std::string::npos) throw std::runtime_error("no ids in " + path);
    p += 7;
    std::vector<int32_t> ids;
    while (line[p] != ']') {
      char* end;
      ids.push_back(static_cast<int32_t>(std::strtol(line.c_str() + p, &end, 10)));
      p = static_cast<size_t>(end - line.c_str());
      if (line[p] == ',') ++p;
    }
    docs.push_back(std::move(ids));
  }
  return docs;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "lmforge-idx-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

// Copies every sequence and document boundary of `src` through the writer.
void rewrite(const IndexedDataset& src, const std::string& out_prefix) {
  IndexedDatasetWriter w(out_prefix, src.dtype());
  std::vector<int32_t> ids;
  for (uint64_t d = 0; d < src.document_count(); ++d) {
    for (int64_t s = src.document_index(d); s < src.document_index(d + 1); ++s) {
      src.read_sequence(static_cast<uint64_t>(s), ids);
      w.add_sequence(ids);
    }
    w.end_document();
  }
  EXPECT_EQ(w.sequences(), src.sequence_count());
  EXPECT_EQ(w.documents(), src.document_count());
  EXPECT_EQ(w.tokens(), src.token_count());
  w.finish();
}

// Expects `fn` to throw an Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, std::vector<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no Error thrown; expected one mentioning " << parts[0];
  } catch (const Error& e) {
    for (auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

// A small valid dataset: documents {[1,2,3]}, {} (empty), {[4],[5,6]}.
void write_small(const std::string& prefix, DType dtype = DType::UInt16) {
  IndexedDatasetWriter w(prefix, dtype);
  std::vector<int32_t> a{1, 2, 3}, b{4}, c{5, 6};
  w.add_sequence(a);
  w.end_document();
  w.end_document();
  w.add_sequence(b);
  w.add_sequence(c);
  w.end_document();
  w.finish();
}

}  // namespace

TEST(IndexedDataset, DtypeForVocabSize) {
  EXPECT_EQ(dtype_for_vocab_size(50257), DType::UInt16);
  EXPECT_EQ(dtype_for_vocab_size(30524), DType::UInt16);
  EXPECT_EQ(dtype_for_vocab_size(65499), DType::UInt16);
  EXPECT_EQ(dtype_for_vocab_size(65500), DType::Int32);
  EXPECT_EQ(dtype_for_vocab_size(65536), DType::Int32);
  EXPECT_EQ(dtype_size(DType::UInt16), 2u);
  EXPECT_EQ(dtype_size(DType::Int32), 4u);
  EXPECT_STREQ(dtype_name(DType::UInt16), "uint16");
  EXPECT_EQ(static_cast<int>(DType::UInt16), 8);
  EXPECT_EQ(static_cast<int>(DType::Int32), 4);
}

// Megatron's GPT-2 output for sample.jsonl holds, per document, Hugging Face's ids followed by the EOD 50256.
TEST(IndexedDataset, ReadsMegatronGpt2SampleAgainstHuggingFaceIds) {
  auto ds = IndexedDataset::open(kSample + "sample_gpt2_text_document");
  auto ref = read_reference_ids(kSample + "sample.gpt2.ids.jsonl");
  EXPECT_EQ(ds->dtype(), DType::UInt16);
  ASSERT_EQ(ds->document_count(), ref.size());
  EXPECT_EQ(ds->sequence_count(), 9887u);
  EXPECT_EQ(ds->token_count(), 1142821u);
  EXPECT_EQ(ds->bin_bytes(), 2 * ds->token_count());
  EXPECT_EQ(ds->idx_bytes(), 34 + 12 * ds->sequence_count() + 8 * (ds->document_count() + 1));
  std::vector<int32_t> ids, doc;
  for (uint64_t d = 0; d < ds->document_count(); ++d) {
    doc.clear();
    for (int64_t s = ds->document_index(d); s < ds->document_index(d + 1); ++s) {
      ds->read_sequence(static_cast<uint64_t>(s), ids);
      doc.insert(doc.end(), ids.begin(), ids.end());
    }
    std::vector<int32_t> expect = ref[d];
    if (!expect.empty()) expect.push_back(50256);
    ASSERT_EQ(doc, expect) << "document " << d;
  }
  // Partial reads.
  ds->read_sequence(0, ids, 2, 3);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], ref[0][2]);
  EXPECT_EQ(ids[2], ref[0][4]);
  EXPECT_THROW(ds->read_sequence(0, ids, 0, ds->sequence_length(0) + 1), Error);
  EXPECT_THROW(ds->read_sequence(ds->sequence_count(), ids), Error);
}

TEST(IndexedDataset, ReadsMegatronBertSampleAgainstHuggingFaceIds) {
  auto ds = IndexedDataset::open(kSample + "sample_bert_text_document");
  auto ref = read_reference_ids(kSample + "sample.hf-bert.ids.jsonl");
  EXPECT_EQ(ds->dtype(), DType::UInt16);
  ASSERT_EQ(ds->document_count(), ref.size());
  EXPECT_EQ(ds->token_count(), 854796u);
  std::vector<int32_t> ids, doc;
  for (uint64_t d = 0; d < ds->document_count(); ++d) {
    doc.clear();
    for (int64_t s = ds->document_index(d); s < ds->document_index(d + 1); ++s) {
      ds->read_sequence(static_cast<uint64_t>(s), ids);
      doc.insert(doc.end(), ids.begin(), ids.end());
    }
    ASSERT_EQ(doc, ref[d]) << "document " << d;
  }
}

TEST(IndexedDataset, RewriteIsByteIdenticalToMegatron) {
  TempDir tmp;
  struct Case { const char* name; const char* bin_md5; const char* idx_md5; };
  for (Case c : {Case{"sample_gpt2_text_document", "cce49b969dfcde63224ce4e70ad1e549", "a15fe6c73db68d8599c4073b5f16cac2"},
                 Case{"sample_bert_text_document", "9b4330bf87f2443248ac0caaab640aa6", "e68c7dc7a9dd87f8d4abf965d8650f17"}}) {
    auto src = IndexedDataset::open(kSample + c.name);
    std::string out = tmp / c.name;
    rewrite(*src, out);
    EXPECT_EQ(md5_of(out + ".bin"), c.bin_md5) << c.name;
    EXPECT_EQ(md5_of(out + ".idx"), c.idx_md5) << c.name;
    EXPECT_TRUE(read_file(out + ".bin") == read_file(kSample + c.name + ".bin"));
    EXPECT_TRUE(read_file(out + ".idx") == read_file(kSample + c.name + ".idx"));
  }
  // Only the final files remain: no temporaries.
  EXPECT_EQ(tmp.entries().size(), 4u);
}

TEST(IndexedDataset, EmptyDocumentIsRepeatedIndex) {
  TempDir tmp;
  write_small(tmp / "small");
  // Independent expectation of the bytes, built field by field from the format description.
  std::string idx("MMIDIDX\0\0", 9);
  auto put = [&](auto v) { idx.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint64_t{1});
  put(uint8_t{8});
  put(uint64_t{3});
  put(uint64_t{4});
  for (int32_t l : {3, 1, 2}) put(l);
  for (int64_t p : {0, 6, 8}) put(p);
  for (int64_t d : {0, 1, 1, 3}) put(d);
  EXPECT_TRUE(read_file(tmp / "small.idx") == idx);
  EXPECT_EQ(read_file(tmp / "small.bin"), std::string("\1\0\2\0\3\0\4\0\5\0\6\0", 12));

  auto ds = IndexedDataset::open(tmp / "small");
  EXPECT_EQ(ds->document_count(), 3u);
  EXPECT_EQ(ds->sequence_count(), 3u);
  EXPECT_EQ(ds->document_index(1), ds->document_index(2));
  std::vector<int32_t> ids;
  ds->read_sequence(2, ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 6}));
}

TEST(IndexedDataset, EmptyDatasetRoundTrips) {
  TempDir tmp;
  {
    IndexedDatasetWriter w(tmp / "empty", DType::Int32);
    w.end_document();  // one empty document, 0 sequences, 0-byte .bin
    w.finish();
  }
  auto ds = IndexedDataset::open(tmp / "empty");
  EXPECT_EQ(ds->dtype(), DType::Int32);
  EXPECT_EQ(ds->sequence_count(), 0u);
  EXPECT_EQ(ds->document_count(), 1u);
  EXPECT_EQ(ds->bin_bytes(), 0u);
}

TEST(IndexedDataset, Int32DatasetRoundTrips) {
  TempDir tmp;
  IndexedDatasetWriter w(tmp / "wide", DType::Int32);
  std::vector<int32_t> a{70000, 0, 2147483647};
  w.add_sequence(a);
  w.end_document();
  w.finish();
  auto ds = IndexedDataset::open(tmp / "wide");
  std::vector<int32_t> ids;
  ds->read_sequence(0, ids);
  EXPECT_EQ(ids, a);
  EXPECT_EQ(ds->bin_bytes(), 12u);
}

TEST(IndexedDataset, IdsMustFitDtype) {
  TempDir tmp;
  IndexedDatasetWriter w(tmp / "narrow", DType::UInt16);
  std::vector<int32_t> ok{0, 65535}, big{1, 65536}, neg{-1};
  w.add_sequence(ok);
  expect_error([&] { w.add_sequence(big); }, {"65536", "uint16", "narrow.bin"});
  expect_error([&] { w.add_sequence(neg); }, {"-1", "uint16"});
  EXPECT_EQ(w.sequences(), 1u);
}

TEST(IndexedDataset, FinishRefusesUnclosedDocument) {
  TempDir tmp;
  IndexedDatasetWriter w(tmp / "open", DType::UInt16);
  std::vector<int32_t> a{1};
  w.add_sequence(a);
  expect_error([&] { w.finish(); }, {"end_document"});
}

TEST(IndexedDataset, WriterWithoutFinishLeavesNothing) {
  TempDir tmp;
  {
    IndexedDatasetWriter w(tmp / "abandoned", DType::UInt16);
    std::vector<int32_t> a(100000, 7);
    for (int i = 0; i < 50; ++i) w.add_sequence(a);  // 10 MB: forces buffer flushes to the temporary
    w.end_document();
    EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"abandoned.bin.tmp-" + std::to_string(getpid())}));
  }
  EXPECT_TRUE(tmp.entries().empty());
}

TEST(IndexedDataset, FinishReplacesExistingDatasetAtomically) {
  TempDir tmp;
  write_small(tmp / "d");
  {
    IndexedDatasetWriter w(tmp / "d", DType::UInt16);
    std::vector<int32_t> a{9};
    w.add_sequence(a);
    w.end_document();
    // Until finish() the old dataset stays readable under the final names.
    EXPECT_EQ(IndexedDataset::open(tmp / "d")->sequence_count(), 3u);
    w.finish();
  }
  EXPECT_EQ(IndexedDataset::open(tmp / "d")->sequence_count(), 1u);
  EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"d.bin", "d.idx"}));
}

TEST(IndexedDataset, WriterErrorsOnMissingDirectory) {
  expect_error([] { IndexedDatasetWriter w("/nonexistent-dir-lmforge/x", DType::UInt16); },
               {"/nonexistent-dir-lmforge/x.bin.tmp-", "No such file"});
}

// --- corrupt inputs: each must be an Error naming the file and what is wrong ---

class CorruptIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    write_small(tmp / "c");
    idx = read_file(tmp / "c.idx");
    bin = read_file(tmp / "c.bin");
  }
  void expect_open_error(std::vector<std::string> parts) {
    write_file(tmp / "c.idx", idx);
    write_file(tmp / "c.bin", bin);
    expect_error([&] { IndexedDataset::open(tmp / "c"); }, parts);
  }
  template <typename T>
  void poke(size_t offset, T v) { std::memcpy(idx.data() + offset, &v, sizeof(T)); }
  TempDir tmp;
  std::string idx, bin;
};

TEST_F(CorruptIndex, Valid) { EXPECT_NO_THROW(IndexedDataset::open(tmp / "c")); }

TEST_F(CorruptIndex, TruncatedIdx) {
  idx.resize(idx.size() - 6);
  expect_open_error({"c.idx", "size 96 bytes, expected 102 for 3 sequences and 4 document-index entries"});
}

TEST_F(CorruptIndex, TruncatedHeader) {
  idx.resize(20);
  expect_open_error({"c.idx", "size 20 bytes", "header"});
}

TEST_F(CorruptIndex, WrongMagic) {
  idx[0] = 'X';
  expect_open_error({"c.idx", "magic"});
}

TEST_F(CorruptIndex, WrongVersion) {
  poke<uint64_t>(9, 2);
  expect_open_error({"c.idx", "version 2"});
}

TEST_F(CorruptIndex, UnknownDtype) {
  idx[17] = 9;
  expect_open_error({"c.idx", "dtype code 9"});
}

TEST_F(CorruptIndex, TruncatedMegatronIdxNamesSizes) {
  idx = read_file(kSample + "sample_gpt2_text_document.idx").substr(0, 100);
  bin = read_file(kSample + "sample_gpt2_text_document.bin");
  expect_open_error({"c.idx", "size 100 bytes, expected 197782 for 9887 sequences and 9888 document-index entries"});
}

TEST_F(CorruptIndex, HugeCounts) {
  poke<uint64_t>(18, uint64_t{1} << 62);
  expect_open_error({"c.idx", "more than"});
}

TEST_F(CorruptIndex, BinTooShort) {
  bin.resize(bin.size() - 2);
  expect_open_error({"c.bin", "size 10 bytes, expected 12"});
}

TEST_F(CorruptIndex, BinTooLong) {
  bin += "xx";
  expect_open_error({"c.bin", "size 14 bytes, expected 12"});
}

TEST_F(CorruptIndex, MissingBin) {
  write_file(tmp / "c.idx", idx);
  fs::remove(tmp / "c.bin");
  expect_error([&] { IndexedDataset::open(tmp / "c"); }, {"c.bin", "No such file"});
}

TEST_F(CorruptIndex, DocumentIndexNotEndingAtS) {
  poke<int64_t>(34 + 12 * 3 + 8 * 3, 2);
  expect_open_error({"c.idx", "document index ends at 2", "sequence count 3"});
}

TEST_F(CorruptIndex, DocumentIndexNotStartingAtZero) {
  poke<int64_t>(34 + 12 * 3, 1);
  expect_open_error({"c.idx", "starts at 1"});
}

TEST_F(CorruptIndex, DocumentIndexDecreasing) {
  poke<int64_t>(34 + 12 * 3 + 8 * 2, 0);  // 0,1,0,3
  expect_open_error({"c.idx", "decreases at entry 2"});
}

TEST_F(CorruptIndex, NonMonotonicPointers) {
  poke<int64_t>(34 + 12 + 8 * 2, 2);  // pointers 0,6,2
  expect_open_error({"c.idx", "pointer of sequence 2 is 2, expected 8"});
}

TEST_F(CorruptIndex, NegativeLength) {
  poke<int32_t>(34 + 4, -1);
  expect_open_error({"c.idx", "sequence 1 has negative length"});
}

// --- the legacy fairseq "TNTIDX" layout (old Megatron / Megatron-DeepSpeed --dataset-impl lazy|cached) ---

namespace {

// Writes <out>.bin/.idx in the TNTIDX layout from a MMIDIDX dataset with numpy, following Megatron-DeepSpeed's
// IndexedDatasetBuilder (add_item per sequence, end_document per document, finalize) — an independent writer.
void write_legacy_with_numpy(const std::string& src, const std::string& out, const char* np_dtype, int code) {
  std::string script = out + ".py";
  std::ofstream(script) <<
      "import numpy as np, struct, sys\n"
      "src, out, dt, code = sys.argv[1], sys.argv[2], np.dtype(sys.argv[3]), int(sys.argv[4])\n"
      "b = open(src + '.idx', 'rb').read()\n"
      "S = int.from_bytes(b[18:26], 'little'); D = int.from_bytes(b[26:34], 'little')\n"
      "lens = np.frombuffer(b, np.int32, S, 34); ptrs = np.frombuffer(b, np.int64, S, 34 + 4 * S)\n"
      "docs = np.frombuffer(b, np.int64, D, 34 + 12 * S)\n"
      "data = np.fromfile(src + '.bin', np.uint16)\n"
      "data_offsets, dim_offsets, sizes, doc_idx = [0], [0], [], [0]\n"
      "with open(out + '.bin', 'wb') as f:\n"
      "    for j in range(D - 1):\n"
      "        for i in range(docs[j], docs[j + 1]):\n"
      "            t = data[ptrs[i] // 2: ptrs[i] // 2 + lens[i]].astype(dt)\n"
      "            n = f.write(t.tobytes())\n"
      "            data_offsets.append(data_offsets[-1] + n / dt.itemsize)\n"
      "            sizes.append(len(t)); dim_offsets.append(dim_offsets[-1] + 1)\n"
      "        doc_idx.append(len(sizes))\n"
      "with open(out + '.idx', 'wb') as f:\n"
      "    f.write(b'TNTIDX\\x00\\x00'); f.write(struct.pack('<Q', 1))\n"
      "    f.write(struct.pack('<QQ', code, dt.itemsize))\n"
      "    f.write(struct.pack('<QQ', len(data_offsets) - 1, len(sizes))); f.write(struct.pack('<Q', len(doc_idx)))\n"
      "    for a in (dim_offsets, data_offsets, sizes, doc_idx): f.write(np.array(a, dtype=np.int64).tobytes())\n";
  std::string cmd = "/usr/bin/python3 '" + script + "' '" + src + "' '" + out + "' " + np_dtype + " " +
                    std::to_string(code);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace

TEST(LegacyIndexedDataset, ReadsTntidxAndConvertsToMegatronBytes) {
  TempDir tmp;
  const std::string src = kSample + "sample_gpt2_text_document";
  write_legacy_with_numpy(src, tmp / "legacy16", "uint16", 8);
  write_legacy_with_numpy(src, tmp / "legacy32", "int32", 4);
  auto ref = IndexedDataset::open(src);
  for (const char* name : {"legacy16", "legacy32"}) {
    auto legacy = IndexedDataset::open(tmp / name);
    EXPECT_EQ(legacy->dtype(), std::string(name) == "legacy16" ? DType::UInt16 : DType::Int32);
    ASSERT_EQ(legacy->sequence_count(), ref->sequence_count());
    ASSERT_EQ(legacy->document_count(), ref->document_count());
    EXPECT_EQ(legacy->token_count(), ref->token_count());
    std::vector<int32_t> a, b;
    for (uint64_t i = 0; i < ref->sequence_count(); ++i) {
      legacy->read_sequence(i, a);
      ref->read_sequence(i, b);
      ASSERT_EQ(a, b) << name << " sequence " << i;
    }
    for (uint64_t j = 0; j <= ref->document_count(); ++j) ASSERT_EQ(legacy->document_index(j), ref->document_index(j));
  }
  // Appending the uint16 legacy dataset to an empty writer gives Megatron's own MMIDIDX files.
  {
    IndexedDatasetWriter w(tmp / "converted", DType::UInt16);
    w.append_dataset(tmp / "legacy16");
    w.finish();
  }
  EXPECT_EQ(md5_of(tmp / "converted.bin"), "cce49b969dfcde63224ce4e70ad1e549");
  EXPECT_EQ(md5_of(tmp / "converted.idx"), "a15fe6c73db68d8599c4073b5f16cac2");
}

TEST(LegacyIndexedDataset, CorruptTntidxIsAnError) {
  TempDir tmp;
  write_small(tmp / "s");
  write_legacy_with_numpy(tmp / "s", tmp / "l", "int32", 4);
  const std::string idx = read_file(tmp / "l.idx"), bin = read_file(tmp / "l.bin");
  auto open_with = [&](const std::string& i, const std::string& b) {
    write_file(tmp / "l.idx", i);
    write_file(tmp / "l.bin", b);
    return [&] { IndexedDataset::open(tmp / "l"); };
  };
  EXPECT_NO_THROW(open_with(idx, bin)());
  expect_error(open_with(idx.substr(0, idx.size() - 8), bin), {"l.idx", "TNTIDX", "expected " + std::to_string(idx.size())});
  expect_error(open_with(idx.substr(0, 40), bin), {"l.idx", "56-byte TNTIDX header"});
  expect_error(open_with(idx, bin.substr(0, 8)), {"l.bin", "size 8 bytes, expected 24"});
  std::string bad = idx;
  bad[24] = 2;  // element size 2 for int32
  expect_error(open_with(bad, bin), {"l.idx", "element size 2"});
  bad = idx;
  bad[16] = 7;  // float
  expect_error(open_with(bad, bin), {"l.idx", "floating point"});
}
