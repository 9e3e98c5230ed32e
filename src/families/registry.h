// defines: lmforge::families::model_families() (every model family lmforge trains, in `lmforge train --help`
//          order), model_family() (one by name), checkpoint_family() (the family of a checkpoint's config.json)
#pragma once
#include <string>
#include <vector>

#include "families/model_family.h"

namespace lmforge::families {

const std::vector<const ModelFamily*>& model_families();
// The family `lmforge train <name>` trains; lmforge::Error listing the names for any other.
const ModelFamily& model_family(const std::string& name);
// The family whose checkpoints carry config.json model_type `model_type` (ModelFamily::checkpoint_model_types);
// lmforge::Error naming `source` and the known types for any other.
const ModelFamily& checkpoint_family(const std::string& model_type, const std::string& source);

}  // namespace lmforge::families
