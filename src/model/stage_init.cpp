// defines: stage_init_discards
#include "model/stage_init.h"

#include <stdexcept>

namespace lmforge::model {

std::vector<uint64_t> stage_init_discards(const layers::ParameterStore& whole, const layers::ParameterStore& stage) {
  const param::ParamTable& mine = stage.table();
  std::vector<uint64_t> discard(mine.size(), 0);
  uint64_t skipped = 0;
  size_t next = 0;
  for (size_t i = 0; i < whole.table().size(); i++) {
    if (next < mine.size() && whole.table()[i].name == mine[next].name) {
      discard[next++] = skipped;
      skipped = 0;
    } else {
      skipped += whole.stream_draws(i);
    }
  }
  if (next != mine.size())
    throw std::logic_error("pipeline stage: tensor " + mine[next].name + " is out of the whole model's order");
  return discard;
}

}  // namespace lmforge::model
