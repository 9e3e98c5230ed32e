// defines: hf_continuing_order(): the order in which a Hugging Face WordPiece vocabulary numbered its "##c" symbols
//          (random per HF process), read back from its vocab.txt so that lmforge can replay that run
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lmforge::tokenizer_train {

// HF's vocab.txt holds the specials, the alphabet (`alphabet_end` = their count), then the "##c" block: "##" and
// one character each, ended by the first merged token. Returns those characters' code points in id order.
inline std::vector<uint32_t> hf_continuing_order(const std::vector<std::string>& tokens, size_t alphabet_end) {
  std::vector<uint32_t> order;
  for (size_t id = alphabet_end; id < tokens.size(); ++id) {
    const std::string& t = tokens[id];
    if (t.size() < 3 || t.compare(0, 2, "##") != 0) break;
    const uint8_t b = uint8_t(t[2]);
    const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    if (2 + len != t.size()) break;  // "##ab": a merge, the block has ended
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (uint8_t(t[2 + k]) & 0x3F);
    order.push_back(cp);
  }
  return order;
}

}  // namespace lmforge::tokenizer_train
