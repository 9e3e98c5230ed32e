// defines: HfSpecialTokens and make_post_processor(): a tokenizer.json post_processor applied to one text, as Hugging
// Face's encode(text, add_special_tokens) applies it (internal to the hf_* files)
//
// Supported: TemplateProcessing (single/pair templates of SpecialToken and Sequence pieces, special tokens of one or
// several ids), BertProcessing, RobertaProcessing (trim_offsets and add_prefix_space change offsets, not ids),
// ByteLevel (offsets only) and Sequence of these. HF's processors map a list of encodings to a list, merged at the
// end: a Template yields one encoding per piece, and Bert/Roberta wrap each encoding of the list (the first as
// cls..sep, the others ..sep or sep..sep), so a Sequence that follows a Template sees several encodings. That is
// evaluated here once, on the symbolic text, giving the layout of special ids around the text's ids.
// Without add_special_tokens HF still runs the processor, minus its special tokens: only a template that repeats
// the sequence ("$A $A") then changes the ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "text/hf_components.h"

namespace lmforge::text::hf {

class HfSpecialTokens {
 public:
  // Ids of `text` wrapped as the post-processor does; appended to `out`. `encode` appends the text's own ids.
  template <class Encode>
  void apply(Encode&& encode, std::vector<int32_t>& out, std::vector<int32_t>& scratch) const {
    if (slots_ == 1) {  // the usual layout (prefix, text, suffix): no copy
      out.insert(out.end(), layout_.begin(), layout_.begin() + slot_at_);
      encode(out);
      out.insert(out.end(), layout_.begin() + slot_at_ + 1, layout_.end());
      return;
    }
    scratch.clear();
    if (slots_ > 0) encode(scratch);
    for (const int32_t id : layout_) {
      if (id == kText) out.insert(out.end(), scratch.begin(), scratch.end());
      else out.push_back(id);
    }
  }
  // Special ids with kText where the text's ids go (tests and diagnostics).
  const std::vector<int32_t>& layout() const { return layout_; }
  // The text's ids unchanged (layout {kText}).
  bool identity() const { return layout_.size() == 1 && slots_ == 1; }
  static constexpr int32_t kText = -1;

 private:
  friend HfSpecialTokens make_post_processor(const simdjson::dom::element&, const std::string&, const Context&, bool);
  std::vector<int32_t> layout_;
  size_t slots_ = 0, slot_at_ = 0;
};

// `e`: the tokenizer.json "post_processor" object. Unsupported types, a Sequence B piece in a single template,
// unknown special tokens, ids out of range: Error naming the type and JSON path ("post_processor.processors[1]").
HfSpecialTokens make_post_processor(const simdjson::dom::element& e, const std::string& path, const Context& cx,
                                    bool add_special_tokens);

}  // namespace lmforge::text::hf
