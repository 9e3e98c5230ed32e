// defines: tests of checkpoint save/load (round trip, resume, corruption errors) and HF weight import, checked by checkpoint_reference.py
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "optim/adamw.h"
#include "optim/lamb.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "util/error.h"

namespace lmforge::checkpoint {
namespace {

namespace fs = std::filesystem;

const std::string kScript = std::string(LMFORGE_SOURCE_DIR) + "/tests/checkpoint/checkpoint_reference.py";

std::string test_dir(const std::string& name) {
  const fs::path d = fs::path(LMFORGE_BINARY_DIR) / "test-data" / ("checkpoint_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A GPT-2-shaped parameter table over one flat buffer (HF names and layouts), as the model module builds it.
struct TinyGpt {
  static constexpr int64_t V = 11, T = 8, C = 4, L = 2;
  std::vector<float> params, grads;
  std::vector<NamedTensor> table;
  std::vector<optim::ParamSpan> spans;

  explicit TinyGpt(int64_t vocab_rows = V) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"transformer.wte.weight", {vocab_rows, C}},
                                                                        {"transformer.wpe.weight", {T, C}}};
    for (int i = 0; i < L; ++i) {
      const std::string h = "transformer.h." + std::to_string(i) + ".";
      for (const auto& [n, s] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
               {"ln_1.weight", {C}}, {"ln_1.bias", {C}}, {"attn.c_attn.weight", {C, 3 * C}},
               {"attn.c_attn.bias", {3 * C}}, {"attn.c_proj.weight", {C, C}}, {"attn.c_proj.bias", {C}},
               {"ln_2.weight", {C}}, {"ln_2.bias", {C}}, {"mlp.c_fc.weight", {C, 4 * C}}, {"mlp.c_fc.bias", {4 * C}},
               {"mlp.c_proj.weight", {4 * C, C}}, {"mlp.c_proj.bias", {C}}})
        shapes.push_back({h + n, s});
    }
    shapes.push_back({"transformer.ln_f.weight", {C}});
    shapes.push_back({"transformer.ln_f.bias", {C}});
    size_t total = 0;
    for (const auto& [n, s] : shapes) {
      size_t k = 1;
      for (const int64_t d : s) k *= static_cast<size_t>(d);
      total += k;
    }
    params.assign(total, 0.0f);
    grads.assign(total, 0.0f);
    size_t off = 0;
    for (const auto& [n, s] : shapes) {
      table.push_back(NamedTensor{n, s, params.data() + off});
      spans.push_back(optim::ParamSpan{n, params.data() + off, grads.data() + off, table.back().numel(), s.size() == 2});
      off += table.back().numel();
    }
  }
  void randomize(std::vector<float>& v, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 0.5f);
    for (float& x : v) x = d(rng);
  }
};

optim::LrScheduleArgs schedule_args() {
  optim::LrScheduleArgs a;
  a.lr = 6e-4;
  a.min_lr = 6e-5;
  a.lr_decay_style = "cosine";
  a.train_iters = 20;
  a.lr_warmup_iters = 2;
  a.global_batch_size = 8;
  a.weight_decay = 0.1;
  return a;
}

struct TrainingRun {
  TinyGpt model;
  optim::AdamW adam{model.spans, optim::AdamWConfig{0.9, 0.95, 1e-8}};
  optim::OptimizerParamScheduler sched{schedule_args()};
  int64_t iteration = 0;

  void train(int steps) {
    for (int s = 0; s < steps; ++s) {
      model.randomize(model.grads, 100 + static_cast<unsigned>(iteration));
      optim::clip_grad_norm(model.spans, 1.0);
      adam.step(sched.lr(), sched.weight_decay());
      sched.step(8);
      ++iteration;
    }
  }
  SaveRequest request(const std::string& config) const {
    TrainerState st;
    st.iteration = iteration;
    st.consumed_train_samples = iteration * 8;
    st.consumed_valid_samples = 16;
    st.scheduler = sched.state();
    st.rng = {{"data", "mt19937:5489:17"}, {"dropout", "line\nbreak \"q\""}};
    st.args = {{"seq_length", int64_t{8}}, {"lr", 6e-4}, {"lr_decay_style", std::string("cosine")},
               {"use_flash", false}, {"split", RawJson{"[969,30,1]"}}};
    SaveRequest r;
    r.model = model.table;
    r.config_json = config;
    r.optimizer = &adam;
    r.state = st;
    return r;
  }
};

const std::string kConfig =
    R"({"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 4, "n_positions": 8, "vocab_size": 11,)"
    R"( "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"})";

TEST(Checkpoint, SaveLoadRoundTripResumesBitExactly) {
  const std::string save = test_dir("roundtrip");
  TrainingRun a;
  a.model.randomize(a.model.params, 1);
  a.train(3);
  const std::string dir = save_checkpoint(save, a.request(kConfig));
  EXPECT_EQ(dir, save + "/iter_0000003");
  EXPECT_EQ(read_file(save + "/latest_checkpointed_iteration.txt"), "3");
  for (const char* f : {"model.safetensors", "config.json", "optimizer.safetensors", "trainer_state.json"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  for (const auto& e : fs::directory_iterator(save))  // no temporary left behind
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();

  TrainingRun b;
  const auto latest = find_latest_checkpoint(save);
  ASSERT_TRUE(latest.has_value());
  const LoadedCheckpoint got = load_checkpoint(*latest, b.model.table, &b.adam);
  EXPECT_TRUE(got.has_optimizer);
  EXPECT_EQ(got.config_json, kConfig);
  EXPECT_EQ(b.model.params, a.model.params);
  EXPECT_EQ(b.adam.steps(), 3);
  EXPECT_EQ(a.adam.exp_avg(), b.adam.exp_avg());  // host copies of the device state
  EXPECT_EQ(a.adam.exp_avg_sq(), b.adam.exp_avg_sq());  // host copies of the device state
  const TrainerState want = a.request(kConfig).state;
  EXPECT_EQ(got.state.iteration, 3);
  EXPECT_EQ(got.state.consumed_train_samples, 24);
  EXPECT_EQ(got.state.consumed_valid_samples, 16);
  EXPECT_EQ(got.state.rng, want.rng);
  EXPECT_EQ(got.state.args, want.args);
  EXPECT_EQ(got.state.scheduler.num_steps, 24);
  EXPECT_EQ(got.state.scheduler.max_lr, 6e-4);
  EXPECT_EQ(got.state.scheduler.lr_decay_style, "cosine");
  b.sched.load_state(got.state.scheduler);
  b.iteration = got.state.iteration;
  // Resuming continues exactly as the uninterrupted run.
  a.train(2);
  b.train(2);
  EXPECT_EQ(b.model.params, a.model.params);

  // Re-saving the same iteration replaces it; a later one moves the pointer.
  save_checkpoint(save, b.request(kConfig));
  EXPECT_EQ(read_file(save + "/latest_checkpointed_iteration.txt"), "5");
  EXPECT_TRUE(fs::exists(save + "/iter_0000003/model.safetensors"));
  b.iteration = 3;  // same directory name again, different contents
  save_checkpoint(save, b.request(kConfig));
  EXPECT_EQ(read_file(save + "/latest_checkpointed_iteration.txt"), "3");
  for (const auto& e : fs::directory_iterator(save)) {
    const std::string n = e.path().filename().string();
    EXPECT_TRUE(n == "iter_0000003" || n == "iter_0000005" || n == "latest_checkpointed_iteration.txt") << n;
  }
}

// Tensors handed over one at a time (produce on save, consume on load: what a tensor-parallel rank does) give the
// same files, byte for byte, as tensors in memory, and load the same values; a non-writing rank runs every
// producer, in the writer's order, and writes nothing.
TEST(Checkpoint, TensorByTensorCallbacksWriteAndReadTheSameFiles) {
  const std::string whole_save = test_dir("whole"), streamed_save = test_dir("streamed");
  TrainingRun a;
  a.model.randomize(a.model.params, 7);
  a.train(2);
  save_checkpoint(whole_save, a.request(kConfig));

  auto produced = [](const NamedTensor& t, std::vector<std::string>& calls) {
    NamedTensor p(t.name, t.shape);
    p.produce = [t, &calls](float* whole) {
      calls.push_back(t.name);
      if (t.produce) t.produce(whole);  // the optimizer's state: device memory, produced through its Backend
      else if (whole != nullptr) std::copy(t.data, t.data + t.numel(), whole);
    };
    return p;
  };
  std::vector<std::string> writer_calls, other_calls;
  std::vector<NamedTensor> model;
  for (const NamedTensor& t : a.model.table) model.push_back(produced(t, writer_calls));
  OptimizerCheckpoint adam_state = optimizer_checkpoint(a.adam, a.model.table);
  OptimizerCheckpoint streamed_state = adam_state;
  streamed_state.tensors.clear();
  for (const NamedTensor& t : adam_state.tensors) streamed_state.tensors.push_back(produced(t, writer_calls));
  SaveRequest r = a.request(kConfig);
  r.model = model;
  r.optimizer = nullptr;
  r.optimizer_state = &streamed_state;
  const std::string dir = save_checkpoint(streamed_save, r);
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "config.json", "trainer_state.json"})
    EXPECT_EQ(read_file(dir + "/" + file), read_file(whole_save + "/iter_0000002/" + file)) << file;

  // Another rank of the gathering group: the same producer calls, nullptr buffers, no files.
  const std::string other_save = test_dir("other");
  std::vector<NamedTensor> other_model;
  for (const NamedTensor& t : a.model.table) other_model.push_back(produced(t, other_calls));
  OptimizerCheckpoint other_state = adam_state;
  other_state.tensors.clear();
  for (const NamedTensor& t : adam_state.tensors) other_state.tensors.push_back(produced(t, other_calls));
  r.model = other_model;
  r.optimizer_state = &other_state;
  r.writer = false;
  save_checkpoint(other_save, r);
  EXPECT_EQ(other_calls, writer_calls);
  EXPECT_TRUE(fs::is_empty(other_save));

  // Load through consumers into a fresh model and optimizer.
  TrainingRun b;
  std::vector<NamedTensor> sinks;
  for (const NamedTensor& t : b.model.table) {
    NamedTensor c(t.name, t.shape);
    c.consume = [t](const float* whole) { std::copy(whole, whole + t.numel(), t.data); };
    sinks.push_back(c);
  }
  OptimizerCheckpoint b_state = optimizer_checkpoint(b.adam, b.model.table);
  for (const NamedTensor& t : b_state.tensors) ASSERT_TRUE(t.consume && t.data == nullptr) << t.name;
  load_checkpoint_tensors(dir, sinks, &b_state);
  EXPECT_EQ(b.model.params, a.model.params);
  EXPECT_EQ(b_state.step, 2);
  for (size_t k = 0; k < a.adam.state_names().size(); ++k)
    EXPECT_EQ(a.adam.state_values(k), b.adam.state_values(k));
}

// The pid of a process that has exited (and been reaped): a dead saver.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

std::string host() {
  char h[256] = "localhost";
  ::gethostname(h, sizeof h - 1);
  return h;
}

// A re-save of iteration 1 killed after moving the old directory aside and before renaming the new one in leaves
// the pointer naming a missing directory; the next load puts the old whole back, and the dead run's temporaries go.
TEST(Checkpoint, SaveKilledBetweenItsRenamesIsRecoveredByTheNextLoad) {
  const std::string save = test_dir("killed");
  TrainingRun a;
  a.model.randomize(a.model.params, 3);
  a.train(1);
  const std::string dir = save_checkpoint(save, a.request(kConfig));
  const std::string saved_model = read_file(dir + "/model.safetensors");
  const std::string run = host() + "-" + std::to_string(dead_pid());
  fs::rename(dir, dir + ".old-" + run);                       // the killed save's first rename
  fs::create_directory(dir + ".tmp-" + run);                  // and its new, complete or not, directory
  std::ofstream(dir + ".tmp-" + run + "/model.safetensors") << "partial";
  fs::create_directory(save + "/iter_0000009.tmp-" + run);    // an older failed save filling the disk
  const std::optional<std::string> latest = find_latest_checkpoint(save);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(*latest, dir);
  EXPECT_EQ(read_file(dir + "/model.safetensors"), saved_model);
  for (const auto& e : fs::directory_iterator(save)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    EXPECT_EQ(e.path().filename().string().find(".old-"), std::string::npos) << e.path();
  }
  TrainingRun b;
  load_checkpoint(*latest, b.model.table, &b.adam);
  EXPECT_EQ(b.model.params, a.model.params);
  // A live process's temporaries are left alone.
  const std::string live = save + "/iter_0000008.tmp-" + host() + "-" + std::to_string(::getpid());
  fs::create_directory(live);
  find_latest_checkpoint(save);
  EXPECT_TRUE(fs::exists(live));
}

TEST(Checkpoint, WrittenCheckpointReadsInPyTorch) {
  const std::string save = test_dir("torch");
  TrainingRun a;
  a.model.randomize(a.model.params, 2);
  a.train(2);
  const std::string dir = save_checkpoint(save, a.request(kConfig));
  // Expected values straight from our buffers, for the independent reader to compare.
  const std::string exp = save + "/expected";
  fs::create_directories(exp);
  std::ofstream manifest(exp + "/manifest.txt");
  auto dump = [&](const std::string& name, const std::vector<int64_t>& shape, const float* data, size_t n) {
    std::ofstream(exp + "/" + name + ".f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * 4));
    manifest << name;
    for (const int64_t d : shape) manifest << ' ' << d;
    manifest << '\n';
  };
  for (size_t i = 0; i < a.model.table.size(); ++i) {
    const NamedTensor& t = a.model.table[i];
    dump(t.name, t.shape, t.data, t.numel());
    dump("exp_avg." + t.name, t.shape, a.adam.exp_avg_of(i).data(), t.numel());
    dump("exp_avg_sq." + t.name, t.shape, a.adam.exp_avg_sq_of(i).data(), t.numel());
  }
  manifest.close();
  std::ofstream(exp + "/state.txt") << "iteration 2\nconsumed_train_samples 16\nscheduler.num_steps 16\n"
                                       "scheduler.max_lr 0.0006\nscheduler.lr_decay_style cosine\n"
                                       "scheduler.lr_warmup_steps 16.0\nrng.data mt19937:5489:17\n"
                                       "args.seq_length 8\nargs.lr 0.0006\nconfig.n_layer 2\n"
                                       "config.activation_function gelu_new\noptimizer.step 2\n";
  EXPECT_EQ(std::system(("/usr/bin/python3 " + kScript + " check " + dir + " " + exp).c_str()), 0);
}

// Expects an Error whose message contains every needle, and that the model buffer was left untouched.
void expect_load_error(const std::string& dir, TinyGpt& model, optim::AdamW* adam,
                       const std::vector<std::string>& needles) {
  const std::vector<float> before = model.params;
  try {
    load_checkpoint(dir, model.table, adam);
    ADD_FAILURE() << "no error; expected " << needles.front();
  } catch (const Error& e) {
    for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
  EXPECT_EQ(model.params, before);
}

TEST(Checkpoint, CorruptOrMismatchedCheckpointsGiveClearErrors) {
  const std::string save = test_dir("corrupt");
  TrainingRun a;
  a.model.randomize(a.model.params, 3);
  a.train(1);
  const std::string dir = save_checkpoint(save, a.request(kConfig));
  const std::string pristine = save + "/pristine";
  fs::copy(dir, pristine, fs::copy_options::recursive);
  auto restore = [&] {
    fs::remove_all(dir);
    fs::copy(pristine, dir, fs::copy_options::recursive);
  };
  TrainingRun b;
  b.model.randomize(b.model.params, 4);

  fs::remove(dir + "/trainer_state.json");
  expect_load_error(dir, b.model, &b.adam, {dir, "trainer_state.json is missing"});
  restore();

  fs::resize_file(dir + "/model.safetensors", fs::file_size(dir + "/model.safetensors") - 10);
  expect_load_error(dir, b.model, &b.adam, {dir + "/model.safetensors", "truncated"});
  restore();

  fs::resize_file(dir + "/optimizer.safetensors", 5);
  expect_load_error(dir, b.model, &b.adam, {dir + "/optimizer.safetensors"});
  restore();

  TinyGpt wider(TinyGpt::V + 1);  // a different vocabulary size
  optim::AdamW wider_adam(wider.spans, optim::AdamWConfig{});
  expect_load_error(dir, wider, &wider_adam,
                    {dir + "/model.safetensors", "'transformer.wte.weight' has shape [11, 4]", "[12, 4]"});

  TinyGpt fewer;
  fewer.table.pop_back();  // the checkpoint has a tensor this model lacks
  expect_load_error(dir, fewer, nullptr, {"'transformer.ln_f.bias' is not a parameter"});

  fs::remove(dir + "/optimizer.safetensors");
  expect_load_error(dir, b.model, &b.adam, {"no optimizer.safetensors", "--no-load-optim"});
  EXPECT_FALSE(load_checkpoint(dir, b.model.table, nullptr).has_optimizer);  // weights + state only
  EXPECT_EQ(b.model.params, a.model.params);
  restore();

  std::ofstream(dir + "/trainer_state.json") << R"({"format": "lmforge-checkpoint-1", "iteration": 1})";
  expect_load_error(dir, b.model, &b.adam, {"trainer_state.json", "missing field 'consumed_train_samples'"});
  restore();

  std::ofstream(save + "/latest_checkpointed_iteration.txt") << "12x";
  EXPECT_THROW(find_latest_checkpoint(save), Error);
  std::ofstream(save + "/latest_checkpointed_iteration.txt") << "7";
  try {
    find_latest_checkpoint(save);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iter_0000007 does not exist"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(find_latest_checkpoint(test_dir("empty")).has_value());

  optim::AdamW shard(b.model.spans, optim::AdamWConfig{}, 0, 10);
  EXPECT_THROW(load_checkpoint(dir, b.model.table, &shard), Error);
  EXPECT_THROW(save_checkpoint(save, a.request("[not an object]")), Error);
}

TEST(Checkpoint, LambStateRoundTripsAndKindMustMatch) {
  const std::string save = test_dir("lamb");
  TinyGpt a;
  a.randomize(a.params, 5);
  optim::Lamb lamb(a.spans, optim::LambConfig{});
  for (unsigned s = 0; s < 3; ++s) {
    a.randomize(a.grads, 200 + s);
    lamb.step(1e-3, 0.01);
  }
  SaveRequest req;
  req.model = a.table;
  req.config_json = kConfig;
  req.optimizer = &lamb;
  req.state.iteration = 3;
  req.state.scheduler = optim::OptimizerParamScheduler(schedule_args()).state();
  const std::string dir = save_checkpoint(save, req);

  TinyGpt b;
  optim::Lamb restored(b.spans, optim::LambConfig{});
  load_checkpoint(dir, b.table, &restored);
  EXPECT_EQ(restored.steps(), 3);
  EXPECT_EQ(lamb.exp_avg(), restored.exp_avg());  // host copies of the device state
  EXPECT_EQ(lamb.exp_avg_sq(), restored.exp_avg_sq());  // host copies of the device state
  a.randomize(a.grads, 300);
  b.grads = a.grads;
  lamb.step(1e-3, 0.01);
  restored.step(1e-3, 0.01);
  EXPECT_EQ(a.params, b.params);

  TinyGpt c;
  optim::AdamW adam(c.spans, optim::AdamWConfig{});
  try {
    load_checkpoint(dir, c.table, &adam);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 'lamb' optimizer state, but this run uses 'adamw'"),
              std::string::npos)
        << e.what();
  }
}

// Generic named state: SGD's buffers are saved as momentum_buffer.<name> (torch's name) and nothing else; without
// momentum the file holds no tensors, only the metadata.
TEST(Checkpoint, SgdStateIsSavedAsMomentumBuffersAndRoundTrips) {
  const std::string save = test_dir("sgd");
  for (const double momentum : {0.9, 0.0}) {
    TinyGpt a;
    a.randomize(a.params, 6);
    optim::Sgd sgd(a.spans, optim::SgdConfig{momentum});
    for (unsigned s = 0; s < 3; ++s) {
      a.randomize(a.grads, 400 + s);
      sgd.step(1e-2, 0.1);
    }
    SaveRequest req;
    req.model = a.table;
    req.config_json = kConfig;
    req.optimizer = &sgd;
    req.state.iteration = momentum == 0.0 ? 4 : 3;
    req.state.scheduler = optim::OptimizerParamScheduler(schedule_args()).state();
    const std::string dir = save_checkpoint(save, req);
    const SafetensorsFile file(dir + "/optimizer.safetensors");
    EXPECT_EQ(file.metadata().at("optimizer"), "sgd");
    EXPECT_EQ(file.metadata().at("momentum"), momentum == 0.0 ? "0" : "0.90000000000000002");
    EXPECT_EQ(file.tensors().size(), momentum == 0.0 ? 0u : a.table.size());
    for (const TensorInfo& info : file.tensors()) EXPECT_EQ(info.name.rfind("momentum_buffer.", 0), 0u) << info.name;

    TinyGpt b;
    optim::Sgd restored(b.spans, optim::SgdConfig{momentum});
    load_checkpoint(dir, b.table, &restored);
    EXPECT_EQ(restored.steps(), 3);
    if (momentum != 0.0) {
      EXPECT_EQ(sgd.state_values(0), restored.state_values(0));
    }
    a.randomize(a.grads, 500);
    b.grads = a.grads;
    sgd.step(1e-2, 0.1);
    restored.step(1e-2, 0.1);
    EXPECT_EQ(a.params, b.params) << "momentum " << momentum;
  }
}

TEST(Checkpoint, ImportsHuggingFaceGpt2Weights) {
  const std::string dir = test_dir("hf");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + kScript + " hf " + dir).c_str()), 0);
  TinyGpt model;
  EXPECT_EQ(load_weights(dir, model.table), dir + "/model.safetensors");
  for (const NamedTensor& t : model.table) {
    const std::string want = read_file(dir + "/expected/" + t.name + ".f32");
    ASSERT_EQ(want.size(), t.numel() * 4) << t.name;
    EXPECT_EQ(std::memcmp(want.data(), t.data, want.size()), 0) << t.name;
  }
  // The config a caller builds the model from.
  const JsonObject config = parse_json_object(read_file(dir + "/config.json"), dir + "/config.json");
  EXPECT_EQ(std::get<int64_t>(config.at("n_layer")), 2);
  EXPECT_EQ(std::get<std::string>(config.at("activation_function")), "gelu_new");
  EXPECT_EQ(std::get<double>(config.at("layer_norm_epsilon")), 1e-5);

  // A vocabulary padded beyond the file's rows loads when allowed, with zero padding.
  TinyGpt padded(16);
  std::fill(padded.params.begin(), padded.params.end(), 7.0f);
  EXPECT_THROW(load_weights(dir, padded.table), Error);
  load_weights(dir + "/model.safetensors", padded.table, WeightsOptions{{"transformer.wte.weight"}});
  const std::string wte = read_file(dir + "/expected/transformer.wte.weight.f32");
  EXPECT_EQ(std::memcmp(wte.data(), padded.table[0].data, wte.size()), 0);
  for (size_t i = wte.size() / 4; i < padded.table[0].numel(); ++i) ASSERT_EQ(padded.table[0].data[i], 0.0f);

  // A model without a parameter the file has, or with one the file lacks, is an error naming it.
  TinyGpt missing;
  missing.table.erase(missing.table.begin() + 1);
  try {
    load_weights(dir, missing.table);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'wpe.weight' is not a parameter"), std::string::npos) << e.what();
  }
  TinyGpt extra;
  std::vector<float> head(TinyGpt::C);
  extra.table.push_back(NamedTensor{"transformer.h.2.ln_1.weight", {TinyGpt::C}, head.data()});
  try {
    load_weights(dir, extra.table);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks tensor 'transformer.h.2.ln_1.weight'"), std::string::npos)
        << e.what();
  }

  // Our own checkpoints import the same way (a save directory with a pointer file).
  const std::string save = test_dir("hf_resave");
  TrainingRun run;
  load_weights(dir, run.model.table);
  run.iteration = 1;
  save_checkpoint(save, run.request(read_file(dir + "/config.json")));
  TinyGpt again;
  EXPECT_EQ(load_weights(save, again.table), save + "/iter_0000001/model.safetensors");
  EXPECT_EQ(again.params, run.model.params);
}

}  // namespace
}  // namespace lmforge::checkpoint
