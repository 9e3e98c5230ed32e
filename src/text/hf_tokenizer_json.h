// defines: load_hf_tokenizer(): any Hugging Face tokenizer.json (--tokenizer-type PretrainedFromHF), ids as HF's
//
// Runs the file's pipeline as Hugging Face tokenizers does for encode(text, add_special_tokens):
//   added tokens (non-normalized ones matched on the raw text, leftmost-longest, with single_word/lstrip/rstrip)
//   -> normalizer -> normalized added tokens -> pre-tokenizer -> model, per piece between added tokens
//   -> with add_special_tokens, the post-processor's special ids around the text ([CLS] .. [SEP], <s> .., .. </s>),
//      also for an empty text (hf_post_processor.h).
// An --append-eod id comes from eod_id() (the caller appends it after those). Supported components:
//   normalizers:     NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, BertNormalizer (clean_text and
//                    handle_chinese_chars on, strip_accents null or equal to lowercase), Replace (String or Regex),
//                    Prepend, Strip, Precompiled (SentencePiece charsmaps, e.g. T5/ALBERT's nmt_nfkc), Nmt, Sequence
//   pre-tokenizers:  ByteLevel, BertPreTokenizer, Whitespace, WhitespaceSplit, Metaspace, Split (String or Regex,
//                    all five behaviours, invert), CharDelimiterSplit, Digits, Punctuation, Sequence
//   models:          BPE (merges as "a b" or ["a","b"], continuing_subword_prefix, end_of_word_suffix, unk_token,
//                    fuse_unk, byte_fallback, ignore_merges; dropout must be null or 0), WordPiece, Unigram
//                    (unk_id, byte_fallback), WordLevel
//   decoders:        ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback, Fuse, Strip, Replace, Sequence
//   post-processors: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence (all of HF's)
// Any other component type (e.g. the ByteLevel normalizer, UnicodeScripts, CTC) or option (BPE dropout) is an
// Error naming the type and its JSON path ("normalizer.normalizers[0]"); an unsupported decoder is reported when
// decode() is called, so such a file can still be used to tokenize.
// HF details reproduced: added-token ids as AddedVocabulary assigns them on load (the file's "id" fields are not
// authoritative); Unigram scores rounded as serde_json parses them (ties between segmentations depend on it);
// StripAccents' older mark tables; Unicode 16 letters/numbers in Split regexes (hf_regex.h).
// Limits: NFC/NFD/NFKC/NFKD use utf8proc (Unicode 15), other regex properties PCRE2's Unicode 14; characters
// added since may tokenize differently from HF. Metaspace's prepend_scheme "first" tests whether a piece starts
// the normalized text, where HF tests its original offset: they differ only when the normalizer deleted the
// text's first characters and a pre-tokenizer then split. Invalid UTF-8 is not expected (callers repair text).
//
// Two BPE and two WordPiece implementations, on purpose: this pipeline's models (hf_models.cpp) handle any
// tokenizer.json, while Gpt2BpeTokenizer (gpt2_bpe.h) and the BERT WordPiece (bert_wordpiece.h) are dedicated fast
// paths for the two pipelines `prep` runs most (--tokenizer-type GPT2BPETokenizer and BertWordPiece*, chosen by
// make_tokenizer()). Which one encodes a tokenizer.json: with HfTokenizerOptions::fast_paths (the default), a file
// that is exactly GPT-2's pipeline (ByteLevel pre-tokenizer with use_regex + BPE without subword prefix/suffix or
// ignore_merges) is encoded by Gpt2BpeTokenizer after the normalizer, and one that is exactly BERT's (BertNormalizer
// + BertPreTokenizer + WordPiece with "##") by the WordPiece in its Hugging Face flavour; everything else, or a
// vocabulary those refuse, or fast_paths off, runs the generic stages. Added tokens, the post-processor and decode()
// are this pipeline's in every case. tests/text/test_hf_tokenizer_json.cpp runs every fixture and the shared
// GPT-2/BERT files with fast_paths on and off, both against Hugging Face's ids.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace lmforge::text {

struct HfTokenizerOptions {
  // Token whose id --append-eod appends. Empty: the file's own end-of-document token, searched in this order:
  //   1. tokenizer_config.json's "eos_token" when a directory is given and that file exists;
  //   2. the first of <|endoftext|>, </s>, <|end_of_text|>, <eos>, <|eos|>, [EOS] that is an added token or in
  //      the model's vocabulary.
  // Named but absent from the file: Error. Nothing found: eod_id() is empty (--append-eod then fails).
  std::string eod_token;
  // Run files that are exactly GPT-2's byte-level BPE or BERT's WordPiece pipeline on those tuned
  // implementations (same ids). Off: always the generic pipeline (tests compare both).
  bool fast_paths = true;
  // HF's add_special_tokens: the file's post_processor adds its special tokens to each text. Off by default here;
  // TokenizerOptions turns it on for --tokenizer-type PretrainedFromHF, as Megatron's tokenizer(text) does.
  bool add_special_tokens = false;
};

// `path`: a tokenizer.json file, or a directory holding one. Malformed JSON, missing fields, unsupported
// components: Error naming the file and the JSON path.
// vocab_size() is HF's get_vocab_size(with_added_tokens=True) (= len(tokenizer) in transformers, what Megatron's
// PretrainedFromHF tokenizer reports): the distinct token strings of the model vocabulary and added tokens.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path, const HfTokenizerOptions& options = {});
// The same from the file's contents; `origin` names it in errors.
std::unique_ptr<Tokenizer> make_hf_tokenizer(std::string_view json, const std::string& origin,
                                             const HfTokenizerOptions& options = {});

}  // namespace lmforge::text
