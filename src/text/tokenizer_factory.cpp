// defines: make_tokenizer(): Megatron's --tokenizer-type names to Tokenizer instances
#include "text/tokenizer_factory.h"

#include "text/bert_wordpiece.h"
#include "text/gpt2_bpe.h"
#include "util/error.h"

namespace lmforge::text {

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options) {
  if (options.type == "GPT2BPETokenizer") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type GPT2BPETokenizer needs --vocab-file (vocab.json)");
    if (options.merge_file.empty()) throw Error("--tokenizer-type GPT2BPETokenizer needs --merge-file (merges.txt)");
    return std::make_unique<Gpt2BpeTokenizer>(options.vocab_file, options.merge_file);
  }
  // Megatron's type names mean Megatron's (Google BERT's) behaviour, so its datasets come out byte for byte.
  if (options.type == "BertWordPieceLowerCase" || options.type == "BertWordPieceCase") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type " + options.type + " needs --vocab-file (vocab.txt)");
    return make_bert_wordpiece_tokenizer(options.vocab_file, options.type == "BertWordPieceLowerCase",
                                         WordPieceFlavor::kMegatron);
  }
  throw Error("--tokenizer-type: unknown tokenizer \"" + options.type +
              "\"; valid types: GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase");
}

}  // namespace lmforge::text
