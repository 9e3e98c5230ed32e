// defines: tests of what a checkpoint does when things go wrong: a save that fills the disk leaves none of its
//          temporaries, non-finite weights are refused at load naming the tensor, and --load's path is read as
//          Megatron's and fairseq's users give it (save directory, iteration directory, its model.safetensors) or
//          refused saying what it is
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "util/error.h"

namespace lmforge::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string test_dir(const std::string& name) {
  const fs::path d = fs::path(LMFORGE_BINARY_DIR) / "test-data" / ("checkpoint_faults_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// Two fp32 tensors over one buffer of `n` + 8 values, with a GPT-2 config.json.
struct Weights {
  std::vector<float> values;
  std::vector<NamedTensor> table;
  explicit Weights(int64_t n) : values((size_t)n + 8) {
    for (size_t i = 0; i < values.size(); i++) values[i] = 0.001f * (float)(i % 1000);
    table.push_back(NamedTensor{"transformer.wte.weight", {n}, values.data()});
    table.push_back(NamedTensor{"transformer.ln_f.bias", {8}, values.data() + n});
  }
  SaveRequest request(int64_t iteration) const {
    SaveRequest r;
    r.model = table;
    r.config_json = R"({"model_type": "gpt2"})";
    r.state.iteration = iteration;
    return r;
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A 256 KiB tmpfs mounted over a directory (needs CAP_SYS_ADMIN; the test is skipped without it), unmounted after.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& dir) : dir_(dir) {
    mounted_ = std::system(("mount -t tmpfs -o size=256k lmforge-test " + dir + " 2>/dev/null").c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) std::system(("umount " + dir_).c_str());
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

TEST(CheckpointFaults, SaveThatFillsTheDiskRemovesItsOwnTemporariesBeforeReporting) {
  const std::string disk = test_dir("enospc");
  SmallDisk small(disk);
  if (!small.mounted()) GTEST_SKIP() << "needs CAP_SYS_ADMIN to mount a small tmpfs (mount -t tmpfs)";
  const std::string save = disk + "/ckpt";
  // 16 KB fits; 1 MB does not.
  save_checkpoint(save, Weights(4000).request(1));
  const std::string error = error_of([&] { save_checkpoint(save, Weights(250000).request(2)); });
  EXPECT_TRUE(has(error, "No space left on device")) << error;
  EXPECT_TRUE(has(error, "iter_0000002.tmp-")) << error;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(save)) left.push_back(e.path().filename().string());
  for (const std::string& name : left) EXPECT_FALSE(has(name, ".tmp-")) << name << " left behind";
  // The earlier checkpoint is still the latest, whole.
  Weights back(4000);
  EXPECT_EQ(find_latest_checkpoint(save).value_or(""), save + "/iter_0000001");
  load_checkpoint(save + "/iter_0000001", back.table);
  EXPECT_EQ(back.values, Weights(4000).values);
}

TEST(CheckpointFaults, NonFiniteWeightsAreRefusedAtLoadNamingTheTensor) {
  const std::string save = test_dir("nan");
  Weights w(100);
  w.values[100 + 3] = std::nanf("");
  const std::string dir = save_checkpoint(save, w.request(4));
  Weights back(100);
  const std::string resume = error_of([&] { load_checkpoint(dir, back.table); });
  EXPECT_TRUE(has(resume, "tensor 'transformer.ln_f.bias' holds a non-finite value")) << resume;
  EXPECT_TRUE(has(resume, "at element 3")) << resume;
  EXPECT_TRUE(has(resume, dir + "/model.safetensors")) << resume;
  const std::string weights = error_of([&] { load_weights(dir, back.table); });
  EXPECT_TRUE(has(weights, "tensor 'transformer.ln_f.bias' holds a non-finite value")) << weights;
  w.values[103] = INFINITY;
  const std::string inf = error_of([&] { load_checkpoint(save_checkpoint(save, w.request(5)), back.table); });
  EXPECT_TRUE(has(inf, "non-finite value (inf")) << inf;
}

TEST(CheckpointFaults, LoadPathIsReadAsMegatronAndFairseqUsersGiveItOrRefused) {
  const std::string base = test_dir("resume");
  const std::string save = base + "/ckpt";
  save_checkpoint(save, Weights(10).request(1));
  save_checkpoint(save, Weights(10).request(2));
  // The save directory: its pointer file's checkpoint.
  EXPECT_EQ(find_resume_checkpoint(save).dir.value_or(""), save + "/iter_0000002");
  // An iteration directory (what the log's "saved checkpoint ... to" line prints, fairseq's --restore-file), and
  // the model.safetensors inside it: that checkpoint, with a note.
  const ResumeTarget iteration = find_resume_checkpoint(save + "/iter_0000001");
  EXPECT_EQ(iteration.dir.value_or(""), save + "/iter_0000001");
  EXPECT_TRUE(has(iteration.note, "iteration directory")) << iteration.note;
  EXPECT_EQ(find_resume_checkpoint(save + "/iter_0000001/model.safetensors").dir.value_or(""), save + "/iter_0000001");
  // Nothing there, or an empty directory: a fresh start, said so.
  EXPECT_FALSE(find_resume_checkpoint(base + "/none").dir.has_value());
  fs::create_directories(base + "/empty");
  const ResumeTarget empty = find_resume_checkpoint(base + "/empty");
  EXPECT_FALSE(empty.dir.has_value());
  EXPECT_TRUE(has(empty.note, "starting from scratch")) << empty.note;
  // A weights file or a model directory: weights only, --finetune.
  fs::create_directories(base + "/hf");
  fs::copy_file(save + "/iter_0000001/model.safetensors", base + "/hf/model.safetensors");
  fs::copy_file(save + "/iter_0000001/config.json", base + "/hf/config.json");
  fs::copy_file(save + "/iter_0000001/model.safetensors", base + "/weights.safetensors");
  for (const std::string& p : {base + "/hf", base + "/hf/model.safetensors", base + "/weights.safetensors"}) {
    const std::string e = error_of([&] { find_resume_checkpoint(p); });
    EXPECT_TRUE(has(e, "nothing to resume") && has(e, "--finetune")) << p << ": " << e;
  }
  // A PyTorch checkpoint, and a save directory that lost its pointer file: refused, naming what to give.
  std::ofstream(base + "/checkpoint_last.pt") << "pickle";
  EXPECT_TRUE(has(error_of([&] { find_resume_checkpoint(base + "/checkpoint_last.pt"); }), "PyTorch checkpoint"));
  fs::remove(save + "/latest_checkpointed_iteration.txt");
  const std::string lost = error_of([&] { find_resume_checkpoint(save); });
  EXPECT_TRUE(has(lost, "no latest_checkpointed_iteration.txt") && has(lost, "--load " + save + "/iter_0000002"))
      << lost;
}

}  // namespace
}  // namespace lmforge::checkpoint
