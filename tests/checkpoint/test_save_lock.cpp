// defines: tests of the --save directory lock: a second run's lock on the same directory fails naming the first
//          one's host and pid, and a save whose run lost the lock publishes nothing (no iteration directory, no
//          pointer) while the run that took the directory over saves normally
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;
using namespace lmforge::checkpoint;

const std::string kConfig = R"({"model_type": "gpt2", "n_layer": 1})";

TEST(SaveLock, SecondRunOnTheSameSaveDirectoryFailsNamingTheFirst) {
  TempDir dir;
  const std::string save = dir.file("ckpt");
  auto first = lock_save_dir(save);
  try {
    lock_save_dir(save);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("checkpoint directory (--save) " + save + " is locked by another lmforge process: host " +
                        lmforge::data::host_name() + " pid " + std::to_string(::getpid())),
              std::string::npos)
        << text;
  }
  first.reset();  // released at the end of the run: the next run starts at once
  EXPECT_NE(lock_save_dir(save), nullptr);
}

TEST(SaveLock, SaveOfARunThatLostTheLockPublishesNothing) {
  TempDir dir;
  const std::string save = dir.file("ckpt");
  auto lock = lock_save_dir(save);
  std::vector<float> w{1, 2, 3, 4};
  std::vector<NamedTensor> model{NamedTensor("w", {2, 2}, w.data())};
  SaveRequest r;
  r.model = model;
  r.config_json = kConfig;
  r.state.iteration = 1;
  r.lock = lock.get();
  save_checkpoint(save, r);  // held: saved
  EXPECT_TRUE(std::filesystem::exists(save + "/iter_0000001/model.safetensors"));
  // Another machine took the directory over while this run was stopped past the lease.
  write_file(dir.file(".ckpt.lock.1"), "otherhost 9 0123456789abcdef\n");
  r.state.iteration = 2;
  try {
    save_checkpoint(save, r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lost its lock to host otherhost pid 9"), std::string::npos) << e.what();
  }
  for (const auto& e : std::filesystem::directory_iterator(save))
    EXPECT_EQ(e.path().filename().string().find("iter_0000002"), std::string::npos) << e.path();
  EXPECT_EQ(lmforge::testing::read_file(save + "/latest_checkpointed_iteration.txt"), "1");
}

}  // namespace
