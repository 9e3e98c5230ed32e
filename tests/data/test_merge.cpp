// defines: tests of merge_datasets() against Megatron's merge rule rebuilt here from the raw input bytes, and of the
//          directory listing and refusals
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/merge.h"
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

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "lmforge-merge-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

template <typename T>
T at(const std::string& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}
template <typename T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Megatron's merged .idx, built straight from the input .idx bytes (no use of our reader or writer): header of the
// first input with summed counts, lengths concatenated, pointers recomputed, document indices appended without
// their leading 0 and shifted by the sequences before them.
std::string expected_merged_idx(const std::vector<std::string>& prefixes) {
  std::string lengths, doc_idx;
  put<int64_t>(doc_idx, 0);
  uint64_t S = 0, D = 1;
  uint8_t dtype = 0;
  for (auto& p : prefixes) {
    std::string idx = read_file(p + ".idx");
    uint64_t s = at<uint64_t>(idx, 18), d = at<uint64_t>(idx, 26);
    dtype = static_cast<uint8_t>(idx[17]);
    lengths.append(idx, 34, 4 * s);
    for (uint64_t j = 1; j < d; ++j) put<int64_t>(doc_idx, at<int64_t>(idx, 34 + 12 * s + 8 * j) + static_cast<int64_t>(S));
    S += s;
    D += d - 1;
  }
  const int64_t item = dtype == 8 ? 2 : dtype == 4 ? 4 : 0;
  std::string out("MMIDIDX\0\0", 9);
  put<uint64_t>(out, 1);
  put<uint8_t>(out, dtype);
  put<uint64_t>(out, S);
  put<uint64_t>(out, D);
  out += lengths;
  int64_t ptr = 0;
  for (uint64_t i = 0; i < S; ++i) {
    put<int64_t>(out, ptr);
    ptr += at<int32_t>(lengths, 4 * i) * item;
  }
  return out + doc_idx;
}

void write_dataset(const std::string& prefix, DType dtype, const std::vector<std::vector<std::vector<int32_t>>>& docs) {
  IndexedDatasetWriter w(prefix, dtype);
  for (auto& doc : docs) {
    for (auto& seq : doc) w.add_sequence(seq);
    w.end_document();
  }
  w.finish();
}

}  // namespace

TEST(Merge, TwoMegatronDatasetsFollowMegatronsRule) {
  TempDir tmp;
  std::vector<std::string> in = {kSample + "sample_gpt2_text_document", kSample + "sample_bert_text_document"};
  MergeSummary s = merge_datasets(in, tmp / "merged");
  EXPECT_TRUE(read_file(tmp / "merged.bin") == read_file(in[0] + ".bin") + read_file(in[1] + ".bin"));
  EXPECT_TRUE(read_file(tmp / "merged.idx") == expected_merged_idx(in));
  EXPECT_EQ(s.documents, 2 * 9887u);
  EXPECT_EQ(s.sequences, 2 * 9887u);
  EXPECT_EQ(s.tokens, 1142821u + 854796u);
  EXPECT_EQ(s.bin_bytes, fs::file_size(tmp / "merged.bin"));
  EXPECT_EQ(s.idx_bytes, fs::file_size(tmp / "merged.idx"));
  EXPECT_EQ(s.dtype, DType::UInt16);
  auto merged = IndexedDataset::open(tmp / "merged");
  EXPECT_EQ(merged->token_count(), s.tokens);
}

TEST(Merge, EmptyDocumentsAndEmptyDatasetsKeepTheirPlace) {
  TempDir tmp;
  fs::create_directory(tmp / "in");
  // Names chosen so that sorted order differs from creation order.
  write_dataset(tmp / "in/b", DType::UInt16, {{{1, 2}}, {}, {{3}, {4, 5}}});
  write_dataset(tmp / "in/a", DType::UInt16, {{}, {{6}}});
  write_dataset(tmp / "in/c", DType::UInt16, {});
  write_dataset(tmp / "in/d", DType::UInt16, {{{7, 8, 9}}, {}});
  std::ofstream(tmp / "in/README.md") << "not a dataset\n";

  auto prefixes = dataset_prefixes_in_directory(tmp / "in");
  EXPECT_EQ(prefixes, (std::vector<std::string>{tmp / "in/a", tmp / "in/b", tmp / "in/c", tmp / "in/d"}));
  MergeSummary s = merge_datasets(prefixes, tmp / "out");
  EXPECT_EQ(s.empty_documents, 3u);
  EXPECT_EQ(s.documents, 7u);
  EXPECT_TRUE(read_file(tmp / "out.idx") == expected_merged_idx(prefixes));
  std::string cat;
  for (auto& p : prefixes) cat += read_file(p + ".bin");
  EXPECT_TRUE(read_file(tmp / "out.bin") == cat);
  auto m = IndexedDataset::open(tmp / "out");
  std::vector<int64_t> doc_idx;
  for (uint64_t j = 0; j <= m->document_count(); ++j) doc_idx.push_back(m->document_index(j));
  EXPECT_EQ(doc_idx, (std::vector<int64_t>{0, 0, 1, 2, 2, 4, 5, 5}));
}

TEST(Merge, CommandLineOrderIsKept) {
  TempDir tmp;
  write_dataset(tmp / "x", DType::Int32, {{{70000}}});
  write_dataset(tmp / "y", DType::Int32, {{{1}, {2}}});
  merge_datasets({tmp / "y", tmp / "x"}, tmp / "yx");
  EXPECT_TRUE(read_file(tmp / "yx.bin") == read_file(tmp / "y.bin") + read_file(tmp / "x.bin"));
  EXPECT_TRUE(read_file(tmp / "yx.idx") == expected_merged_idx({tmp / "y", tmp / "x"}));
}

TEST(Merge, MismatchedDtypeIsRefusedNamingBothFiles) {
  TempDir tmp;
  write_dataset(tmp / "narrow", DType::UInt16, {{{1}}});
  write_dataset(tmp / "wide", DType::Int32, {{{1}}});
  try {
    merge_datasets({tmp / "narrow", tmp / "wide"}, tmp / "out");
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(tmp / "narrow.idx"), std::string::npos) << m;
    EXPECT_NE(m.find(tmp / "wide.idx"), std::string::npos) << m;
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
    EXPECT_NE(m.find("uint16"), std::string::npos) << m;
  }
  // Nothing written, not even temporaries.
  EXPECT_FALSE(fs::exists(tmp / "out.bin"));
  for (auto& e : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(e.path().filename().string().find("out"), std::string::npos) << e.path();
}

TEST(Merge, CorruptInputIsRefusedBeforeWriting) {
  TempDir tmp;
  write_dataset(tmp / "good", DType::UInt16, {{{1, 2}}});
  write_dataset(tmp / "bad", DType::UInt16, {{{1, 2}}});
  fs::resize_file(tmp / "bad.bin", 2);
  try {
    merge_datasets({tmp / "good", tmp / "bad"}, tmp / "out");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(tmp / "bad.bin"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp / "out.bin"));
}

TEST(Merge, OutputMayNotBeAnInput) {
  TempDir tmp;
  write_dataset(tmp / "a", DType::UInt16, {{{1}}});
  EXPECT_THROW(merge_datasets({tmp / "a"}, tmp / "a"), Error);
  EXPECT_EQ(IndexedDataset::open(tmp / "a")->token_count(), 1u);
}

TEST(Merge, DirectoryErrors) {
  TempDir tmp;
  EXPECT_THROW(dataset_prefixes_in_directory(tmp.path()), Error);           // no pairs
  EXPECT_THROW(dataset_prefixes_in_directory(tmp / "missing"), Error);      // no directory
  std::ofstream(tmp / "lonely.bin") << "";
  try {
    dataset_prefixes_in_directory(tmp.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lonely.bin"), std::string::npos) << e.what();
  }
}
