// defines: make_tokenizer(): Megatron's --tokenizer-type names to Tokenizer instances
#include "text/tokenizer_factory.h"

#include "text/gpt2_bpe.h"
#include "util/error.h"

namespace lmforge::text {

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options) {
  if (options.type == "GPT2BPETokenizer") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type GPT2BPETokenizer needs --vocab-file (vocab.json)");
    if (options.merge_file.empty()) throw Error("--tokenizer-type GPT2BPETokenizer needs --merge-file (merges.txt)");
    return std::make_unique<Gpt2BpeTokenizer>(options.vocab_file, options.merge_file);
  }
  throw Error("--tokenizer-type: unknown tokenizer \"" + options.type + "\"; valid types: GPT2BPETokenizer");
}

}  // namespace lmforge::text
