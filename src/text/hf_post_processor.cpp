// defines: make_post_processor(): tokenizer.json post-processors evaluated on a symbolic single sequence
#include "text/hf_post_processor.h"

#include <unordered_map>

namespace lmforge::text::hf {

namespace {

using simdjson::dom::element;
// One HF Encoding: special ids, and HfSpecialTokens::kText where the text's ids are.
using Encoding = std::vector<int32_t>;

int32_t token_id(const element& v, const std::string& path, const Context& cx) {
  int64_t id;
  if (v.get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX) cx.fail(path, "expected a token id");
  return int32_t(id);
}

// Bert/Roberta's ["[SEP]", 102] pairs: the id.
int32_t pair_id(const element& e, std::string_view key, const std::string& path, const Context& cx) {
  const std::string p = path + "." + std::string(key);
  auto v = opt_field(e, key);
  simdjson::dom::array arr;
  std::string_view name;
  element id;
  if (!v || v->get(arr) != simdjson::SUCCESS || arr.size() != 2 || arr.at(0).get(name) != simdjson::SUCCESS ||
      arr.at(1).get(id) != simdjson::SUCCESS)
    cx.fail(p, "expected [token, id]");
  return token_id(id, p + "[1]", cx);
}

// TemplateProcessing::process_encodings: one encoding per template piece; `single` for one encoding, `pair` for
// two (HF has no template for more and panics).
void apply_template(const element& e, const std::string& path, const Context& cx, bool add_special_tokens,
                    std::vector<Encoding>& encs) {
  if (encs.size() > 2) cx.fail(path, "TemplateProcessing after a processor that produced more than two sequences");
  const char* key = encs.size() == 1 ? "single" : "pair";
  const std::string tpath = path + "." + key;
  std::unordered_map<std::string, Encoding> specials;
  if (auto st = opt_field(e, "special_tokens")) {
    simdjson::dom::object obj;
    if (st->get(obj) != simdjson::SUCCESS) cx.fail(path + ".special_tokens", "expected an object");
    for (auto [name, tok] : obj) {
      const std::string p = path + ".special_tokens[\"" + std::string(name) + "\"]";
      Encoding ids;
      size_t i = 0;
      for (element id : get_array(tok, "ids", p, cx)) ids.push_back(token_id(id, p + ".ids[" + std::to_string(i++) + "]", cx));
      specials[std::string(name)] = std::move(ids);
    }
  }
  std::vector<Encoding> out;
  size_t i = 0;
  for (element piece : get_array(e, key, path, cx)) {
    const std::string p = tpath + "[" + std::to_string(i++) + "]";
    if (auto s = opt_field(piece, "SpecialToken")) {
      const std::string name = get_string(*s, "id", p + ".SpecialToken", cx);
      auto it = specials.find(name);
      if (it == specials.end()) cx.fail(p + ".SpecialToken.id", "\"" + name + "\" is not in special_tokens");
      if (add_special_tokens) out.push_back(it->second);
    } else if (auto q = opt_field(piece, "Sequence")) {
      const std::string id = get_string(*q, "id", p + ".Sequence", cx);
      if (id != "A" && id != "B") cx.fail(p + ".Sequence.id", "expected \"A\" or \"B\"");
      const size_t which = id == "A" ? 0 : 1;
      if (which >= encs.size()) cx.fail(p, "sequence B in a template for a single sequence");
      out.push_back(encs[which]);
    } else {
      cx.fail(p, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  encs = std::move(out);
}

// Runs processor `e` on the list of encodings, as its process_encodings(add_special_tokens).
void apply(const element& e, const std::string& path, const Context& cx, bool add_special_tokens,
           std::vector<Encoding>& encs) {
  const std::string type = get_type(e, path, cx);
  if (type == "ByteLevel") return;  // trims offsets only
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    // The first encoding becomes cls A sep; each later one A sep (Bert) or sep A sep (Roberta).
    const int32_t cls = pair_id(e, "cls", path, cx), sep = pair_id(e, "sep", path, cx);
    if (!add_special_tokens) return;
    for (size_t i = 0; i < encs.size(); ++i) {
      Encoding w;
      w.reserve(encs[i].size() + 2);
      if (i == 0) w.push_back(cls);
      else if (type == "RobertaProcessing") w.push_back(sep);
      w.insert(w.end(), encs[i].begin(), encs[i].end());
      w.push_back(sep);
      encs[i] = std::move(w);
    }
    return;
  }
  if (type == "TemplateProcessing") {
    apply_template(e, path, cx, add_special_tokens, encs);
    return;
  }
  if (type == "Sequence") {
    size_t i = 0;
    for (element p : get_array(e, "processors", path, cx)) apply(p, path + ".processors[" + std::to_string(i++) + "]", cx, add_special_tokens, encs);
    return;
  }
  cx.fail(path, "unsupported post-processor type \"" + type +
                    "\" (supported: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
}

}  // namespace

HfSpecialTokens make_post_processor(const element& e, const std::string& path, const Context& cx,
                                    bool add_special_tokens) {
  std::vector<Encoding> encs{{HfSpecialTokens::kText}};
  apply(e, path, cx, add_special_tokens, encs);
  HfSpecialTokens s;
  for (const Encoding& enc : encs) s.layout_.insert(s.layout_.end(), enc.begin(), enc.end());
  for (size_t i = 0; i < s.layout_.size(); ++i) {
    if (s.layout_[i] != HfSpecialTokens::kText) continue;
    if (s.slots_++ == 0) s.slot_at_ = i;
  }
  return s;
}

}  // namespace lmforge::text::hf
