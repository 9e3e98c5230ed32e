// defines: TokenizerOptions and make_tokenizer(): Megatron's --tokenizer-type names to Tokenizer instances;
//          find_hf_tokenizer(): a Hugging Face hub name found in the local Hugging Face cache (no download)
#pragma once
#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace lmforge::text {

struct TokenizerOptions {
  std::string type = "GPT2BPETokenizer";  // GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase,
                                          // PretrainedFromHF, SentencePieceTokenizer,
                                          // GPTSentencePieceTokenizer, Llama2Tokenizer, WordLevel,
                                          // NullTokenizer
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
  // NullTokenizer: ids before the end-of-document id (--vocab-size; Megatron's "size of vocab before EOD or
  // padding"); 0: not given. Other types reject it (their vocabulary file decides the size).
  int64_t vocab_size = 0;
  int vocab_extra_ids = 0;  // SentencePieceTokenizer, BertWordPiece*: T5's <extra_id_N> sentinels (--vocab-extra-ids)
  // GPT2BPETokenizer for a caller that needs only the vocabulary size and the end-of-text id (training and
  // evaluation on data tokenized already): a vocab.json + merges pair that a byte-level BPE cannot use (the Megatron
  // v1.1.5 projects' word-level vocab.json with a subword merges file) is then accepted with a notice, as Megatron
  // v1.1.5 reads only len(vocab) and vocab["<|endoftext|>"] from it; the tokenizer refuses to encode or decode.
  // false (prep, generate): such a vocabulary is an error saying why the command needs a usable tokenizer.
  bool size_and_eod_only = false;
};

// The flags' checks alone, before any file is read: an unknown type, a flag the type does not take, a file or size
// the type needs and was not given (Error naming the flags). Commands call it before any work; make_tokenizer()
// calls it first.
void check_tokenizer_options(const TokenizerOptions& options);

// Unknown type, missing or unreadable files, malformed vocabularies: Error naming the flag, file and line.
// The notice of an accepted size-and-eod-only vocabulary goes to std::cerr.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options);

// PretrainedFromHF's --tokenizer-name-or-path: an existing file or directory as it is; otherwise a hub name
// ("t5-small", "org/name") looked up as Hugging Face's libraries find it offline:
// <cache>/models--<name, / as -->/snapshots/<the revision in refs/main>/ holding tokenizer.json, where <cache> is
// each of $HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub and $HOME/.cache/huggingface/hub that is set
// (the first holding it wins). Returns the snapshot directory; Error listing every place looked in when absent.
std::string find_hf_tokenizer(const std::string& name_or_path);

}  // namespace lmforge::text
