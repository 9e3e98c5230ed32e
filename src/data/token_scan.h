// defines: lmforge::data::max_token_id() (the largest token id a dataset's .bin holds)
#pragma once
#include <cstdint>
#include <string>

namespace lmforge::data {

// Largest token id stored in <prefix>.bin, read through a memory map (OpenMP-parallel max over the tokens; -1 for
// an empty dataset). The trainer checks it against the vocabulary before building any index, so a dataset made with
// another tokenizer fails at once. Errors name the file (missing index, a dtype that cannot hold ids, a .bin whose
// size is not a whole number of tokens).
int64_t max_token_id(const std::string& prefix);

}  // namespace lmforge::data
