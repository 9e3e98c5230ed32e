// defines: libFuzzer target for the config.json readers of checkpoints (GPT-2's GPT2Config, BERT's
//          BertConfig/MegatronBertConfig and Google's bert_config.json, lmforge's Megatron T5): each must refuse
//          malformed JSON, wrong types and out-of-range sizes with an Error (no truncation, no overflow — UBSan
//          makes a signed overflow in the vocabulary padding fatal), and a config it accepts must survive a round
//          trip: writing it and reading it back gives the same config, written identically.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "families/bert/bert_hf_config.h"
#include "families/gpt/gpt_hf_config.h"
#include "families/t5/t5_hf_config.h"
#include "util/error.h"

namespace {

// read(text) -> config; write(config) -> text. The first accepted text's config must be a fixed point.
template <class Read, class Write>
void check_round_trip(const std::string& text, Read read, Write write) {
  std::string written;
  try {
    written = write(read(text, "config.json"));
  } catch (const lmforge::Error&) {
    return;  // refused with a reason: fine
  }
  // What lmforge writes it must read back, to the same config.
  if (write(read(written, "written config.json")) != written) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lmforge::train;
  const std::string text(reinterpret_cast<const char*>(data), size);
  check_round_trip(text, gpt_config_from_json, gpt_config_json);
  check_round_trip(text, bert_config_from_json, bert_config_json);
  check_round_trip(text, t5_config_from_json, t5_config_json);
  return 0;
}
