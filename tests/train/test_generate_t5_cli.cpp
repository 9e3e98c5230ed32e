// `lmforge generate` with a T5 checkpoint as users run it (issue 11's acceptance): a tiny T5 trained for a few steps
// by `lmforge train t5` on Megatron's sentence-level sample dataset, then greedy span filling of a prompt with
// sentinels. The ids equal those of the repository's PyTorch loader (tools/t5_loader.py: float64, written from the
// architecture and the documented checkpoint names, full recomputation at each step) on the same checkpoint and
// prompt; the prompt's sentinels are the loader's <extra_id_N> ids; --no-kv-cache gives the same ids.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;

const std::string kVocab = shared_path("data/vocab/bert-base-uncased-vocab.txt");
const std::string kData = shared_path("data/sample/sample_bert_text_sentence");
const std::string kTokenizer = " --tokenizer-type BertWordPieceLowerCase --vocab-file " + kVocab + " --vocab-extra-ids 100";

std::vector<int> ids_after(const std::string& text, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(label + "([ 0-9,\\-]*)"))) return {};
  std::string s = m[1].str();
  for (char& ch : s)
    if (ch == ',') ch = ' ';
  std::istringstream in(s);
  std::vector<int> v;
  for (int x; in >> x;) v.push_back(x);
  return v;
}

TEST(GenerateT5, GreedySpanFillingEqualsThePyTorchLoader) {
  TempDir dir;
  // Large initial weights (std 0.5) keep the logits far apart after a few steps, so greedy is well defined in
  // float32 and float64 alike; the loader reports the smallest top-1/top-2 gap it met.
  const std::string train =
      std::string(LMFORGE_EXE) + " train t5 --num-layers 2 --hidden-size 64 --num-attention-heads 4 " +
      "--max-position-embeddings 64 --encoder-seq-length 64 --decoder-seq-length 32 --micro-batch-size 2 " +
      "--global-batch-size 4 --lr 0.001 --train-iters 4 --init-method-std 0.5 --split 949,50,1 --log-interval 1 " +
      "--eval-interval 100 --eval-iters 0 --threads 1 --data-path " + kData + kTokenizer +
      " --data-cache-path " + dir.file("cache") + " --save " + dir.file("ckpt") + " --save-interval 4";
  const auto t = run_command("timeout 300 env OMP_NUM_THREADS=1 " + train);
  ASSERT_EQ(t.status, 0) << train << "\n" << t.output;

  const std::string prompt = "the man went to the <extra_id_0> and bought a <extra_id_1> of milk . <extra_id_2>";
  const std::string generate = std::string(LMFORGE_EXE) + " generate --load " + dir.file("ckpt") + kTokenizer +
                               " --prompt '" + prompt + "' --greedy --max-new-tokens 24 --print-ids --threads 1";
  const auto g = run_command("timeout 120 " + generate);
  ASSERT_EQ(g.status, 0) << generate << "\n" << g.output;
  std::printf("%s", g.output.c_str());
  const std::vector<int> prompt_ids = ids_after(g.output, "prompt ids:");
  const std::vector<int> ours = ids_after(g.output, "generated ids:");
  ASSERT_FALSE(prompt_ids.empty()) << g.output;
  ASSERT_FALSE(ours.empty()) << g.output;
  const auto n = run_command("timeout 120 " + generate + " --no-kv-cache");
  ASSERT_EQ(n.status, 0) << n.output;
  EXPECT_EQ(ids_after(n.output, "generated ids:"), ours);
  // On the guarded device (memory the host cannot touch outside the backend's calls): the encoder, the decoder's
  // key/value cache and the cross-attention run there, and greedy decoding picks the same ids, cached or not.
  for (const char* cache : {"", " --no-kv-cache"}) {
    const auto d = run_command("timeout 120 " + generate + " --device guarded" + cache);
    ASSERT_EQ(d.status, 0) << d.output;
    EXPECT_EQ(ids_after(d.output, "generated ids:"), ours) << "guarded" << cache;
  }

  std::string ids;
  for (int id : prompt_ids) ids += std::to_string(id) + " ";
  const std::string loader = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                             "/tools/t5_loader.py --checkpoint " + dir.file("ckpt") + " --vocab-file " + kVocab +
                             " --vocab-extra-ids 100 --max-new-tokens 24 --prompt-ids '" + ids + "'";
  const auto r = run_command("timeout 300 " + loader);
  ASSERT_EQ(r.status, 0) << loader << "\n" << r.output;
  std::printf("loader: %s", r.output.c_str());
  EXPECT_EQ(ids_after(r.output, "\"generated\": \\["), ours);
  // The prompt's three sentinels are the loader's <extra_id_0..2>, in order, and nothing else is a sentinel.
  const std::vector<int> sentinels = ids_after(r.output, "\"sentinels\": \\[");
  ASSERT_EQ(sentinels.size(), 4u) << r.output;
  std::vector<int> found;
  for (int id : prompt_ids)
    if (id >= sentinels[0]) found.push_back(id);
  EXPECT_EQ(found, std::vector<int>(sentinels.begin(), sentinels.begin() + 3));
  // Greedy ends at [EOS] or the length limit.
  const std::vector<int> eos = ids_after(r.output, "\"eos\": ");
  ASSERT_EQ(eos.size(), 1u);
  EXPECT_TRUE(ours.size() == 24u || ours.back() == eos[0]) << ours.size();
}

}  // namespace
