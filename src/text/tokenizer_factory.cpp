// defines: make_tokenizer(): Megatron's --tokenizer-type names to Tokenizer instances
#include "text/tokenizer_factory.h"

#include "text/bert_wordpiece.h"
#include "text/gpt2_bpe.h"
#include "text/hf_tokenizer_json.h"
#include "text/sentencepiece_tokenizer.h"
#include "text/word_level.h"
#include "util/error.h"

namespace lmforge::text {

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options) {
  if (!options.add_special_tokens && options.type != "PretrainedFromHF")
    throw Error("--no-special-tokens applies to --tokenizer-type PretrainedFromHF only");
  // Megatron appends <extra_id_N> to its BERT and SentencePiece vocabularies (GPT-2 ignores the flag); elsewhere the
  // flag is refused rather than silently changing nothing.
  if (options.vocab_extra_ids < 0) throw Error("--vocab-extra-ids must be >= 0");
  if (options.vocab_extra_ids != 0 && options.type != "SentencePieceTokenizer" &&
      options.type != "BertWordPieceLowerCase" && options.type != "BertWordPieceCase")
    throw Error("--vocab-extra-ids applies to --tokenizer-type SentencePieceTokenizer, BertWordPieceLowerCase and "
                "BertWordPieceCase only");
  if (options.type == "GPT2BPETokenizer") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type GPT2BPETokenizer needs --vocab-file (vocab.json)");
    if (options.merge_file.empty()) throw Error("--tokenizer-type GPT2BPETokenizer needs --merge-file (merges.txt)");
    return std::make_unique<Gpt2BpeTokenizer>(options.vocab_file, options.merge_file);
  }
  // Megatron's type names mean Megatron's (Google BERT's) behaviour, so its datasets come out byte for byte.
  if (options.type == "BertWordPieceLowerCase" || options.type == "BertWordPieceCase") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type " + options.type + " needs --vocab-file (vocab.txt)");
    return make_bert_wordpiece_tokenizer(options.vocab_file, options.type == "BertWordPieceLowerCase",
                                         WordPieceFlavor::kMegatron, options.vocab_extra_ids);
  }
  // Any Hugging Face tokenizer.json, ids as HF's encode(text, add_special_tokens) (Megatron: True).
  if (options.type == "PretrainedFromHF") {
    if (options.name_or_path.empty())
      throw Error("--tokenizer-type PretrainedFromHF needs --tokenizer-name-or-path (a tokenizer.json file or a "
                  "directory holding one; hub names cannot be downloaded)");
    HfTokenizerOptions hf;
    hf.eod_token = options.eod_token;
    hf.add_special_tokens = options.add_special_tokens;
    return load_hf_tokenizer(options.name_or_path, hf);
  }
  // SentencePiece .model types, as Megatron's three wrappers of it (sentencepiece_tokenizer.h).
  if (options.type == "SentencePieceTokenizer" || options.type == "GPTSentencePieceTokenizer" ||
      options.type == "Llama2Tokenizer") {
    if (options.model_file.empty())
      throw Error("--tokenizer-type " + options.type + " needs --tokenizer-model (a SentencePiece .model file)");
    if (!options.eod_token.empty())
      throw Error("--eod-token applies to --tokenizer-type PretrainedFromHF and WordLevel only");
    SentencePieceFlavor flavor = options.type == "SentencePieceTokenizer"      ? SentencePieceFlavor::kMegatron
                                 : options.type == "GPTSentencePieceTokenizer" ? SentencePieceFlavor::kGpt
                                                                               : SentencePieceFlavor::kLlama2;
    return make_sentencepiece_tokenizer(options.model_file, flavor, options.vocab_extra_ids);
  }
  // Whitespace words looked up in a vocab.json (the Megatron v1.1.5 project's word-level preprocessor).
  if (options.type == "WordLevel") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type WordLevel needs --vocab-file (vocab.json)");
    return make_word_level_tokenizer(options.vocab_file, options.unk_token, options.eod_token);
  }
  if (!options.eod_token.empty())
    throw Error("--eod-token applies to --tokenizer-type PretrainedFromHF and WordLevel only");
  throw Error("--tokenizer-type: unknown tokenizer \"" + options.type +
              "\"; valid types: GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase, PretrainedFromHF, "
              "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, WordLevel");
}

}  // namespace lmforge::text
