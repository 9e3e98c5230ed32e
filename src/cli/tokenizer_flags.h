// defines: add_tokenizer_flags(): Megatron's tokenizer flags, shared by every command that tokenizes or decodes
#pragma once
#include <CLI/CLI.hpp>

#include "text/tokenizer_factory.h"

namespace lmforge::cli {

inline void add_tokenizer_flags(CLI::App* command, text::TokenizerOptions& options) {
  command->add_option("--tokenizer-type", options.type,
                      "Tokenizer, by Megatron's name: GPT2BPETokenizer (byte-level BPE, needs --vocab-file and "
                      "--merge-file), BertWordPieceLowerCase or BertWordPieceCase (needs --vocab-file)")
      ->capture_default_str();
  command->add_option("--vocab-file", options.vocab_file,
                      "Vocabulary: GPT-2's vocab.json (encoder.json) or BERT's vocab.txt");
  command->add_option("--merge-file", options.merge_file, "GPT-2 BPE merges (merges.txt / vocab.bpe)");
}

}  // namespace lmforge::cli
