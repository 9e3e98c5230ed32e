// defines: the alias table, GivenFlags::check, add_alias_flags(), resolve_aliases() (see the header)
#include "cli/flags/aliases.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "cli/flags/value_range.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

using enum Source;
using enum Transform;

// The rows. Own-option rows (kSame, kZeroIsOne, kFlagMeans, kPairFirst/Second on the command line) are declared by
// add_alias_flags and resolved by resolve_aliases in this order: Megatron v1's --batch-size comes before fairseq's
// --max-sentences, so a disagreement between the two names --batch-size as the earlier spelling. kOtherName rows
// are CLI11 names of the canonical option (flag_names). JSON keys and kComputed rows are applied by their readers
// (flags/deepspeed_config.cpp, flags/fairseq_flags.cpp) through GivenFlags::set; they are listed here so that the
// table holds every spelling of every setting.
constexpr Alias kAliases[] = {
    // ---- Megatron v1 (DeepSpeedExamples' Megatron-LM v1.1.5 scripts) ----
    {.canonical = "--micro-batch-size", .spelling = "--batch-size", .source = kMegatronV1, .check = "positive",
     .help = "Megatron v1: samples per forward/backward on each data-parallel rank = --micro-batch-size (v1 had no "
             "accumulation: the global batch is this x the data-parallel size unless --global-batch-size says "
             "otherwise)"},
    {.canonical = "--lr-warmup-fraction", .spelling = "--warmup", .source = kMegatronV1,
     .help = "Megatron v1: = --lr-warmup-fraction (warm-up as a fraction of the decay)"},
    {.canonical = "--tensor-model-parallel-size", .spelling = "--model-parallel-size", .source = kMegatronV1,
     .check = "positive", .help = "Megatron v1: = --tensor-model-parallel-size"},
    // Megatron's arguments.py refuses --checkpoint-activations beside --recompute-granularity.
    {.canonical = "--recompute-granularity", .spelling = "--checkpoint-activations", .source = kMegatronV1,
     .transform = kFlagMeans, .value = "full", .exclusive = true,
     .help = "Megatron v1's spelling of full recomputation: --recompute-granularity full --recompute-method "
             "uniform in chunks of --checkpoint-num-layers"},
    {.canonical = "--recompute-method", .spelling = "--checkpoint-activations", .source = kMegatronV1,
     .transform = kFlagMeans, .value = "uniform"},
    {.canonical = "--recompute-num-layers", .spelling = "--checkpoint-num-layers", .source = kMegatronV1,
     .needs = "--checkpoint-activations", .check = "positive",
     .help = "Layers per chunk with --checkpoint-activations (Megatron v1; default 1) = --recompute-num-layers"},
    // ---- Megatron-DeepSpeed's flags ----
    {.canonical = "--pipeline-model-parallel-size", .spelling = "--pipe-parallel-size", .source = kDeepSpeedFlag,
     .transform = kZeroIsOne, .check = "non-negative",
     .help = "DeepSpeed's spelling of --pipeline-model-parallel-size (Megatron-DeepSpeed 3D scripts); 0 means no "
             "pipeline (one stage)"},
    {.canonical = "--ddp-bucket-size", .spelling = "--zero-reduce-bucket-size", .source = kDeepSpeedFlag,
     .check = "positive", .help = "Megatron-DeepSpeed: gradient elements per reduction bucket = --ddp-bucket-size"},
    // ---- second names of one option (Megatron's own, and argparse option strings of one dest) ----
    {.canonical = "--num-layers", .spelling = "--encoder-num-layers", .source = kMegatron, .transform = kOtherName,
     .exclusive = true},
    {.canonical = "--seq-length", .spelling = "--encoder-seq-length", .source = kMegatron, .transform = kOtherName,
     .exclusive = true},
    {.canonical = "--layernorm-epsilon", .spelling = "--norm-epsilon", .source = kMegatron, .transform = kOtherName},
    {.canonical = "--deepspeed_config", .spelling = "--deepspeed-config", .source = kArgparse,
     .transform = kOtherName},
    // NVIDIA DeepLearningExamples' run_pretraining.py (the fairseq workflow's BERT config).
    {.canonical = "--bert-config-file", .spelling = "--config_file", .source = kArgparse, .transform = kOtherName},
    {.canonical = "--lr-scheduler", .spelling = "--lr_scheduler", .source = kArgparse, .transform = kOtherName},
    // ---- fairseq-train (lmforge train bert) ----
    {.canonical = "--micro-batch-size", .spelling = "--max-sentences", .source = kFairseq, .check = "positive",
     .help = "Sequences per rank per forward pass (= --micro-batch-size; fairseq's --batch-size, listed under the "
             "older spellings, means the same)"},
    {.canonical = "--train-iters", .spelling = "--max-update", .source = kFairseq, .check = "positive",
     .help = "Updates to train (= --train-iters)"},
    {.canonical = "--clip-grad", .spelling = "--clip-norm", .source = kFairseq, .check = "non-negative",
     .help = "Clip the global gradient norm to this, 0: off (= --clip-grad)"},
    {.canonical = "--adam-beta1", .spelling = "--adam-betas", .source = kFairseq, .transform = kPairFirst,
     .help = "fairseq's '(beta1, beta2)' string, e.g. '(0.9, 0.999)' (= --adam-beta1, --adam-beta2)"},
    {.canonical = "--adam-beta2", .spelling = "--adam-betas", .source = kFairseq, .transform = kPairSecond},
    {.canonical = "--data-path", .spelling = "--data", .source = kFairseq,
     .help = "A directory (or glob, or file) of NVIDIA's pre-masked HDF5 shards (= --data-path); the sequence "
             "length is then read from the shards when --seq-length is not given"},
    {.canonical = "--vocab-file", .spelling = "--dict", .source = kFairseq,
     .help = "vocab.txt (= --vocab-file, with --tokenizer-type BertWordPieceLowerCase unless another is given: the "
             "shards hold token ids already, so casing does not matter; the vocabulary sets the id range and the "
             "embedding rows)"},
    {.canonical = "--save", .spelling = "--save-dir", .source = kFairseq,
     .help = "Checkpoint directory (= --save), also resumed from when it holds a checkpoint (fairseq resumes from "
             "its checkpoint_last.pt; here: = --load DIR)"},
    {.canonical = "--save-interval", .spelling = "--save-interval-updates", .source = kFairseq,
     .check = "non-negative", .help = "Updates between checkpoints (= --save-interval)"},
    {.canonical = "--load", .spelling = "--restore-file", .source = kFairseq, .transform = kComputed},
    {.canonical = "--load", .spelling = "--save-dir", .source = kFairseq, .transform = kComputed},
    {.canonical = "--global-batch-size", .spelling = "--update-freq", .source = kFairseq, .transform = kComputed},
    {.canonical = "--eval-interval", .spelling = "--validate-interval", .source = kFairseq, .transform = kComputed},
    // ---- DeepSpeed JSON keys (--deepspeed --deepspeed_config FILE) ----
    {.canonical = "--micro-batch-size", .spelling = "train_micro_batch_size_per_gpu", .source = kDeepSpeedJson,
     .transform = kComputed},
    {.canonical = "--global-batch-size", .spelling = "train_batch_size", .source = kDeepSpeedJson,
     .transform = kComputed},
    {.canonical = "--clip-grad", .spelling = "gradient_clipping", .source = kDeepSpeedJson},
    {.canonical = "--fp16", .spelling = "fp16.enabled", .source = kDeepSpeedJson},
    {.canonical = "--bf16", .spelling = "bf16.enabled", .source = kDeepSpeedJson},
    {.canonical = "--loss-scale", .spelling = "fp16.loss_scale", .source = kDeepSpeedJson},
    {.canonical = "--initial-loss-scale", .spelling = "fp16.initial_scale_power", .source = kDeepSpeedJson,
     .transform = kPowerOfTwo},
    {.canonical = "--loss-scale-window", .spelling = "fp16.loss_scale_window", .source = kDeepSpeedJson},
    {.canonical = "--hysteresis", .spelling = "fp16.hysteresis", .source = kDeepSpeedJson},
    {.canonical = "--min-loss-scale", .spelling = "fp16.min_loss_scale", .source = kDeepSpeedJson},
    {.canonical = "--zero-stage", .spelling = "zero_optimization.stage", .source = kDeepSpeedJson},
    {.canonical = "--ddp-bucket-size", .spelling = "zero_optimization.reduce_bucket_size", .source = kDeepSpeedJson},
    {.canonical = "--optimizer", .spelling = "optimizer.type", .source = kDeepSpeedJson, .transform = kComputed},
    {.canonical = "--lr", .spelling = "optimizer.params.lr", .source = kDeepSpeedJson},
    {.canonical = "--adam-beta1", .spelling = "optimizer.params.betas[0]", .source = kDeepSpeedJson},
    {.canonical = "--adam-beta2", .spelling = "optimizer.params.betas[1]", .source = kDeepSpeedJson},
    {.canonical = "--adam-eps", .spelling = "optimizer.params.eps", .source = kDeepSpeedJson},
    {.canonical = "--weight-decay", .spelling = "optimizer.params.weight_decay", .source = kDeepSpeedJson},
};

// A row given as its own option on the command line (declared by add_alias_flags, applied by resolve_aliases).
bool own_option(const Alias& a) {
  return a.source != kDeepSpeedJson && a.transform != kOtherName && a.transform != kComputed &&
         a.transform != kPowerOfTwo;
}

// fairseq's --adam-betas string, e.g. "(0.9, 0.999)" or "[0.9,0.98]" (fairseq evaluates it as a Python literal).
std::pair<double, double> parse_betas(const std::string& text) {
  std::string inner = text;
  for (char& c : inner)
    if (c == '(' || c == ')' || c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(inner);
  double b1 = 0, b2 = 0;
  std::string rest;
  if (!(in >> b1 >> b2) || (in >> rest))
    throw Error("--adam-betas '" + text + "': expected two numbers as fairseq writes them, e.g. '(0.9, 0.999)'");
  if (!(b1 >= 0.0 && b1 < 1.0 && b2 >= 0.0 && b2 < 1.0))
    throw Error("--adam-betas '" + text + "': each beta must lie in [0, 1)");
  return {b1, b2};
}

// The canonical's value for the spelling's `text` (a bare flag: no text).
std::string transformed(const Alias& a, const std::string& text) {
  switch (a.transform) {
    case kZeroIsOne: return text == "0" ? "1" : text;
    case kFlagMeans: return std::string(a.value);
    case kPairFirst: return show_number(parse_betas(text).first);
    case kPairSecond: return show_number(parse_betas(text).second);
    default: return text;
  }
}

// Equal settings: as numbers when both texts are numbers ("0.01" and ".01"), else as text.
bool same_value(const std::string& a, const std::string& b) {
  char *end_a = nullptr, *end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  if (!a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0') return x == y;
  return a == b;
}

// A value for an error message: numbers as the shortest text that reads back ("1.0" -> 1, "2e-4" -> 0.0002).
std::string shown_text(const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' ? show_number(x) : text;
}

// An option's value as given (the last occurrence; list options: their values joined by spaces).
std::string value_text(const CLI::Option* o) {
  const std::vector<std::string>& r = o->results();
  if (o->get_items_expected_max() <= 1) return r.empty() ? "" : r.back();
  std::string joined;
  for (const std::string& v : r) joined += (joined.empty() ? "" : " ") + v;
  return joined;
}

bool counted(const CLI::App* cmd, std::string_view flag) {
  const CLI::Option* o = cmd->get_option_no_throw(std::string(flag));
  return o != nullptr && o->count() > 0;
}

}  // namespace

const char* help_group(Source source) {
  return source == kFairseq ? "fairseq spellings" : "Older spellings (Megatron v1, Megatron-DeepSpeed)";
}

std::span<const Alias> alias_table() { return kAliases; }

const Alias* find_alias(std::string_view spelling, Source source) {
  for (const Alias& a : kAliases)
    if (a.spelling == spelling && a.source == source) return &a;
  return nullptr;
}

std::string flag_names(std::string_view canonical, std::initializer_list<Source> with) {
  std::string names(canonical);
  for (const Alias& a : kAliases)
    if (a.transform == kOtherName && a.canonical == canonical &&
        std::find(with.begin(), with.end(), a.source) != with.end())
      names += "," + std::string(a.spelling);
  return names;
}

std::string show_number(double x) {
  for (int digits = 15;; digits++) {
    std::ostringstream s;
    s.precision(digits);
    s << x;
    if (digits == 17 || std::stod(s.str()) == x) return s.str();
  }
}

void GivenFlags::note(const std::string& canonical, const std::string& spelling, const std::string& shown) {
  by_.try_emplace(canonical, By{spelling, shown});
  all_.insert({canonical, spelling});
}

std::string GivenFlags::who(const std::string& canonical) const {
  const auto it = by_.find(canonical);
  return it == by_.end() ? "" : it->second.spelling;
}

void GivenFlags::check(const std::string& canonical, const std::string& spelling, const std::string& shown,
                       bool same, const std::string& earlier, const std::string& file, bool exclusive) {
  const By& by = by_.at(canonical);
  if (exclusive)
    throw Error("give only one of " + by.spelling + " and " + spelling + " (the same setting" +
                (shown.empty() ? "" : ": " + spelling + " " + shown) + ", as in Megatron)");
  const std::string before = by.spelling + " " + (by.shown.empty() ? earlier : by.shown);
  if (!same && !file.empty())
    throw Error(file + ": " + spelling + " " + shown + " conflicts with " + before +
                " on the command line (one setting given twice differently; drop one)");
  if (!same)
    throw Error(spelling + " " + shown + " and " + before + " disagree (two spellings of one setting; give one)");
  all_.insert({canonical, spelling});  // equal: the earlier spelling stays the one named
}

void add_alias_flags(CLI::App* cmd, std::initializer_list<Source> sources) {
  for (const Alias& a : kAliases) {
    if (!own_option(a) || std::find(sources.begin(), sources.end(), a.source) == sources.end()) continue;
    const CLI::Option* canonical = cmd->get_option_no_throw(std::string(a.canonical));
    const std::string name(a.spelling);
    if (canonical == nullptr || cmd->get_option_no_throw(name) != nullptr) continue;  // (--adam-betas: two rows)
    CLI::Option* o = a.transform == kFlagMeans ? cmd->add_flag(name) : cmd->add_option(name);
    o->description(std::string(a.help));
    if (a.transform != kFlagMeans) o->type_name(a.transform == kPairFirst ? "TEXT" : canonical->get_type_name());
    // Positive counts start at 1; a positive real (none today) would be greater_than(0).
    const bool whole = canonical->get_type_name().find("INT") != std::string::npos;
    if (a.check == "positive") o->check(whole ? at_least(1) : greater_than(0));
    if (a.check == "non-negative") o->check(at_least(0));
    o->group(help_group(a.source));
  }
}

void resolve_aliases(CLI::App* cmd, GivenFlags& given) {
  std::set<std::string_view> spellings;
  for (const Alias& a : kAliases)
    if (own_option(a)) spellings.insert(a.spelling);
  // 1. What the command line gave under lmforge's own names (and the second names of one option).
  for (const CLI::Option* o : cmd->get_options())
    if (o->count() > 0 && !spellings.count(o->get_name())) given.note(o->get_name(), o->get_name());
  for (const Alias& a : kAliases) {
    if (a.transform == kOtherName && a.exclusive) {
      // Both names of one CLI11 option: its occurrences add up (argparse would keep two dests).
      const CLI::Option* o = cmd->get_option_no_throw(std::string(a.canonical));
      if (o != nullptr && o->check_lname(std::string(a.spelling.substr(2))) && o->count() > 1)
        given.check(std::string(a.canonical), std::string(a.spelling), "", true, "", "", true);
    }
    if (!own_option(a) || !counted(cmd, a.spelling)) continue;
    CLI::Option* canonical = cmd->get_option_no_throw(std::string(a.canonical));
    if (canonical == nullptr) continue;
    const std::string spelling(a.spelling), name(a.canonical);
    if (!a.needs.empty() && !counted(cmd, a.needs)) throw Error(spelling + " goes with " + std::string(a.needs));
    // 2. The spelling's value, the check against whatever gave the setting before, and the canonical option fed.
    const std::string given_text = a.transform == kFlagMeans ? "" : value_text(cmd->get_option(spelling));
    const std::string value = transformed(a, given_text);
    const std::string shown = a.transform == kFlagMeans ? "(= " + name + " " + value + ")" : shown_text(given_text);
    if (given.given(name))
      given.check(name, spelling, shown, same_value(value, value_text(canonical)),
                  shown_text(value_text(canonical)), "", a.exclusive);
    else given.note(name, spelling, shown);
    canonical->clear();
    canonical->add_result(value);
    canonical->run_callback();
  }
}

}  // namespace lmforge::cli
