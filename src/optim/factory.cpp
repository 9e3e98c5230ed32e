// defines: validate_optimizer_config(), make_optimizer()
#include "optim/factory.h"

#include <cmath>

#include "optim/adamw.h"
#include "optim/lamb.h"
#include "optim/sgd.h"
#include "util/error.h"

namespace lmforge::optim {

void validate_optimizer_config(const OptimizerConfig& c) {
  if (c.kind != "adam" && c.kind != "lamb" && c.kind != "sgd")
    throw Error("--optimizer must be adam, lamb or sgd (got '" + c.kind + "')");
  if (!(c.beta1 >= 0.0 && c.beta1 < 1.0)) throw Error("--adam-beta1 must be in [0, 1)");
  if (!(c.beta2 >= 0.0 && c.beta2 < 1.0)) throw Error("--adam-beta2 must be in [0, 1)");
  if (!(c.eps > 0.0) || !std::isfinite(c.eps)) throw Error("--adam-eps must be > 0");
  if (!(c.sgd_momentum >= 0.0) || !std::isfinite(c.sgd_momentum)) throw Error("--sgd-momentum must be >= 0");
  if (c.lamb_all_tensors && c.kind != "lamb")
    throw Error("--lamb-all-tensors only applies to --optimizer lamb (this run uses --optimizer " + c.kind + ")");
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, std::vector<ParamSpan> params,
                                          size_t shard_begin, size_t shard_end) {
  validate_optimizer_config(c);
  if (c.kind == "lamb") {
    LambConfig l;
    l.beta1 = c.beta1;
    l.beta2 = c.beta2;
    l.eps = c.eps;
    l.use_nvlamb = c.lamb_all_tensors;
    return std::make_unique<Lamb>(std::move(params), l, shard_begin, shard_end);
  }
  if (c.kind == "sgd") return std::make_unique<Sgd>(std::move(params), SgdConfig{c.sgd_momentum}, shard_begin, shard_end);
  return std::make_unique<AdamW>(std::move(params), AdamWConfig{c.beta1, c.beta2, c.eps}, shard_begin, shard_end);
}

}  // namespace lmforge::optim
