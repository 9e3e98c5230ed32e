// defines: lmforge::model::stage_init_discards() (what a pipeline stage skips of the whole model's initialisation
//          stream, so that it draws one process's values for the tensors it holds)
#pragma once
#include <cstdint>
#include <vector>

#include "layers/parameter_store.h"

namespace lmforge::model {

// `whole`: the whole model's tensors (a table-only store, never allocated); `stage`: the stage's store, whose tensors
// appear in `whole` under the same names and in the same order (a copy of a shared tensor, such as the last stage's
// tied word table, stands where the original stands). Returns discard_before for ParameterStore::init: the draws
// the whole stream spends on the tensors the stage lacks, before each of its own. Throws std::logic_error when the
// stage's tensors are out of the whole model's order.
std::vector<uint64_t> stage_init_discards(const layers::ParameterStore& whole, const layers::ParameterStore& stage);

}  // namespace lmforge::model
