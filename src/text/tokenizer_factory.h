// defines: TokenizerOptions and make_tokenizer(): Megatron's --tokenizer-type names to Tokenizer instances
#pragma once
#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace lmforge::text {

struct TokenizerOptions {
  std::string type = "GPT2BPETokenizer";  // GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase,
                                          // PretrainedFromHF, SentencePieceTokenizer,
                                          // GPTSentencePieceTokenizer, Llama2Tokenizer, WordLevel
  std::string vocab_file;                 // vocab.json (GPT-2) or vocab.txt (WordPiece)
  std::string merge_file;                 // merges.txt (GPT-2 only)
  // PretrainedFromHF: a tokenizer.json file or a directory holding one (hf_tokenizer_json.h).
  std::string name_or_path;
  // PretrainedFromHF: the token --append-eod appends; empty: the file's own (see HfTokenizerOptions).
  std::string eod_token;
  // PretrainedFromHF: add the tokenizer.json post-processor's special tokens to every text ([CLS] .. [SEP],
  // <s> .. </s>), as Megatron's tokenizer(text).input_ids does; false: HF's add_special_tokens=False
  // (--no-special-tokens). Other types have Megatron's fixed behaviour and reject false.
  bool add_special_tokens = true;
  // SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer: the SentencePiece .model
  // (--tokenizer-model); see sentencepiece_tokenizer.h.
  std::string model_file;
  // WordLevel: the token every word missing from --vocab-file becomes (--unk-token).
  std::string unk_token = "<unk>";
  int vocab_extra_ids = 0;  // SentencePieceTokenizer, BertWordPiece*: T5's <extra_id_N> sentinels (--vocab-extra-ids)
};

// Unknown type, missing or unreadable files, malformed vocabularies: Error naming the flag, file and line.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options);

}  // namespace lmforge::text
