// defines: make_null_tokenizer(): --tokenizer-type NullTokenizer, Megatron-core's tokenizer for text that is token
//          ids already (its _NullTokenizer): "17 4 256" encodes to [17, 4, 256]; the vocabulary is --vocab-size
//          ids plus one end-of-document id, --vocab-size itself.
#pragma once
#include <cstdint>
#include <memory>

#include "text/tokenizer.h"

namespace lmforge::text {

// Megatron (megatron/training/tokenizer/tokenizer.py, _NullTokenizer): tokenize(text) = [int(x) for x in
// text.split(' ')], detokenize(ids) = ' '.join(str(i) for i in ids), eod = vocab_size, and the size it reports is
// vocab_size + 1 (the end-of-document id included), which is what the dataset's dtype and the model's padded
// vocabulary follow. Python's int() strips whitespace around each piece ("3\n" is 3) and takes a leading '+'.
// Stricter than Megatron where it would write a dataset no model can read: every id must lie in [0, vocab_size]
// (the end-of-document id may be written in the text), and a piece that is not an integer (two spaces in a row, a
// word, an empty text given a space) is an Error naming the piece (prep adds the file and line); Megatron stops at
// such input with a Python traceback. An empty text encodes to no ids (prep's empty document).
// vocab_size in [1, 2^31 - 1) (check_tokenizer_options() says so to users).
std::unique_ptr<Tokenizer> make_null_tokenizer(int64_t vocab_size);

}  // namespace lmforge::text
