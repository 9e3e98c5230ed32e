// defines: agreed_settings(), settings_text(), first_difference(), check_settings_agree() — the start-up check
//          that every rank of a training job was given the same settings (settings_agreement.h)
#include "train/settings_agreement.h"

#include <sys/stat.h>

#include <array>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "util/error.h"
#include "util/strings.h"

namespace lmforge::train {
namespace {

// The header's layout never changes (a later format changes kFormat and the text, not the header's size), so ranks
// of different lmforge versions still exchange it without a mismatch of sizes.
constexpr double kFormat = 1;
constexpr size_t kHeader = 10;  // format, job digest (4 x 16 bits), settings digest (4 x 16 bits), text bytes

std::string num_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back as v
  return std::string(buf, r.ptr);
}
std::string num_text(int64_t v) { return int_text(v); }
std::string on_off(bool v) { return v ? "on" : "off"; }
template <class T>
std::string optional_text(const std::optional<T>& v) {
  return v ? num_text(*v) : "unset";
}

// The size of a file a flag names, so that ranks reading different copies under one path are caught; "missing"
// when there is none (the flag's own check reports that later, with its reason).
std::string file_size_text(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "missing";
  return num_text((int64_t)st.st_size);
}

// FNV-1a, 64 bits: a digest to compare texts by, not a defence against forgery.
uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string escape_field(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string unescape_field(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 't' ? '\t' : c == 'n' ? '\n' : c;
  }
  return out;
}

// A value as a message shows it: quoted when empty or holding spaces.
std::string shown_value(const std::string& v) {
  if (!v.empty() && v.find_first_of(" \t\n") == std::string::npos) return v;
  return "'" + v + "'";
}

// A text's settings by name, in order.
std::vector<std::pair<std::string, std::string>> parse_settings(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) out.emplace_back(unescape_field(line), "");
    else out.emplace_back(unescape_field(line.substr(0, tab)), unescape_field(line.substr(tab + 1)));
  }
  return out;
}

std::string differing_list(const std::vector<int>& ranks) {
  std::string s;
  const size_t shown_ranks = std::min<size_t>(ranks.size(), 8);
  for (size_t i = 0; i < shown_ranks; i++) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > shown_ranks) s += " and " + std::to_string(ranks.size() - shown_ranks) + " more";
  return s;
}

}  // namespace

std::vector<AgreedSetting> agreed_settings(const TrainOptions& o) {
  std::vector<AgreedSetting> s;
  auto job = [&](std::string name, std::string value) { s.push_back({std::move(name), std::move(value), true}); };
  auto add = [&](std::string name, std::string value) { s.push_back({std::move(name), std::move(value), false}); };

  // ---- the job ----
  job("settings format", num_text(kFormat));
  job("command", "lmforge train " + o.model_type);
  // torchrun gives every worker of one rendezvous the same run id (--rdzv-id); ranks started by hand have none.
  const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
  job("torchrun's run id (TORCHELASTIC_RUN_ID)", run_id ? run_id : "unset");
  job("--save", o.save.empty() ? "unset" : o.save);

  // ---- the model ----
  add("--num-layers", num_text((int64_t)o.num_layers));
  add("--decoder-num-layers", num_text((int64_t)o.decoder_num_layers));
  add("--hidden-size", num_text((int64_t)o.hidden_size));
  add("--num-attention-heads", num_text((int64_t)o.num_attention_heads));
  add("--ffn-hidden-size", num_text((int64_t)o.ffn_hidden_size));
  add("--seq-length", num_text((int64_t)o.seq_length));
  add("--decoder-seq-length", num_text((int64_t)o.decoder_seq_length));
  add("--max-position-embeddings", num_text((int64_t)o.max_position_embeddings));
  add("--make-vocab-size-divisible-by", num_text((int64_t)o.make_vocab_size_divisible_by));
  add("--init-method-std", num_text(o.init_method_std));
  add("--hidden-dropout", num_text(o.hidden_dropout));
  add("--attention-dropout", num_text(o.attention_dropout));
  add("--layernorm-epsilon", num_text(o.layernorm_epsilon));
  add("--bert-no-binary-head", on_off(!o.bert_binary_head));
  add("--bert-post-layernorm", on_off(o.bert_post_layernorm));
  add("--bert-config-file", o.bert_config_file.empty() ? "unset" : o.bert_config_file);
  if (!o.bert_config_file.empty())
    add("size of " + o.bert_config_file + " (bytes)", file_size_text(o.bert_config_file));
  add("--mask-prob", num_text(o.mask_prob));
  add("--short-seq-prob", num_text(o.short_seq_prob));
  add("--no-bias-gelu-fusion", on_off(o.no_bias_gelu_fusion));
  add("--openai-gelu", on_off(o.openai_gelu));
  // train electra's own settings (0: the --electra-size preset's).
  add("--electra-size", o.electra_size);
  add("--generator-hidden-size", num_text(o.generator_hidden_size));
  add("--generator-layers", num_text(o.generator_layers));
  add("--embedding-size", num_text((int64_t)o.embedding_size));
  add("--disc-weight", num_text(o.disc_weight));
  add("--sampling-temperature", num_text(o.sampling_temperature));
  add("--max-predictions-per-seq", num_text((int64_t)o.max_predictions_per_seq));
  add("--mask-prob (train electra)", num_text(o.electra_mask_prob));

  // ---- tokenizer and data ----
  const text::TokenizerOptions& t = o.tokenizer;
  add("--tokenizer-type", t.type);
  add("--vocab-size", num_text(t.vocab_size));
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--vocab-file", t.vocab_file},
                                   {"--merge-file", t.merge_file},
                                   {"--tokenizer-model", t.model_file},
                                   {"--tokenizer-name-or-path", t.name_or_path}}) {
    add(flag, path.empty() ? "unset" : path);
    if (!path.empty() && file_size_text(path) != "missing") add("size of " + path + " (bytes)", file_size_text(path));
  }
  add("--eod-token", t.eod_token);
  add("--no-special-tokens", on_off(!t.add_special_tokens));
  add("--unk-token", t.unk_token);
  add("--vocab-extra-ids", num_text((int64_t)t.vocab_extra_ids));
  std::string data;
  for (const std::string& p : o.data_path) data += (data.empty() ? "" : " ") + p;
  add("--data-path", data);
  if (o.data_path.size() == 1 || o.data_path.size() % 2 == 0)
    for (const std::string& prefix : data_prefixes(o.data_path))
      for (const char* ext : {".bin", ".idx"})
        if (const std::string size = file_size_text(prefix + ext); size != "missing")
          add("size of " + prefix + ext + " (bytes)", size);
  add("--split", o.split);
  add("--seed", num_text((int64_t)o.seed));

  // ---- batches, iterations, optimizer, schedule ----
  const optim::LrScheduleArgs& l = o.schedule;
  add("--micro-batch-size", num_text((int64_t)o.micro_batch_size));
  add("--global-batch-size", num_text(o.global_batch_size));
  add("--train-iters", optional_text(l.train_iters));
  add("--train-samples", optional_text(l.train_samples));
  add("--optimizer", o.optimizer.kind);
  add("--adam-beta1", num_text(o.optimizer.beta1));
  add("--adam-beta2", num_text(o.optimizer.beta2));
  add("--adam-eps", num_text(o.optimizer.eps));
  add("--sgd-momentum", num_text(o.optimizer.sgd_momentum));
  add("--lamb-all-tensors", on_off(o.optimizer.lamb_all_tensors));
  add("--clip-grad", num_text(o.clip_grad));
  add("--lr", num_text(l.lr));
  add("--min-lr", num_text(l.min_lr));
  add("--lr-warmup-init", num_text(l.lr_warmup_init));
  add("--lr-decay-style", l.lr_decay_style);
  add("--power", num_text(l.lr_decay_power));
  add("--lr-decay-iters", optional_text(l.lr_decay_iters));
  add("--lr-decay-samples", optional_text(l.lr_decay_samples));
  add("--lr-warmup-fraction", optional_text(l.lr_warmup_fraction));
  add("--lr-warmup-iters", num_text(l.lr_warmup_iters));
  add("--lr-warmup-samples", num_text(l.lr_warmup_samples));
  add("--weight-decay", num_text(l.weight_decay));
  add("--start-weight-decay", optional_text(l.start_weight_decay));
  add("--end-weight-decay", optional_text(l.end_weight_decay));
  add("--weight-decay-incr-style", l.weight_decay_incr_style);
  if (const auto& d = l.deepspeed_lr)
    add("the DeepSpeed config's scheduler", d->type + " warmup_min_lr=" + num_text(d->warmup_min_lr) +
                                                " warmup_max_lr=" + num_text(d->warmup_max_lr) +
                                                " warmup_num_steps=" + num_text(d->warmup_num_steps) +
                                                " warmup_type=" + d->warmup_type +
                                                " total_num_steps=" + num_text(d->total_num_steps) +
                                                " warmup_min_ratio=" + num_text(d->warmup_min_ratio) +
                                                " cos_min_ratio=" + num_text(d->cos_min_ratio) +
                                                " optimizer_lr=" + num_text(d->optimizer_lr));
  else
    add("the DeepSpeed config's scheduler", "unset");

  // ---- evaluation, checkpoints, stopping (each a collective at its iterations) ----
  add("--eval-interval", num_text((int64_t)o.eval_interval));
  add("--eval-iters", num_text((int64_t)o.eval_iters));
  add("--save-interval", num_text((int64_t)o.save_interval));
  add("--exit-interval", num_text((int64_t)o.exit_interval));
  add("--exit-duration-in-mins", num_text(o.exit_duration_in_mins));
  add("--skip-train", on_off(o.skip_train));
  add("--print-samples", num_text(o.print_samples));
  add("--load", o.load.empty() ? "unset" : o.load);
  add("--finetune", on_off(o.finetune));
  add("--override-opt_param-scheduler", on_off(o.override_opt_param_scheduler));
  add("--use-checkpoint-opt_param-scheduler", on_off(o.use_checkpoint_opt_param_scheduler));
  add("--no-load-optim", on_off(o.no_load_optim));
  if (!o.load.empty() && !o.finetune) {
    // The iteration a resumed run starts from decides how many steps it runs: ranks that see different
    // checkpoints (a directory that is not shared) would run different numbers of collectives.
    std::ifstream pointer(o.load + "/latest_checkpointed_iteration.txt");
    std::string latest;
    std::getline(pointer, latest);
    latest = python_strip(latest);
    add("--load's latest_checkpointed_iteration.txt", latest.empty() ? "none" : latest);
  }

  // ---- device, precision, parallel layout, recomputation ----
  add("--device", kernels::device_name(o.device));
  const MixedPrecisionOptions& p = o.precision;
  add("--fp16", on_off(p.fp16));
  add("--bf16", on_off(p.bf16));
  add("--loss-scale", num_text(p.loss_scale));
  add("--initial-loss-scale", num_text(p.initial_loss_scale));
  add("--min-loss-scale", num_text(p.min_loss_scale));
  add("--loss-scale-window", num_text((int64_t)p.loss_scale_window));
  add("--hysteresis", num_text((int64_t)p.hysteresis));
  add("--tensor-model-parallel-size", num_text((int64_t)o.tensor_model_parallel_size));
  add("--pipeline-model-parallel-size", num_text((int64_t)o.pipeline_model_parallel_size));
  add("--decoder-first-pipeline-num-layers", num_text((int64_t)o.decoder_first_pipeline_num_layers));
  add("--decoder-last-pipeline-num-layers", num_text((int64_t)o.decoder_last_pipeline_num_layers));
  add("--pipeline-model-parallel-split-rank", num_text((int64_t)o.pipeline_model_parallel_split_rank));
  add("--use-distributed-optimizer", on_off(o.use_distributed_optimizer));
  add("--zero-stage", num_text((int64_t)o.zero_stage));
  add("--ddp-bucket-size", num_text(o.ddp_bucket_size));
  add("--balance-data-parallel", on_off(o.balance_data_parallel));
  add("--balance-interval", num_text(o.balance_interval));
  // Full recomputation repeats a layer's forward, and with it the tensor-parallel collectives inside it.
  add("--recompute-granularity", o.recompute_granularity.empty() ? "unset" : o.recompute_granularity);
  add("--recompute-method", o.recompute_method.empty() ? "unset" : o.recompute_method);
  add("--recompute-num-layers", num_text((int64_t)o.recompute_num_layers));
  return s;
}

std::string settings_text(const std::vector<AgreedSetting>& settings) {
  std::string text;
  for (const AgreedSetting& s : settings) text += escape_field(s.name) + "\t" + escape_field(s.value) + "\n";
  return text;
}

std::string first_difference(const std::string& a, int rank_a, const std::string& b, int rank_b) {
  const auto in_a = parse_settings(a), in_b = parse_settings(b);
  const std::map<std::string, std::string> map_a(in_a.begin(), in_a.end()), map_b(in_b.begin(), in_b.end());
  const std::string ra = "rank " + std::to_string(rank_a), rb = "rank " + std::to_string(rank_b);
  const std::string version = " (another lmforge version?)";
  for (const auto& [name, value] : in_a) {
    const auto it = map_b.find(name);
    if (it == map_b.end())
      return name + " is " + shown_value(value) + " on " + ra + " but not sent by " + rb + version;
    if (it->second != value)
      return name + " is " + shown_value(value) + " on " + ra + " but " + shown_value(it->second) + " on " + rb;
  }
  for (const auto& [name, value] : in_b)
    if (!map_a.count(name))
      return name + " is " + shown_value(value) + " on " + rb + " but not sent by " + ra + version;
  return "";
}

void check_settings_agree(dist::Communicator& world, const TrainOptions& options) {
  const int n = world.size(), me = world.rank();
  if (n == 1) return;
  const std::vector<AgreedSetting> settings = agreed_settings(options);
  std::vector<AgreedSetting> job_part, training_part;
  for (const AgreedSetting& s : settings) (s.job ? job_part : training_part).push_back(s);
  const std::string text = settings_text(settings);

  // 1. A fixed-size header from every rank: row r of an n x kHeader table, zero elsewhere, summed (exact: each
  //    element has one non-zero term, and every value is an integer below 2^53, a digest cut into 16-bit pieces).
  std::vector<double> table((size_t)n * kHeader, 0.0);
  double* row = table.data() + (size_t)me * kHeader;
  row[0] = kFormat;
  const uint64_t job_digest = fnv1a64(settings_text(job_part)), training_digest = fnv1a64(settings_text(training_part));
  for (int k = 0; k < 4; k++) {
    row[1 + k] = (double)((job_digest >> (16 * k)) & 0xffff);
    row[5 + k] = (double)((training_digest >> (16 * k)) & 0xffff);
  }
  row[9] = (double)text.size();
  world.all_reduce_sum(table.data(), table.size());

  auto header = [&](int r) { return table.data() + (size_t)r * kHeader; };
  auto same = [&](int r, size_t from, size_t to) {
    for (size_t k = from; k < to; k++)
      if (header(r)[k] != header(0)[k]) return false;
    return true;
  };
  std::vector<int> differing;
  for (int r = 1; r < n; r++)
    if (!same(r, 0, kHeader)) differing.push_back(r);
  if (differing.empty()) return;

  // 2. Rank 0's text and the first differing rank's, to every rank (lengths from the headers: same on all).
  const int other = differing.front();
  const bool another_job = !same(other, 0, 5);  // its format or job identity differs, not only its training
  std::string text0((size_t)header(0)[9], '\0'), text_other((size_t)header(other)[9], '\0');
  if (me == 0) text0 = text;
  if (me == other) text_other = text;
  world.broadcast(text0.data(), text0.size(), 0);
  world.broadcast(text_other.data(), text_other.size(), other);
  // Every rank has read both texts before any rank ends (a rank that exits closes its connections, and a peer still
  // reading from it would report the lost connection instead of the difference). Failing here changes nothing.
  try {
    world.barrier();
  } catch (const std::exception&) {
  }

  std::string what = first_difference(text0, 0, text_other, other);
  if (what.empty()) what = "rank " + std::to_string(other) + "'s settings digest differs from rank 0's";
  std::string message = "the ranks' settings differ: " + what;
  if (differing.size() > 1)
    message += " (ranks " + differing_list(differing) + " all differ from rank 0)";
  if (another_job)
    message += "; is rank " + std::to_string(other) +
               " from another job at the same rendezvous? Every rank of a job runs the same command with the same "
               "--save";
  else
    message += "; every rank of a job must be given the same training flags (model shape, data, seeds, optimizer, "
               "schedule, precision, parallel layout), or the replicas would differ or the collectives mismatch";
  throw Error(message);
}

}  // namespace lmforge::train
