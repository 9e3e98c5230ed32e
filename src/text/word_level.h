// defines: make_word_level_tokenizer(): --tokenizer-type WordLevel, the word-level lookup of the Megatron v1.1.5
//          project's own preprocessor: Python's str.split() of the text, each token looked up in a vocab.json,
//          the unknown-word token for the rest.
#pragma once
#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace lmforge::text {

// vocab_file: a JSON object of token -> id (json.load: a repeated key keeps its last id). unk_token must be in it
// (its id is every unknown word's); eod_token, if not empty, must be too (the id --append-eod appends; empty:
// <|endoftext|> if the vocabulary has it, else none). Errors name
// the file and the missing token or the reason the JSON was refused.
std::unique_ptr<Tokenizer> make_word_level_tokenizer(const std::string& vocab_file, const std::string& unk_token,
                                                     const std::string& eod_token);

}  // namespace lmforge::text
