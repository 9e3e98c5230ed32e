// defines: model_families, model_family, checkpoint_family — the list of model families (one line each)
#include "families/registry.h"

#include "util/error.h"

namespace lmforge::families {

// Each family's entry, defined in its folder (families/<name>/<name>_family.cpp, a stateless ModelFamily). A new
// family is that folder (compiled into the train library by src/CMakeLists.txt's glob) plus its declaration here
// and its place in the list, which is the order of `lmforge train --help`.
const ModelFamily& gpt_family();
const ModelFamily& bert_family();
const ModelFamily& t5_family();
const ModelFamily& electra_family();

const std::vector<const ModelFamily*>& model_families() {
  // Immutable after its first use (a function-local constant, not a mutable global).
  static const std::vector<const ModelFamily*> families = {&gpt_family(), &bert_family(), &t5_family(),
                                                              &electra_family()};
  return families;
}

namespace {

std::string family_names() {
  std::string names;
  for (const ModelFamily* f : model_families()) names += std::string(names.empty() ? "" : "|") + f->name();
  return names;
}

}  // namespace

const ModelFamily& model_family(const std::string& name) {
  for (const ModelFamily* f : model_families())
    if (name == f->name()) return *f;
  throw Error("unknown model type '" + name + "' (lmforge train " + family_names() + ")");
}

const ModelFamily& checkpoint_family(const std::string& model_type, const std::string& source) {
  std::string known;
  for (const ModelFamily* f : model_families())
    for (const std::string& type : f->checkpoint_model_types()) {
      if (type == model_type) return *f;
      if (!type.empty()) known += (known.empty() ? "\"" : ", \"") + type + "\"";
    }
  throw Error(source + ": model_type \"" + model_type + "\" is not a model lmforge knows (" + known + ")");
}

}  // namespace lmforge::families
