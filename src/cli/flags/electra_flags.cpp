// defines: add_electra_flags()
#include "cli/flags/electra_flags.h"

#include "cli/flags/value_range.h"

namespace lmforge::cli {

void add_electra_flags(CLI::App* cmd, train::TrainOptions& o) {
  cmd->add_option("--electra-size", o.electra_size,
                  "ELECTRA's model size (configure_pretraining.py / the paper's Table 6), the default of every "
                  "setting below not given: small = 12 layers, hidden 256, 4 heads, FFN 1024, embedding size 128, "
                  "generator 1/4, lr 5e-4, global batch 128; base = 12, 768, 12, 3072, 768, generator 1/3 "
                  "(0.33333), lr 2e-4, batch 256; large = 24, 1024, 16, 4096, 1024, generator 1/4, lr 2e-4, batch "
                  "2048, --mask-prob 0.25. (The FFN and embedding size follow the preset only when --hidden-size "
                  "is the preset's; otherwise 4 x hidden and hidden.) --seq-length is always given (ELECTRA: 128 "
                  "small, 512 base and large)")
      ->check(CLI::IsMember({"small", "base", "large"}))
      ->capture_default_str();
  cmd->add_option("--embedding-size", o.embedding_size,
                  "Width E of the shared word/position/type embeddings and their LayerNorm; a network whose width "
                  "differs projects E to it (electra.embeddings_project) (default: the preset's, else --hidden-size)")
      ->check(at_least(1));
  cmd->add_option("--ffn-hidden-size", o.ffn_hidden_size,
                  "The discriminator's MLP width (default: the preset's, else 4 x --hidden-size); the generator's is "
                  "4 x its width, as get_generator_config")
      ->check(at_least(1));
  cmd->add_option("--generator-hidden-size", o.generator_hidden_size,
                  "The generator's width: a fraction (<= 1) of --hidden-size, rounded half to even as Python's "
                  "round(), or a width (> 1); its heads are max(1, width / 64) and its FFN 4 x width (default: "
                  "0.25 as ELECTRA; base 0.33333)")
      ->check(greater_than(0));
  cmd->add_option("--generator-layers", o.generator_layers,
                  "The generator's layers: a fraction (<= 1) of --num-layers or a count (> 1)")
      ->check(greater_than(0))
      ->capture_default_str();
  cmd->add_option("--disc-weight", o.disc_weight,
                  "Weight of the discriminator's loss: loss = mlm + disc-weight x disc (ELECTRA's disc_weight)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--mask-prob", o.electra_mask_prob,
                  "Share of each example's tokens the generator predicts (pretrain_helpers.mask: max(1, min(N, "
                  "round(tokens x mask-prob))) positions drawn with replacement among the real tokens other than "
                  "[CLS]/[SEP]/[MASK], 85% of them set to [MASK], the rest left as they are) (default: 0.15; large "
                  "0.25)")
      ->check(in_range(0, 1));
  cmd->add_option("--max-predictions-per-seq", o.max_predictions_per_seq,
                  "N, the prediction slots per example (0: ELECTRA's int((mask-prob + 0.005) x seq-length), 19 at "
                  "128 and 79 at 512)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--sampling-temperature", o.sampling_temperature,
                  "Temperature T of the replacements' Gumbel sampling: argmax(logits / T + Gumbel noise)")
      ->check(greater_than(0))
      ->capture_default_str();
  cmd->add_option("--layernorm-epsilon", o.layernorm_epsilon,
                  "Epsilon of every LayerNorm (default: 1e-12, ELECTRA's)")
      ->check(greater_than(0));
}

}  // namespace lmforge::cli
