// defines: read_deepspeed_config(), apply_deepspeed_config() — DeepSpeed's JSON keys on lmforge's options
#include "cli/flags/deepspeed_config.h"

#include <simdjson.h>

#include <cmath>
#include <ostream>
#include <sstream>

#include "util/error.h"
#include "util/file_text.h"
#include "util/json_scan.h"

namespace lmforge::cli {
namespace {

using train::TrainOptions;

using simdjson::dom::element;
using simdjson::dom::element_type;

// Reads one config; every error names the file and the key's dotted path.
struct Reader {
  DeepSpeedConfig& c;

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error(c.path + ": " + key + ": " + why);
  }
  double number(element e, const std::string& key) const {
    if (e.type() == element_type::INT64) return (double)int64_t(e.get_int64());
    if (e.type() == element_type::UINT64) return (double)uint64_t(e.get_uint64());
    if (e.type() == element_type::DOUBLE) return double(e.get_double());
    fail(key, "expected a number");
  }
  int64_t integer(element e, const std::string& key) const {
    const double v = number(e, key);
    if (v != std::floor(v) || std::fabs(v) > 9e15)
      fail(key, "expected a whole number from -9e15 to 9e15, got " + show_number(v));
    return (int64_t)v;
  }
  bool boolean(element e, const std::string& key) const {
    if (e.type() != element_type::BOOL) fail(key, "expected true or false");
    return bool(e.get_bool());
  }
  std::string text(element e, const std::string& key) const {
    if (e.type() != element_type::STRING) fail(key, "expected a string");
    return std::string(std::string_view(e.get_string()));
  }
  simdjson::dom::object object(element e, const std::string& key) const {
    if (e.type() != element_type::OBJECT) fail(key, "expected an object {...}");
    return e.get_object();
  }
  void unknown(const std::string& key) { c.unknown_keys.push_back(key); }
  void note(const std::string& line) { c.notices.push_back(line); }

  void precision_block(element e, const std::string& key, bool fp16) {
    for (auto [k, v] : object(e, key)) {
      const std::string name(k), path = key + "." + name;
      if (name == "enabled") {
        (fp16 ? c.fp16_enabled : c.bf16_enabled) = boolean(v, path);
        if (!fp16) c.bf16_key = key;
      } else if (fp16 && name == "loss_scale") {
        c.loss_scale = number(v, path);
      } else if (fp16 && name == "initial_scale_power") {
        c.initial_scale_power = number(v, path);
      } else if (fp16 && name == "loss_scale_window") {
        c.loss_scale_window = number(v, path);
      } else if (fp16 && name == "hysteresis") {
        c.hysteresis = number(v, path);
      } else if (fp16 && name == "min_loss_scale") {
        c.min_loss_scale = number(v, path);
      } else if (fp16 && name == "consecutive_hysteresis") {
        if (boolean(v, path))
          fail(path, "true is not implemented (lmforge's dynamic scaler is Megatron's: the hysteresis is refilled "
                     "only when the scale grows)");
      } else if (fp16 && name == "auto_cast") {
        if (boolean(v, path)) fail(path, "true is not implemented (lmforge casts the model itself, as Megatron)");
      } else {
        unknown(path);
      }
    }
  }

  void zero_block(element e) {
    for (auto [k, v] : object(e, "zero_optimization")) {
      const std::string name(k), path = "zero_optimization." + name;
      if (name == "stage") {
        c.zero_stage = integer(v, path);
        if (*c.zero_stage == 3)
          fail(path, "ZeRO stage 3 (parameters sharded too) is not implemented; stages 0, 1 and 2 are");
        if (*c.zero_stage < 0 || *c.zero_stage > 3) fail(path, "expected 0, 1 or 2");
      } else if (name == "reduce_bucket_size") {
        c.reduce_bucket_size = integer(v, path);
      } else if (name == "allgather_bucket_size") {
        c.allgather_bucket_size = integer(v, path);
      } else if (name == "reduce_scatter" || name == "contiguous_gradients" || name == "overlap_comm" ||
                 name == "allgather_partitions") {
        // These choose how DeepSpeed moves data on GPUs; lmforge always does the same one thing.
        boolean(v, path);
        note(path + ": lmforge always reduce-scatters the gradients in rank order from one flat buffer, "
             "overlapping each bucket with the backward pass, and all-gathers the parameters per bucket");
      } else {
        unknown(path);
      }
    }
  }

  void optimizer_block(element e) {
    for (auto [k, v] : object(e, "optimizer")) {
      const std::string name(k);
      if (name == "type") {
        c.optimizer_type = text(v, "optimizer.type");
      } else if (name == "params") {
        for (auto [pk, pv] : object(v, "optimizer.params")) {
          const std::string p(pk), path = "optimizer.params." + p;
          if (p == "lr") c.lr = number(pv, path);
          else if (p == "eps") c.eps = number(pv, path);
          else if (p == "weight_decay") c.weight_decay = number(pv, path);
          else if (p == "betas") {
            if (pv.type() != element_type::ARRAY) fail(path, "expected [beta1, beta2]");
            std::vector<double> b;
            for (element x : pv.get_array()) b.push_back(number(x, path));
            if (b.size() != 2) fail(path, "expected two values [beta1, beta2]");
            c.beta1 = b[0];
            c.beta2 = b[1];
          } else if (p == "adam_w_mode") {
            if (!boolean(pv, path))
              fail(path, "false (Adam with L2 regularisation in the gradient) is not implemented; lmforge's adam is "
                         "AdamW (decoupled weight decay), DeepSpeed's default adam_w_mode true");
          } else if (p == "max_grad_norm") {
            if (number(pv, path) != 0.0)
              note(path + ": clipping follows gradient_clipping / --clip-grad (DeepSpeed ignores max_grad_norm "
                   "of FusedAdam too)");
          } else if (p == "torch_adam" || p == "bias_correction" || p == "amsgrad") {
            if (p == "amsgrad" && boolean(pv, path)) fail(path, "AMSGrad is not implemented");
            if (p == "bias_correction" && !boolean(pv, path)) fail(path, "false is not implemented");
          } else {
            unknown(path);
          }
        }
      } else {
        unknown("optimizer." + name);
      }
    }
    if (!c.optimizer_type) fail("optimizer", "needs a \"type\"");
    std::string t = *c.optimizer_type;
    for (char& ch : t) ch = (char)std::tolower((unsigned char)ch);
    if (t == "lamb" || t == "onebitlamb")
      fail("optimizer.type", "DeepSpeed's " + *c.optimizer_type + " is its own LAMB variant (trust ratio clamped to "
           "[min_coeff, max_coeff], applied to every tensor, bias-corrected step size) and is not implemented; "
           "lmforge's --optimizer lamb is NVIDIA apex FusedLAMB, a different update, so it is not substituted");
    if (t != "adam" && t != "adamw")
      fail("optimizer.type", "'" + *c.optimizer_type + "' is not implemented (Adam and AdamW are)");
  }

  void scheduler_block(element e) {
    optim::DeepSpeedLr s;
    bool typed = false;
    for (auto [k, v] : object(e, "scheduler")) {
      const std::string name(k);
      if (name == "type") {
        s.type = text(v, "scheduler.type");
        typed = true;
      } else if (name == "params") {
        for (auto [pk, pv] : object(v, "scheduler.params")) {
          const std::string p(pk), path = "scheduler.params." + p;
          if (p == "warmup_min_lr") s.warmup_min_lr = number(pv, path);
          else if (p == "warmup_max_lr") s.warmup_max_lr = number(pv, path);
          else if (p == "warmup_num_steps") s.warmup_num_steps = integer(pv, path);
          else if (p == "warmup_type") s.warmup_type = text(pv, path);
          else if (p == "total_num_steps") s.total_num_steps = integer(pv, path);
          else if (p == "warmup_min_ratio") s.warmup_min_ratio = number(pv, path);
          else if (p == "cos_min_ratio") s.cos_min_ratio = number(pv, path);
          else if (p == "last_batch_iteration") {
            if (integer(pv, path) != -1) fail(path, "only -1 (start from the beginning; --load resumes)");
          } else {
            unknown(path);
          }
        }
      } else {
        unknown("scheduler." + name);
      }
    }
    if (!typed) fail("scheduler", "needs a \"type\"");
    try {
      optim::validate_deepspeed_lr(s);
    } catch (const Error& err) {
      fail("scheduler", err.what());
    }
    c.scheduler = s;
  }
};

}  // namespace

DeepSpeedConfig read_deepspeed_config(const std::string& path) {
  DeepSpeedConfig c;
  c.path = path;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  const simdjson::padded_string text(read_text_file(path, "the DeepSpeed config (--deepspeed_config)"));
  if (auto err = parser.parse(text).get(root)) {
    // JSON (and Python's json, so DeepSpeed) allows any number; the reader takes 64-bit integers and doubles: the
    // key holding one beyond them is named rather than the file called invalid.
    if (const std::optional<JsonNumberAt> at = json_number_out_of_range(std::string_view(text.data(), text.size())))
      throw Error(path + ": " + (at->key.empty() ? std::string("the top level") : at->key) + ": " + at->literal +
                  " is out of range (" +
                  (at->integer ? "integers are read from -9223372036854775808 to 18446744073709551615, and counts "
                                 "and sizes must be whole numbers up to 9e15"
                               : "beyond the largest double, 1.8e308") +
                  ")");
    throw Error(path + ": not valid JSON (" + simdjson::error_message(err) + ")");
  }
  Reader r{c};
  for (auto [k, v] : r.object(root, "the top level")) {
    const std::string key(k);
    if (key == "train_batch_size") c.train_batch_size = r.integer(v, key);
    else if (key == "train_micro_batch_size_per_gpu") c.train_micro_batch_size_per_gpu = r.integer(v, key);
    else if (key == "gradient_accumulation_steps") c.gradient_accumulation_steps = r.integer(v, key);
    else if (key == "gradient_clipping") c.gradient_clipping = r.number(v, key);
    else if (key == "steps_per_print") {
      c.steps_per_print = r.integer(v, key);
      r.note(key + ": DeepSpeed's own progress line is not printed; lmforge logs Megatron's line every "
             "--log-interval iterations");
    } else if (key == "fp16") r.precision_block(v, key, true);
    else if (key == "bf16" || key == "bfloat16") r.precision_block(v, key, false);
    else if (key == "zero_optimization") r.zero_block(v);
    else if (key == "optimizer") r.optimizer_block(v);
    else if (key == "scheduler") r.scheduler_block(v);
    else if (key == "wall_clock_breakdown" || key == "zero_allow_untested_optimizer" || key == "prescale_gradients") {
      if (key == "prescale_gradients" && r.boolean(v, key))
        r.fail(key, "true is not implemented (gradients are summed, then divided by the micro-batch count)");
    } else r.unknown(key);
  }
  for (const auto& [key, value] : {std::pair{"train_batch_size", c.train_batch_size},
                                   std::pair{"train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu},
                                   std::pair{"gradient_accumulation_steps", c.gradient_accumulation_steps}})
    if (value && *value <= 0) throw Error(path + ": " + key + " must be a positive integer");
  return c;
}

namespace {

// One value set by a key, perhaps given on the command line too: the table names the key's flag, GivenFlags
// checks the two agree.
struct Applier {
  const DeepSpeedConfig& c;
  GivenFlags& given;

  template <class T>
  void set(const std::string& key, T value, T& field, const std::string& shown = "") const {
    const Alias* row = find_alias(key, Source::kDeepSpeedJson);
    given.set(std::string(row->canonical), key, shown.empty() ? GivenFlags::show(value) : shown, value, field, c.path);
  }
  bool flag_given(const std::string& flag) const { return given.given(flag); }
};

// DeepSpeed's _set_batch_related_parameters and _batch_assertion, with D the data-parallel size.
void apply_batch(const DeepSpeedConfig& c, const Applier& a, TrainOptions& o, int64_t D) {
  std::optional<int64_t> tb = c.train_batch_size, mb = c.train_micro_batch_size_per_gpu,
                         gas = c.gradient_accumulation_steps;
  if (!tb && !mb) {
    if (!gas) return;  // the batch comes from the flags
    if (o.micro_batch_size <= 0)
      throw Error(c.path + ": gradient_accumulation_steps needs train_batch_size or train_micro_batch_size_per_gpu "
                  "(or --micro-batch-size)");
    mb = o.micro_batch_size;  // --micro-batch-size plays train_micro_batch_size_per_gpu
  }
  auto whole = [&](int64_t n, int64_t d, const std::string& what) {
    if (d <= 0 || n % d != 0)
      throw Error(c.path + ": " + what + " is not a whole number (" + std::to_string(n) + " / " + std::to_string(d) +
                  ", data-parallel size " + std::to_string(D) + ")");
    return n / d;
  };
  if (tb && mb && gas) {
    if (*tb != *mb * *gas * D)
      throw Error(c.path + ": train_batch_size " + std::to_string(*tb) + " != train_micro_batch_size_per_gpu " +
                  std::to_string(*mb) + " x gradient_accumulation_steps " + std::to_string(*gas) +
                  " x data-parallel size " + std::to_string(D) + " (DeepSpeed's check)");
  } else if (tb && mb) {
    gas = whole(*tb, *mb * D, "gradient_accumulation_steps = train_batch_size / (micro batch x data-parallel size)");
  } else if (tb && gas) {
    mb = whole(*tb, *gas * D, "train_micro_batch_size_per_gpu = train_batch_size / (accumulation x data-parallel "
                              "size)");
  } else if (mb && gas) {
    tb = *mb * *gas * D;
  } else if (tb) {
    gas = 1;
    mb = whole(*tb, D, "train_micro_batch_size_per_gpu = train_batch_size / data-parallel size");
  } else {
    gas = 1;
    tb = *mb * D;
  }
  a.set("train_micro_batch_size_per_gpu", (int)*mb, o.micro_batch_size);
  a.set("train_batch_size", *tb, o.global_batch_size);
}

void apply_precision(const DeepSpeedConfig& c, const Applier& a, TrainOptions& o) {
  train::MixedPrecisionOptions& p = o.precision;
  // DeepSpeed refuses the two together ("bfloat16 and fp16 modes cannot be simultaneously enabled"); the error names
  // the file's blocks (or the block and the flag on the command line), not flags the user never gave.
  const std::string fp16_block = "\"fp16\": {\"enabled\": true}";
  const std::string bf16_block = "\"" + c.bf16_key + "\": {\"enabled\": true}";
  const bool json_fp16 = c.fp16_enabled.value_or(false), json_bf16 = c.bf16_enabled.value_or(false);
  if (json_fp16 && json_bf16)
    throw Error(c.path + ": " + fp16_block + " and " + bf16_block + " are both enabled; one precision at a time "
                "(DeepSpeed refuses both too): set \"enabled\": false in one of the two blocks");
  if (json_fp16 && a.flag_given("--bf16") && p.bf16)
    throw Error(c.path + ": " + fp16_block + " and --bf16 on the command line exclude each other: drop one");
  if (json_bf16 && a.flag_given("--fp16") && p.fp16)
    throw Error(c.path + ": " + bf16_block + " and --fp16 on the command line exclude each other: drop one");
  if (c.fp16_enabled) a.set("fp16.enabled", *c.fp16_enabled, p.fp16);
  if (c.bf16_enabled) a.set("bf16.enabled", *c.bf16_enabled, p.bf16);
  if (!c.fp16_enabled.value_or(false)) return;
  // DeepSpeed's defaults where the block leaves a key out: initial scale 2^16 (Megatron's is 2^32), window 1000,
  // hysteresis 2, minimum 1 (the same as Megatron's).
  if (c.loss_scale) a.set("fp16.loss_scale", *c.loss_scale, p.loss_scale);
  const double initial = std::ldexp(1.0, (int)c.initial_scale_power.value_or(16.0));
  if (c.initial_scale_power)
    a.set("fp16.initial_scale_power", initial, p.initial_loss_scale,
          show_number(*c.initial_scale_power) + " (= " + show_number(initial) + ")");
  else if (!a.flag_given("--initial-loss-scale")) p.initial_loss_scale = initial;
  if (c.loss_scale_window) {
    int window = (int)*c.loss_scale_window;
    a.set("fp16.loss_scale_window", window, p.loss_scale_window);
  }
  if (c.hysteresis) {
    int h = (int)*c.hysteresis;
    a.set("fp16.hysteresis", h, p.hysteresis);
  }
  if (c.min_loss_scale) a.set("fp16.min_loss_scale", *c.min_loss_scale, p.min_loss_scale);
}

void apply_optimizer(const DeepSpeedConfig& c, const Applier& a, TrainOptions& o) {
  if (c.optimizer_type) {
    std::string adam = "adam";
    a.set("optimizer.type", adam, o.optimizer.kind, *c.optimizer_type + " (= adam)");
  }
  if (c.lr) a.set("optimizer.params.lr", *c.lr, o.schedule.lr);
  if (c.beta1) a.set("optimizer.params.betas[0]", *c.beta1, o.optimizer.beta1);
  if (c.beta2) a.set("optimizer.params.betas[1]", *c.beta2, o.optimizer.beta2);
  if (c.eps) a.set("optimizer.params.eps", *c.eps, o.optimizer.eps);
  if (c.weight_decay) a.set("optimizer.params.weight_decay", *c.weight_decay, o.schedule.weight_decay);
}

void apply_scheduler(const DeepSpeedConfig& c, const Applier& a, TrainOptions& o) {
  if (!c.scheduler) return;
  for (const char* flag : {"--lr-decay-style", "--lr-decay-iters", "--lr-decay-samples", "--lr-warmup-fraction",
                           "--lr-warmup-iters", "--lr-warmup-samples", "--lr-warmup-init", "--min-lr"})
    if (a.flag_given(flag))
      throw Error(c.path + ": scheduler " + c.scheduler->type + " sets the learning rate of every step, so " + flag +
                  " on the command line would be ignored: drop one of them");
  optim::DeepSpeedLr s = *c.scheduler;
  s.optimizer_lr = o.schedule.lr;
  if (s.type != "WarmupCosineLR") o.schedule.lr = std::max(s.warmup_max_lr, s.warmup_min_lr);  // the peak, logged
  o.schedule.deepspeed_lr = s;
}

}  // namespace

void apply_deepspeed_config(const DeepSpeedConfig& c, TrainOptions& o, int world_size, GivenFlags& given,
                            std::ostream& notices) {
  const Applier a{c, given};
  const int model_parallel = std::max(1, o.tensor_model_parallel_size) * std::max(1, o.pipeline_model_parallel_size);
  const int64_t D = std::max(1, world_size / model_parallel);
  apply_batch(c, a, o, D);
  if (c.gradient_clipping) {
    a.set("gradient_clipping", *c.gradient_clipping, o.clip_grad);
  } else if (!given.given("--clip-grad")) {
    o.clip_grad = 0.0;
    notices << "lmforge train: notice: " << c.path
            << ": no gradient_clipping, so no clipping (DeepSpeed's default; Megatron's --clip-grad 1.0 does not "
               "apply under --deepspeed)\n";
  }
  apply_precision(c, a, o);
  if (c.zero_stage) {
    if (*c.zero_stage == 0 && given.given("--use-distributed-optimizer"))
      throw Error(c.path + ": zero_optimization.stage 0 conflicts with --use-distributed-optimizer (ZeRO-1)");
    // DeepSpeed's engine takes the stage from the JSON whatever Megatron-DeepSpeed's --zero-stage says (its
    // ds_pretrain_gpt2.sh passes --zero-stage 0 beside a stage-2 config): the JSON wins, with a notice.
    if (given.given("--zero-stage") && o.zero_stage != (int)*c.zero_stage)
      notices << "lmforge train: notice: " << c.path << ": zero_optimization.stage " << *c.zero_stage
              << " wins over --zero-stage " << o.zero_stage << " on the command line (DeepSpeed uses the JSON's "
              << "stage)\n";
    else given.note("--zero-stage", "zero_optimization.stage", std::to_string(*c.zero_stage));
    o.zero_stage = (int)*c.zero_stage;
    o.use_distributed_optimizer = o.use_distributed_optimizer || *c.zero_stage >= 1;
  }
  if (c.reduce_bucket_size)
    a.set("zero_optimization.reduce_bucket_size", *c.reduce_bucket_size, o.ddp_bucket_size);
  if (c.allgather_bucket_size)
    notices << "lmforge train: notice: " << c.path << ": zero_optimization.allgather_bucket_size "
            << *c.allgather_bucket_size << ": parameters are all-gathered per gradient bucket (reduce_bucket_size / "
            << "--ddp-bucket-size)\n";
  apply_optimizer(c, a, o);
  apply_scheduler(c, a, o);
  for (const std::string& n : c.notices) notices << "lmforge train: notice: " << c.path << ": " << n << "\n";
  if (!c.unknown_keys.empty()) {
    notices << "lmforge train: warning: " << c.path << ": keys lmforge does not know, not applied:";
    for (const std::string& k : c.unknown_keys) notices << " " << k;
    notices << "\n";
  }
}

}  // namespace lmforge::cli
