// defines: add_electra_flags() — the flags of `lmforge train electra` beyond the common ones (families::FlagGroup::
//          ELECTRA), under google-research/electra's names and defaults
#pragma once
#include <CLI/CLI.hpp>

#include "train/train_options.h"

namespace lmforge::cli {

// --electra-size, --embedding-size, --ffn-hidden-size, --generator-hidden-size, --generator-layers, --disc-weight,
// --mask-prob, --max-predictions-per-seq, --sampling-temperature, --layernorm-epsilon.
void add_electra_flags(CLI::App* cmd, train::TrainOptions& o);

}  // namespace lmforge::cli
