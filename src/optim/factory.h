// defines: lmforge::optim::OptimizerConfig (the trainer's --optimizer flags), validate_optimizer_config(),
//          make_optimizer()
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace lmforge::optim {

// What `lmforge train gpt` takes under Megatron's names (--optimizer, --adam-*, --sgd-momentum) plus
// --lamb-all-tensors. Weight decay and the learning rate come from the schedule at every step.
struct OptimizerConfig {
  std::string kind = "adam";      // --optimizer: adam (torch AdamW, Megatron's default), lamb (apex FusedLAMB), sgd
  double beta1 = 0.9;             // --adam-beta1 (adam and lamb)
  double beta2 = 0.999;           // --adam-beta2 (adam and lamb)
  double eps = 1e-8;              // --adam-eps (adam and lamb; apex FusedLAMB's own default would be 1e-6)
  double sgd_momentum = 0.9;      // --sgd-momentum (sgd only)
  bool lamb_all_tensors = false;  // --lamb-all-tensors: apex's use_nvlamb (lamb only)
};

// Throws lmforge::Error naming the flag: unknown --optimizer, betas outside [0, 1), eps <= 0, negative momentum,
// --lamb-all-tensors without --optimizer lamb (it would change nothing).
void validate_optimizer_config(const OptimizerConfig& config);

// The optimizer of config.kind over the slice [shard_begin, shard_end) of the spans' flat index space.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::vector<ParamSpan> params,
                                          size_t shard_begin = 0, size_t shard_end = Optimizer::kAll);

}  // namespace lmforge::optim
