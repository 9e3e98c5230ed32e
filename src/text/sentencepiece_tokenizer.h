// defines: make_sentencepiece_tokenizer(): Megatron's SentencePiece tokenizer types on Debian's libsentencepiece
//
// Megatron (M23 megatron/tokenizer/tokenizer.py) has three tokenizer types over a SentencePiece .model, and
// preprocess_data.py calls tokenizer.tokenize(text) on each sentence; the three differ as follows:
//   | --tokenizer-type        | ids of a text                                   | vocab_size            | eod   |
//   | SentencePieceTokenizer  | special tokens found in the text (below) are     | pieces + the specials | <EOD> |
//   |                         | matched literally, the rest spm-encoded          | not already pieces    |       |
//   | GPTSentencePieceTokenizer | spm encode only (no BOS/EOS)                   | pieces                | eos   |
//   | Llama2Tokenizer         | BOS, then spm encode (BOS before every sentence) | pieces                | eos   |
// SentencePieceTokenizer's special-token table, in Megatron's order: <CLS>, <SEP>, <EOD>, <MASK>, then the
// model's pad, bos and eos pieces (<PAD>, <BOS>, <EOS> when the model has no such id, e.g. pad = -1), then
// <extra_id_0> .. <extra_id_{N-1}> for --vocab-extra-ids N (T5's sentinels). A token that is already a piece keeps
// the piece's id; the others get ids from the piece count up, in that order. tokenize() repeatedly finds the
// earliest occurrence of any special token in the rest of the text (ties: the earlier one in the table), encodes
// the text before it with spm and appends the special's id. So with a default spm model "<s>" and "</s>" written in
// the text become the bos/eos ids, and "<EOD>" the end-of-document id. <unk> is not in the table.
// spm encoding itself (normalization, whitespace "▁", unigram/BPE, byte fallback) is libsentencepiece's own, so
// ids equal spm_encode's and Python sentencepiece's; Megatron never asks spm to add BOS/EOS (encode_as_ids).
// decode(): GPT/Llama2 types spm-decode (DecodeIds); SentencePieceTokenizer as Megatron's detokenize: special ids
// are written as their token with a space before and after, the runs between them spm-decoded.
// Thread-safety: SentencePieceProcessor::Encode is const, so one processor is shared and encoders hold nothing.
#pragma once
#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace lmforge::text {

enum class SentencePieceFlavor { kMegatron, kGpt, kLlama2 };

// `model_file`: a SentencePiece ModelProto (.model). `vocab_extra_ids`: kMegatron only (Error otherwise when > 0).
// Unreadable or malformed model: Error naming the file.
std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_file, SentencePieceFlavor flavor,
                                                        int vocab_extra_ids = 0);

}  // namespace lmforge::text
