// defines: add_tokenizer_flags(): Megatron's tokenizer flags, shared by every command that tokenizes or decodes
#pragma once
#include <CLI/CLI.hpp>

#include "cli/flags/value_range.h"
#include "text/tokenizer_factory.h"

namespace lmforge::cli {

inline void add_tokenizer_flags(CLI::App* command, text::TokenizerOptions& options) {
  command->add_option("--tokenizer-type", options.type,
                      "Tokenizer, by Megatron's name: GPT2BPETokenizer (byte-level BPE, needs --vocab-file and "
                      "--merge-file), BertWordPieceLowerCase or BertWordPieceCase (needs --vocab-file), "
                      "PretrainedFromHF (any tokenizer.json, needs --tokenizer-name-or-path), SentencePieceTokenizer, "
                      "GPTSentencePieceTokenizer or Llama2Tokenizer (a SentencePiece .model, needs --tokenizer-model), "
                      "WordLevel (whitespace-separated words looked up in a vocab.json, needs --vocab-file; see "
                      "--unk-token, --eod-token), NullTokenizer (text that is token ids already, \"17 4 256\", needs "
                      "--vocab-size)")
      ->capture_default_str();
  command->add_option("--vocab-file", options.vocab_file,
                      "Vocabulary: GPT-2's vocab.json (encoder.json), BERT's vocab.txt or WordLevel's vocab.json");
  command->add_option("--vocab-size", options.vocab_size,
                      "NullTokenizer: the number of token ids before the end-of-document id (Megatron's \"size of "
                      "vocab before EOD or padding\"). Text is integers in [0, vocab-size] separated by single "
                      "spaces; the end-of-document id (--append-eod) is vocab-size itself, so the vocabulary has "
                      "vocab-size + 1 ids before --make-vocab-size-divisible-by pads it")
      ->check(at_least(1));
  command->add_option("--merge-file", options.merge_file, "GPT-2 BPE merges (merges.txt / vocab.bpe)");
  command->add_option("--tokenizer-name-or-path", options.name_or_path,
                      "PretrainedFromHF: a Hugging Face tokenizer.json, or a local directory holding one (and "
                      "optionally tokenizer_config.json, whose eos_token then names the end-of-document token), or "
                      "a hub name (t5-small, org/name) found offline in the local Hugging Face cache as HF's "
                      "libraries find it: $HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, "
                      "~/.cache/huggingface/hub, models--<name, / as -->/snapshots/<refs/main>/ (nothing is "
                      "downloaded; when absent the error lists the places looked in). "
                      "Ids equal HF's tokenizer(text).input_ids, as Megatron's PretrainedFromHF tokenizer: added "
                      "tokens written in the text are matched, and the file's post_processor adds its special tokens "
                      "to every text (BERT [CLS] .. [SEP], RoBERTa <s> .. </s>, Llama <s> .., T5 .. </s>; even to an "
                      "empty text); --append-eod's token follows them. See --no-special-tokens");
  command->add_flag_callback("--no-special-tokens", [&options] { options.add_special_tokens = false; },
                             "PretrainedFromHF: do not apply the tokenizer.json post_processor (HF's "
                             "encode(text, add_special_tokens=False)): no [CLS]/[SEP]/<s>/</s> around each text");
  command->add_option("--tokenizer-model", options.model_file,
                      "SentencePiece .model for SentencePieceTokenizer (Megatron's: <CLS> <SEP> <EOD> <MASK> and the "
                      "model's pad/bos/eos pieces written in the text are matched as special tokens, added after the "
                      "pieces when missing; end of document <EOD>), GPTSentencePieceTokenizer (plain spm encoding; "
                      "end of document the model's eos, </s>) or Llama2Tokenizer (as GPT, with bos before every "
                      "sentence). No bos/eos is added otherwise, as Megatron's preprocess");
  command->add_option("--vocab-extra-ids", options.vocab_extra_ids,
                      "SentencePieceTokenizer, BertWordPieceLowerCase, BertWordPieceCase: number of T5 sentinel tokens "
                      "<extra_id_0>.. added to the vocabulary (for BERT vocabularies after [BOS] and [EOS], as Megatron: "
                      "bert-base-uncased's <extra_id_0> is 30524); text never encodes to them")
      ->check(at_least(0));
  command->add_option("--eod-token", options.eod_token,
                      "PretrainedFromHF: the token --append-eod appends (default: tokenizer_config.json's eos_token, "
                      "else the first of <|endoftext|>, </s>, <|end_of_text|>, <eos>, <|eos|>, [EOS] in the file); "
                      "WordLevel: the same, default <|endoftext|>");
}

}  // namespace lmforge::cli
