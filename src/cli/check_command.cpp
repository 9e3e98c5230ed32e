// defines: add_check_command(): `lmforge check electra-step`, one fp32 ELECTRA step (no dropout) from given weights,
//          examples and uniform draws, written as losses, gradients and the step's decisions for comparison with a
//          reference implementation
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "checkpoint/safetensors.h"
#include "cli/commands.h"
#include "cli/device_flag.h"
#include "kernels/backend.h"
#include "model/electra.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

struct ElectraStepOptions {
  std::string config, weights, batch, output;
  int cls_id = 101, sep_id = 102, mask_id = 103;
  kernels::Device device = kernels::Device::CPU;
};

std::string read_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot open: " + std::strerror(errno));
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  const bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) throw Error(path + ": read error");
  return s;
}

// The reference step's meta.json: its "config" object (or the top level without one), named as the shared step's.
model::ElectraConfig read_config(const ElectraStepOptions& o, int seq_length) {
  using namespace checkpoint;
  JsonObject top = parse_json_object(read_text(o.config), o.config);
  JsonObject c = top;
  if (auto it = top.find("config"); it != top.end()) {
    const auto* raw = std::get_if<RawJson>(&it->second);
    if (!raw) throw Error(o.config + ": field 'config' is not an object");
    c = parse_json_object(raw->text, o.config + " (config)");
  }
  const std::string& src = o.config;
  model::ElectraConfig cfg;
  cfg.vocab_size = config_positive_int(c, "vocab_size", src);
  cfg.embedding_size = config_positive_int(c, "embedding_size", src);
  cfg.hidden = config_positive_int(c, "hidden_size", src);
  cfg.num_layers = config_positive_int(c, "num_layers", src);
  cfg.heads = config_positive_int(c, "heads", src);
  cfg.ffn_hidden = config_positive_int(c, "intermediate", src);
  cfg.gen_hidden = config_positive_int(c, "gen_hidden", src);
  cfg.gen_layers = config_positive_int(c, "gen_layers", src);
  cfg.gen_heads = config_positive_int(c, "gen_heads", src);
  cfg.gen_ffn_hidden = config_positive_int(c, "gen_intermediate", src);
  cfg.max_positions = config_positive_int(c, "max_position", src);
  cfg.type_vocab_size = config_positive_int(c, "type_vocab", src);
  cfg.layernorm_eps = (float)config_number(c, "eps", 1e-12, src);
  cfg.init_std = (float)config_number(c, "init_range", 0.02, src);
  cfg.mask_prob = config_number(c, "mask_prob", 0.15, src);
  cfg.max_predictions = (int)config_number(c, "max_pred", 0.0, src);
  cfg.disc_weight = config_number(c, "disc_weight", 50.0, src);
  cfg.gen_weight = config_number(c, "gen_weight", 1.0, src);
  cfg.temperature = config_number(c, "temperature", 1.0, src);
  if (c.count("seq_len") && config_int(c, "seq_len", src) != seq_length)
    throw Error(src + ": seq_len " + std::to_string(config_int(c, "seq_len", src)) + " differs from the batch's " +
                std::to_string(seq_length));
  cfg.hidden_dropout = cfg.attention_dropout = 0.0f;  // the reference step computes without dropout
  cfg.tokens = {o.cls_id, o.sep_id, o.mask_id};
  return cfg;
}

// An integer tensor of the batch (I64 or I32) of shape [B, L] as int32.
std::vector<int32_t> read_ids(const checkpoint::SafetensorsFile& f, const std::string& name, int64_t B, int64_t L) {
  const checkpoint::TensorInfo& t = f.at(name);
  if (t.shape != std::vector<int64_t>{B, L})
    throw Error(f.path() + ": tensor '" + name + "' has shape " + checkpoint::shape_string(t.shape) + ", expected " +
                checkpoint::shape_string(std::vector<int64_t>{B, L}));
  const auto bytes = f.bytes(t);
  std::vector<int32_t> out((size_t)(B * L));
  for (size_t i = 0; i < out.size(); i++) {
    int64_t v;
    if (t.dtype == checkpoint::DType::kI64) {
      std::memcpy(&v, bytes.data() + 8 * i, 8);
    } else if (t.dtype == checkpoint::DType::kI32) {
      int32_t w;
      std::memcpy(&w, bytes.data() + 4 * i, 4);
      v = w;
    } else {
      throw Error(f.path() + ": tensor '" + name + "' is " + std::string(checkpoint::dtype_name(t.dtype)) +
                  ", expected I64 or I32");
    }
    if (v < INT32_MIN || v > INT32_MAX)
      throw Error(f.path() + ": tensor '" + name + "' value " + std::to_string(v) + " at " + std::to_string(i) +
                  " does not fit int32");
    out[i] = (int32_t)v;
  }
  return out;
}

// A float64 tensor of the batch of the given shape.
std::vector<double> read_f64(const checkpoint::SafetensorsFile& f, const std::string& name,
                             const std::vector<int64_t>& shape) {
  const checkpoint::TensorInfo& t = f.at(name);
  if (t.shape != shape || t.dtype != checkpoint::DType::kF64)
    throw Error(f.path() + ": tensor '" + name + "' is " + std::string(checkpoint::dtype_name(t.dtype)) + " " +
                checkpoint::shape_string(t.shape) + ", expected F64 " + checkpoint::shape_string(shape));
  std::vector<double> out(t.numel());
  std::memcpy(out.data(), f.bytes(t).data(), out.size() * sizeof(double));
  return out;
}

void run_electra_step(const ElectraStepOptions& o) {
  const checkpoint::SafetensorsFile batch(o.batch);
  const checkpoint::TensorInfo& ids_info = batch.at("input_ids");
  if (ids_info.shape.size() != 2)
    throw Error(o.batch + ": tensor 'input_ids' has shape " + checkpoint::shape_string(ids_info.shape) +
                ", expected [batch, seq_len]");
  const int64_t B = ids_info.shape[0], L = ids_info.shape[1];
  model::ElectraConfig cfg = read_config(o, (int)L);
  const int64_t N = cfg.predictions((int)L), V = cfg.vocab_size;
  const std::vector<int32_t> ids = read_ids(batch, "input_ids", B, L), mask = read_ids(batch, "input_mask", B, L),
                             segments = read_ids(batch, "segment_ids", B, L);
  const std::vector<double> pos_u = read_f64(batch, "pos_u", {B, N}), keep_u = read_f64(batch, "keep_u", {B, N}),
                            gumbel_u = read_f64(batch, "gumbel_u", {B, N, V});

  kernels::Backend& backend = kernels::backend_for(o.device);
  model::Electra electra(cfg, backend);
  // Every weight from the file (converted to fp32), each of the model's tensors present and every file tensor used.
  const checkpoint::SafetensorsFile weights(o.weights);
  std::map<std::string, bool> used;
  for (const auto& t : weights.tensors()) used[t.name] = false;
  std::vector<float> host;
  for (const param::Parameter& p : electra.table()) {
    host.resize(p.numel);
    weights.read_f32(p.name, p.shape, host.data());
    backend.copy_to_device(electra.param(p.name), host.data(), host.size() * sizeof(float));
    used[p.name] = true;
  }
  for (const auto& [name, u] : used)
    if (!u) throw Error(o.weights + ": tensor '" + name + "' is not a parameter of this ELECTRA configuration");
  electra.params_updated();
  electra.zero_grad();

  const model::ElectraInputs in{(int)B, (int)L, ids.data(), mask.data(), segments.data()};
  const model::ElectraLosses losses = electra.forward(in, {pos_u.data(), keep_u.data(), gumbel_u.data()});
  electra.backward(1.0f);

  // The outputs under the reference files' names: losses (F64 scalars), grad.<name> (F32), the step's decisions.
  const model::ElectraStepRecord& r = electra.record();
  std::vector<checkpoint::TensorRef> out;
  std::vector<std::vector<float>> grads;
  grads.reserve(electra.table().size());
  for (const param::Parameter& p : electra.table()) {
    grads.emplace_back(p.numel);
    backend.copy_to_host(grads.back().data(), electra.grad(p.name), grads.back().size() * sizeof(float));
    out.push_back({"grad." + p.name, checkpoint::DType::kF32, p.shape, grads.back().data()});
  }
  out.push_back({"loss", checkpoint::DType::kF64, {}, &losses.total});
  out.push_back({"mlm_loss", checkpoint::DType::kF64, {}, &losses.mlm});
  out.push_back({"disc_loss", checkpoint::DType::kF64, {}, &losses.disc});
  auto widen = [](const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
  const std::vector<int64_t> masked_ids = widen(r.masked.masked_ids), positions = widen(r.masked.positions),
                             labels = widen(r.masked.labels), sampled = widen(r.sampled),
                             fake_ids = widen(r.fake.ids), disc_labels = widen(r.fake.labels);
  const std::vector<double> weights_f64(r.masked.weights.begin(), r.masked.weights.end());
  out.push_back({"masked_ids", checkpoint::DType::kI64, {B, L}, masked_ids.data()});
  out.push_back({"masked_lm_positions", checkpoint::DType::kI64, {B, N}, positions.data()});
  out.push_back({"masked_lm_ids", checkpoint::DType::kI64, {B, N}, labels.data()});
  out.push_back({"masked_lm_weights", checkpoint::DType::kF64, {B, N}, weights_f64.data()});
  out.push_back({"sampled", checkpoint::DType::kI64, {B, N}, sampled.data()});
  out.push_back({"fake_ids", checkpoint::DType::kI64, {B, L}, fake_ids.data()});
  out.push_back({"disc_labels", checkpoint::DType::kI64, {B, L}, disc_labels.data()});
  out.push_back({"disc_logits", checkpoint::DType::kF32, {B, L}, r.disc_logits.data()});
  out.push_back({"gen_logits", checkpoint::DType::kF32, {B, N, V}, electra.generator_logits().data()});
  // Complete under its final name only: written beside it, then renamed.
  const std::string tmp = o.output + ".tmp";
  checkpoint::write_safetensors(tmp, out, {}, true);
  std::error_code ec;
  std::filesystem::rename(tmp, o.output, ec);
  if (ec) throw Error(o.output + ": cannot rename " + tmp + " to it: " + ec.message());
  std::printf("electra-step: loss %.10g (mlm %.10g, disc %.10g), %d positions replaced; wrote %s\n", losses.total,
              losses.mlm, losses.disc, r.fake.replaced, o.output.c_str());
}

}  // namespace

void add_check_command(CLI::App& app) {
  CLI::App* check = app.add_subcommand(
      "check", "Reproduce a reference computation from given inputs and write what lmforge computes, for comparison "
               "with an independent implementation");
  check->require_subcommand(1);
  auto o = std::make_shared<ElectraStepOptions>();
  CLI::App* cmd = check->add_subcommand(
      "electra-step",
      "One ELECTRA pretraining step in fp32 without dropout (electra-reference-notes §2-§3): masking of the batch's "
      "examples with the given uniform draws (pos_u picks each slot's position among the row's candidates, keep_u < "
      "0.85 masks it), the generator's masked-LM loss, Gumbel sampling with gumbel_u, the fake ids and the "
      "discriminator's loss; then the gradients of loss = gen_weight·mlm + disc_weight·disc. Writes loss, mlm_loss, "
      "disc_loss, grad.<name> for every tensor of --weights, and the step's masked_ids, masked_lm_positions, "
      "masked_lm_ids, masked_lm_weights, sampled, fake_ids, disc_labels, disc_logits and gen_logits.");
  cmd->add_option("--config", o->config,
                  "The step's meta.json: its \"config\" object with vocab_size, embedding_size, hidden_size, "
                  "num_layers, heads, intermediate, gen_hidden, gen_layers, gen_heads, gen_intermediate, "
                  "max_position, type_vocab (required) and eps, init_range, mask_prob, max_pred, disc_weight, "
                  "gen_weight, temperature, seq_len (optional)")
      ->required();
  cmd->add_option("--weights", o->weights,
                  "safetensors with every tensor under Hugging Face's ElectraForPreTraining names, the shared "
                  "embeddings once, the generator's own tensors prefixed 'generator.' (any float dtype)")
      ->required();
  cmd->add_option("--batch", o->batch,
                  "safetensors with input_ids, input_mask, segment_ids [B, L] (I64 or I32) and the F64 uniform "
                  "draws pos_u, keep_u [B, N] and gumbel_u [B, N, vocab]")
      ->required();
  cmd->add_option("--output", o->output, "The safetensors file to write (appears only when complete)")->required();
  cmd->add_option("--cls-id", o->cls_id, "Id of [CLS], never masked (bert-base-uncased: 101)")->capture_default_str();
  cmd->add_option("--sep-id", o->sep_id, "Id of [SEP], never masked (bert-base-uncased: 102)")->capture_default_str();
  cmd->add_option("--mask-id", o->mask_id, "Id of [MASK], the masking's replacement (bert-base-uncased: 103)")
      ->capture_default_str();
  add_device_flag(cmd, o->device);
  cmd->callback([o] { run_electra_step(*o); });
}

}  // namespace lmforge::cli
