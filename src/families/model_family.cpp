// defines: ModelFamily::apply_config_file (the default: no model config file)
#include "families/model_family.h"

#include "util/error.h"

namespace lmforge::families {

std::string ModelFamily::apply_config_file(train::TrainOptions& options) const {
  if (!options.bert_config_file.empty())
    throw Error(std::string("--bert-config-file: lmforge train ") + name() + " takes no model config file");
  return "";
}

}  // namespace lmforge::families
