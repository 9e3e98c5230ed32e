// defines: tests of the GPT training loop on Megatron's own sample dataset: resume identity (6 iterations vs 3 + save +
// load + 3), falling loss, evaluation and test losses, TensorBoard scalars, --finetune from a Hugging Face-layout
// file, the vocabulary check, and a checkpoint's loss recomputed by an independent PyTorch model
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "data/indexed_dataset.h"
#include "data/token_scan.h"
#include "test_util.h"
#include "train/trainer.h"
#include "trainer_test_util.h"
#include "util/error.h"

namespace {

using namespace trainer_tests;

// Dropout (0.1 here, Megatron's default) acts in training steps only: evaluation of the same weights gives the
// same loss with and without it, while a training step's loss differs.
TEST(Trainer, DropoutActsInTrainingNotInEvaluation) {
  TempDir tmp;
  std::ostringstream log_a, log_b;
  TrainOptions with = tiny_options(tmp);
  ASSERT_EQ(with.hidden_dropout, 0.1);
  ASSERT_EQ(with.attention_dropout, 0.1);
  TrainOptions without = tiny_options(tmp);
  without.hidden_dropout = without.attention_dropout = 0.0;
  without.schedule.train_iters = with.schedule.train_iters = 2;
  Trainer a(with, log_a), b(without, log_b);
  EXPECT_EQ(a.evaluate(1, 0), b.evaluate(1, 0));
  a.run();
  b.run();
  ASSERT_EQ(a.history().size(), 2u);
  EXPECT_NE(a.history()[0].loss, b.history()[0].loss);
}

// Stopped at iteration 3, saved, resumed: the same log lines and bit-identical weights (with dropout 0.1, AdamW).
TEST(Trainer, ResumedRunIsBitIdenticalToUninterruptedRun) {
  TempDir tmp;
  const std::vector<lmforge::train::IterationRecord> h = expect_resume_bit_identical(tiny_options(tmp));
  ASSERT_EQ(h.size(), 6u);
  // The learning rate of step 1 is 0 (warm-up, Megatron's convention), then the peak.
  EXPECT_EQ(h[0].lr, 0.0);
  EXPECT_DOUBLE_EQ(h[1].lr, 3e-3);
}

TEST(Trainer, LossFallsAndEvaluationsAreFiniteAndLogged) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp);
  o.schedule.train_iters = 30;
  o.schedule.lr = 1e-2;
  o.schedule.min_lr = 1e-3;
  o.eval_interval = 10;
  o.eval_iters = 2;
  o.log_interval = 5;
  o.tensorboard_dir = tmp.file("tb");
  std::ostringstream log;
  Trainer t(o, log);
  t.run();
  const auto& h = t.history();
  ASSERT_EQ(h.size(), 30u);
  // A fresh model predicts nearly uniformly over the padded vocabulary: loss ≈ ln(50304).
  EXPECT_NEAR(h[0].loss, std::log(50304.0), 0.05);
  double last = 0.0;
  for (size_t i = 25; i < 30; i++) last += h[i].loss / 5.0;
  EXPECT_LT(last, h[0].loss - 2.0) << log.str();
  // Validation at 10, 20, 30, and at the end; test at the end.
  const auto& ev = t.evaluations();
  ASSERT_EQ(ev.size(), 5u) << log.str();
  for (const auto& e : ev) {
    EXPECT_TRUE(std::isfinite(e.loss));
    EXPECT_DOUBLE_EQ(e.ppl, std::exp(std::min(20.0, e.loss)));
    EXPECT_LT(e.loss, h[0].loss);
  }
  EXPECT_EQ(ev[4].name, "test");
  const std::string text = log.str();
  EXPECT_NE(text.find(" iteration       30/      30 | consumed samples:          120 |"), std::string::npos) << text;
  EXPECT_NE(text.find("validation loss at iteration 10 | lm loss value: "), std::string::npos) << text;
  EXPECT_NE(text.find("validation loss at the end of training for test data | lm loss value: "), std::string::npos);
  // TensorBoard: one event file holding the scalar tags.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(tmp.file("tb"))) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string().rfind("events.out.tfevents.", 0), 0u);
  const std::string events = lmforge::testing::read_file(files[0].string());
  for (const char* tag : {"lm loss", "learning-rate", "grad-norm", "throughput (tokens/s)", "lm loss validation",
                          "lm loss validation ppl", "lm loss test"})
    EXPECT_NE(events.find(tag), std::string::npos) << tag;
}

TEST(Trainer, DatasetWithIdsOutsideTheVocabularyFailsBeforeAnyWork) {
  TempDir tmp;
  {
    lmforge::data::IndexedDatasetWriter w(tmp.file("big_ids"), lmforge::data::DType::Int32);
    std::vector<int32_t> ids = {1, 2, 3, 60000, 4, 5};
    w.add_sequence(ids);
    w.end_document();
    w.finish();
  }
  TrainOptions o = tiny_options(tmp);
  o.data_path = {tmp.file("big_ids")};
  std::ostringstream log;
  try {
    Trainer t(o, log);
    FAIL() << "expected an Error";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 60000, outside the vocabulary of 50257"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.file("cache"))) << "indices were built before the check";
  EXPECT_EQ(lmforge::data::max_token_id(kData), 50256);
}

TEST(Trainer, FinetuneStartsFromHuggingFaceLayoutWeights) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp);
  o.schedule.train_iters = 2;
  o.eval_iters = 0;
  std::ostringstream log;
  // A "Hugging Face" file: the model's tensors with the unpadded 50257-row wte, no "transformer." prefix and a
  // duplicate lm_head.weight, as hub files are.
  std::vector<float> wte_rows;
  {
    lmforge::model::GPTConfig c;
    c.num_layers = 2, c.hidden = 32, c.heads = 2, c.seq_length = 32, c.max_positions = 48, c.vocab_size = 50257;
    c.make_vocab_size_divisible_by = 1;
    lmforge::model::GPT source(c, lmforge::kernels::cpu_backend());
    source.init_weights(99);
    std::vector<lmforge::checkpoint::TensorRef> refs;
    for (const auto& t : source.tensors())
      refs.push_back({t.name.substr(std::strlen("transformer.")), lmforge::checkpoint::DType::kF32, t.shape,
                      source.params() + t.offset});
    const auto& wte = source.tensor("transformer.wte.weight");
    refs.push_back({"lm_head.weight", lmforge::checkpoint::DType::kF32, wte.shape, source.params() + wte.offset});
    lmforge::checkpoint::write_safetensors(tmp.file("hf.safetensors"), refs);
    wte_rows.assign(source.params() + wte.offset, source.params() + wte.offset + wte.numel);
  }
  o.load = tmp.file("hf.safetensors");
  o.finetune = true;
  Trainer t(o, log);
  EXPECT_EQ(t.iteration(), 0);
  const float* wte = t.gpt().param("transformer.wte.weight");
  EXPECT_EQ(std::memcmp(wte, wte_rows.data(), wte_rows.size() * sizeof(float)), 0);
  for (size_t i = wte_rows.size(); i < (size_t)50304 * 32; i++) ASSERT_EQ(wte[i], 0.0f) << i;
  t.run();
  EXPECT_EQ(t.history().size(), 2u);
  EXPECT_EQ(t.history()[0].lr, 0.0);  // a fresh schedule: warm-up from 0
}

TEST(Trainer, ChangedScheduleOrSeedOnResumeIsAnError) {
  TempDir tmp;
  TrainOptions o = saved_after_two_iterations(tmp);
  std::ostringstream log;
  TrainOptions other_lr = o;
  other_lr.schedule.lr = 1e-4;
  EXPECT_THROW({ Trainer bad(other_lr, log); }, lmforge::Error);
  TrainOptions other_seed = o;
  other_seed.seed = 7;
  EXPECT_THROW({ Trainer bad(other_seed, log); }, lmforge::Error);
}

// Extending a run: a larger --train-iters changes the decay, which a plain --load refuses with the two flags that
// resolve it; either flag then trains on; --no-load-optim resumes the iteration with a fresh optimizer.
TEST(Trainer, ResumeFlagsExtendOrAdjustARun) {
  TempDir tmp;
  const TrainOptions o = saved_after_two_iterations(tmp);
  std::ostringstream log;
  TrainOptions longer = o;
  longer.save.clear();
  longer.schedule.train_iters = 4;
  try {
    Trainer refused(longer, log);
    ADD_FAILURE() << "a changed decay was accepted without a flag";
  } catch (const lmforge::Error& e) {
    for (const char* needle : {"decay", "--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler"})
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  std::vector<double> lr3;
  for (int mode = 0; mode < 2; mode++) {
    TrainOptions x = longer;
    (mode == 0 ? x.override_opt_param_scheduler : x.use_checkpoint_opt_param_scheduler) = true;
    Trainer t(x, log);
    EXPECT_EQ(t.iteration(), 2);
    t.run();
    EXPECT_EQ(t.iteration(), 4);
    lr3.push_back(t.history().at(0).lr);
  }
  EXPECT_NE(lr3[0], lr3[1]) << "this run's decay (4 iterations) and the checkpoint's (2) give other rates";
  TrainOptions fresh = longer;
  fresh.no_load_optim = true;
  std::ostringstream fresh_log;
  Trainer f(fresh, fresh_log);
  EXPECT_EQ(f.iteration(), 2);
  EXPECT_NE(fresh_log.str().find("--no-load-optim"), std::string::npos) << fresh_log.str();
  TrainOptions both = longer;
  both.override_opt_param_scheduler = both.use_checkpoint_opt_param_scheduler = true;
  EXPECT_THROW(Trainer bad(both, log), lmforge::Error);
}

// An absurd --seq-length is an error saying how much memory it would take (before: std::bad_alloc, reported as an
// internal error, from the first forward pass).
TEST(Trainer, RunThatCannotFitInMemoryIsAnErrorSayingHowMuch) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp);
  o.seq_length = o.max_position_embeddings = 200000;
  std::ostringstream log;
  try {
    Trainer t(o, log);
    ADD_FAILURE() << "a 200000-token sequence was accepted";
  } catch (const lmforge::Error& e) {
    for (const char* needle : {"needs at least", "GB per rank", "--seq-length", "the machine has"})
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// An unusable --save (here: a path under a regular file) fails when the trainer is built, before any iteration —
// not at the first save, after the training it would have lost.
TEST(Trainer, UnusableSaveDirectoryFailsBeforeTraining) {
  TempDir tmp;
  lmforge::testing::write_file(tmp.file("a-file"), "x");
  TrainOptions o = tiny_options(tmp);
  o.save = tmp.file("a-file/ckpt");
  std::ostringstream log;
  try {
    Trainer t(o, log);
    ADD_FAILURE() << "a --save under a regular file was accepted";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find(o.save), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--save"), std::string::npos) << e.what();
  }
  EXPECT_EQ(log.str().find(" iteration "), std::string::npos) << log.str();
  // A usable one is created up front and left empty until the first save.
  o.save = tmp.file("new/dir/ckpt");
  Trainer ok(o, log);
  EXPECT_TRUE(fs::is_directory(o.save));
  EXPECT_TRUE(fs::is_empty(o.save));
}

// A shape-defining flag that differs from the checkpoint's is an error naming the flag, both values and --finetune —
// also --num-attention-heads, which leaves every tensor's shape unchanged (before: accepted, trained and re-saved
// as another model).
TEST(Trainer, ResumingWithAnotherModelShapeIsAnErrorNamingTheFlag) {
  TempDir tmp;
  TrainOptions o = saved_after_two_iterations(tmp);
  std::ostringstream log;
  TrainOptions heads = o;
  heads.num_attention_heads = 4;
  TrainOptions positions = o;
  positions.max_position_embeddings = 64;
  for (const auto& [changed, flag] : {std::pair{heads, std::string("--num-attention-heads 2, this run asks for 4")},
                                      std::pair{positions, std::string("--max-position-embeddings 48, this run asks for 64")}}) {
    try {
      Trainer bad(changed, log);
      ADD_FAILURE() << "resumed with " << flag;
    } catch (const lmforge::Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--finetune"), std::string::npos) << e.what();
    }
  }
  TrainOptions same = o;
  Trainer fine(same, log);  // the same flags still resume
  EXPECT_EQ(fine.iteration(), 2);
}

// The checkpoint's model.safetensors + config.json, read by an independent float64 PyTorch GPT-2
// (tests/model/gpt2_reference.py's model), gives the loss lmforge computes on the same batch.
TEST(Trainer, CheckpointLossMatchesPyTorchReference) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp);
  o.schedule.train_iters = 3;
  o.eval_iters = 0;
  o.save = tmp.file("ckpt");
  std::ostringstream log;
  Trainer t(o, log);
  t.run();
  // A batch of real tokens: the first 2 sequences of 33 tokens of the dataset's token stream.
  const auto ds = lmforge::data::IndexedDataset::open(kData);
  std::vector<int32_t> stream, seq;
  for (uint64_t i = 0; stream.size() < 2 * 33; i++) {
    ds->read_sequence(i, seq);
    stream.insert(stream.end(), seq.begin(), seq.end());
  }
  std::vector<int32_t> tokens, targets;
  for (int b = 0; b < 2; b++) {
    tokens.insert(tokens.end(), stream.begin() + b * 33, stream.begin() + b * 33 + 32);
    targets.insert(targets.end(), stream.begin() + b * 33 + 1, stream.begin() + b * 33 + 33);
  }
  const float ours = t.gpt().forward(tokens.data(), targets.data(), 2, 32);
  {
    std::ofstream f(tmp.file("batch.bin"), std::ios::binary);
    f.write((const char*)tokens.data(), tokens.size() * 4);
    f.write((const char*)targets.data(), targets.size() * 4);
  }
  const std::string script = std::string(LMFORGE_SOURCE_DIR) + "/tests/train/checkpoint_loss_reference.py";
  const auto r = lmforge::testing::run_command("/usr/bin/python3 " + script + " " + tmp.file("ckpt/iter_0000003") +
                                               " " + tmp.file("batch.bin") + " 2 32");
  ASSERT_EQ(r.status, 0) << r.output;
  const double reference = std::stod(r.output);
  EXPECT_NEAR(ours, reference, 1e-5 * reference) << "ours " << ours << " reference " << reference;
  // And the saved weights are the trained ones, not the initial ones.
  lmforge::model::GPT fresh(t.gpt().config(), lmforge::kernels::cpu_backend());
  fresh.init_weights(o.seed);
  EXPECT_GT(std::fabs(fresh.forward(tokens.data(), targets.data(), 2, 32) - ours), 1e-3);
}

}  // namespace

// TrainOptions::device (--device) picks the backend once: the model is built on it and the log names it. Only the
// construction runs here: a training step on the guarded device needs the optimizer and the collectives to work on
// device buffers rather than host pointers.
TEST(Trainer, DeviceOptionBuildsTheModelOnItsBackend) {
  for (const lmforge::kernels::Device device : {lmforge::kernels::Device::CPU, lmforge::kernels::Device::GUARDED}) {
    TempDir tmp;
    TrainOptions o = tiny_options(tmp);
    o.device = device;
    std::ostringstream log;
    Trainer t(o, log);
    EXPECT_EQ(&t.gpt().backend(), &lmforge::kernels::backend_for(device));
    EXPECT_EQ(t.gpt().backend().device(), device);
    const std::string line = std::string("backend: ") + lmforge::kernels::backend_for(device).info();
    EXPECT_NE(log.str().find(line), std::string::npos) << log.str();
  }
}
