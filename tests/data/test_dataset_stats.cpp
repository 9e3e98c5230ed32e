// defines: tests of compute_dataset_stats() against numpy reading the same .idx
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "data/dataset_stats.h"
#include "data/indexed_dataset.h"

namespace fs = std::filesystem;
using namespace lmforge::data;

namespace {

const std::string kSample = std::string(LMFORGE_SHARED_DIR) + "/data/sample/";

// numpy's view of an .idx: S, D-1, empty documents, tokens, min, p50, p90, p99, max, mean.
std::vector<double> numpy_stats(const std::string& idx_path) {
  std::string cmd =
      "/usr/bin/python3 -c \"import numpy as np,sys\n"
      "b=open(sys.argv[1],'rb').read()\n"
      "S=int.from_bytes(b[18:26],'little');D=int.from_bytes(b[26:34],'little')\n"
      "l=np.frombuffer(b,np.int32,S,34).astype(np.int64);d=np.frombuffer(b,np.int64,D,34+12*S)\n"
      "v=[S,D-1,int((np.diff(d)==0).sum()),int(l.sum()),l.min(),np.percentile(l,50),np.percentile(l,90),"
      "np.percentile(l,99),l.max(),l.mean()]\n"
      "print(' '.join(repr(float(x)) for x in v))\" '" + idx_path + "'";
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<double> v;
  if (!p) return v;
  char buf[1024];
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  std::istringstream in(out);
  double x;
  while (in >> x) v.push_back(x);
  return v;
}

void expect_matches_numpy(const std::string& prefix) {
  auto ds = IndexedDataset::open(prefix);
  DatasetStats s = compute_dataset_stats(*ds);
  std::vector<double> ref = numpy_stats(prefix + ".idx");
  ASSERT_EQ(ref.size(), 10u) << "numpy reference failed for " << prefix;
  EXPECT_EQ(s.sequences, static_cast<uint64_t>(ref[0]));
  EXPECT_EQ(s.documents, static_cast<uint64_t>(ref[1]));
  EXPECT_EQ(s.empty_documents, static_cast<uint64_t>(ref[2]));
  EXPECT_EQ(s.tokens, static_cast<uint64_t>(ref[3]));
  EXPECT_EQ(s.sequence_lengths.min, static_cast<int64_t>(ref[4]));
  EXPECT_DOUBLE_EQ(s.sequence_lengths.p50, ref[5]);
  EXPECT_DOUBLE_EQ(s.sequence_lengths.p90, ref[6]);
  EXPECT_DOUBLE_EQ(s.sequence_lengths.p99, ref[7]);
  EXPECT_EQ(s.sequence_lengths.max, static_cast<int64_t>(ref[8]));
  EXPECT_NEAR(s.sequence_lengths.mean, ref[9], 1e-9 * ref[9]);
  EXPECT_EQ(s.bin_bytes, fs::file_size(prefix + ".bin"));
  EXPECT_EQ(s.idx_bytes, fs::file_size(prefix + ".idx"));
}

}  // namespace

TEST(DatasetStats, MegatronSamplesMatchNumpy) {
  expect_matches_numpy(kSample + "sample_gpt2_text_document");
  expect_matches_numpy(kSample + "sample_bert_text_document");
}

TEST(DatasetStats, EmptyDocumentsAndInterpolation) {
  std::string tmpl = (fs::temp_directory_path() / "lmforge-stats-XXXXXX").string();
  std::string dir = mkdtemp(tmpl.data());
  {
    IndexedDatasetWriter w(dir + "/d", DType::UInt16);
    for (int len : {5, 1, 2, 10}) {  // 4 sequences: percentiles fall between order statistics
      std::vector<int32_t> seq(static_cast<size_t>(len), 3);
      w.add_sequence(seq);
      w.end_document();
      w.end_document();  // and an empty document after each
    }
    w.finish();
  }
  expect_matches_numpy(dir + "/d");
  auto s = compute_dataset_stats(*IndexedDataset::open(dir + "/d"));
  EXPECT_EQ(s.empty_documents, 4u);
  std::string json = format_dataset_stats_json(s);
  EXPECT_NE(json.find("\"empty_documents\": 4"), std::string::npos) << json;
  EXPECT_NE(json.find("\"dtype\": \"uint16\""), std::string::npos) << json;
  fs::remove_all(dir);
}

TEST(DatasetStats, NoSequences) {
  std::string tmpl = (fs::temp_directory_path() / "lmforge-stats-XXXXXX").string();
  std::string dir = mkdtemp(tmpl.data());
  {
    IndexedDatasetWriter w(dir + "/e", DType::Int32);
    w.finish();
  }
  auto s = compute_dataset_stats(*IndexedDataset::open(dir + "/e"));
  EXPECT_EQ(s.sequences, 0u);
  EXPECT_EQ(s.documents, 0u);
  EXPECT_EQ(s.sequence_lengths.max, 0);
  fs::remove_all(dir);
}
