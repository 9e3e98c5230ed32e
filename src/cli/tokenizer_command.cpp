// defines: add_tokenizer_command(): `lmforge tokenizer train`, a vocabulary trained from a corpus (flags onto
//          tokenizer_train::TokenizerTrainOptions; the work is in src/tokenizer_train/)
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/last_value_wins.h"
#include "tokenizer_train/train.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::cli {
namespace {

void add_train_subcommand(CLI::App& parent) {
  namespace tt = tokenizer_train;
  auto options = std::make_shared<tt::TokenizerTrainOptions>();
  auto type = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("auto");
  auto specials = std::make_shared<std::vector<std::string>>();
  auto limit_alphabet = std::make_shared<size_t>(0);
  auto lowercase = std::make_shared<bool>(false);  // meaningful only when given (the default depends on --type)
  auto byte_fallback = std::make_shared<bool>(false);
  auto character_coverage = std::make_shared<double>(0);
  auto random_seed = std::make_shared<uint32_t>(0);
  CLI::App* cmd = parent.add_subcommand(
      "train",
      "Train a tokenizer vocabulary from a corpus and write the files lmforge prep/train and Megatron read.\n\n"
      "--type ByteLevelBPE: GPT-2-style byte-level BPE (ByteLevel pre-tokenizer, no prefix space, the 256 byte "
      "characters as initial alphabet); writes vocab.json + merges.txt (--tokenizer-type GPT2BPETokenizer "
      "--vocab-file/--merge-file) and tokenizer.json (PretrainedFromHF, Hugging Face). Byte-identical to Hugging "
      "Face tokenizers' BpeTrainer with the same settings.\n"
      "--type WordPiece: BERT's WordPiece (BertNormalizer, BertPreTokenizer, \"##\" continuation); writes vocab.txt "
      "(BertWordPieceLowerCase, or BertWordPieceCase with --no-lowercase) and tokenizer.json. Hugging Face's "
      "WordPieceTrainer numbers the \"##c\" symbols in a random (hash-map) order; lmforge numbers them by code "
      "point, otherwise the result is HF's algorithm exactly.\n"
      "--type SentencePieceBPE / SentencePieceUnigram: libsentencepiece's own trainer (spm_train's algorithm) fed "
      "from lmforge's readers; writes tokenizer.model + tokenizer.vocab (--tokenizer-model).\n\n"
      "Input: the inputs prep takes (JSON lines with --json-keys, .gz/.zst/.xz, directories, globs) and plain "
      "text files. Lines are read as HF's train_from_files reads a text file: each line, with its '\\n', is one "
      "sequence; a JSON document counts as its text followed by '\\n'. Bad input stops the run with file:line and "
      "the reason; invalid UTF-8 becomes U+FFFD. Word counting uses every core (--threads); memory grows with the "
      "number of distinct words, not the corpus size (SentencePiece keeps its sentences, as spm_train does). "
      "Files appear in --output-dir only when all are complete. Progress (rate, ETA) goes to stderr, a summary "
      "to stdout.");
  cmd->add_option("--type", *type, "ByteLevelBPE, WordPiece, SentencePieceBPE or SentencePieceUnigram")->required();
  repeatable(cmd->add_option("--input", options->corpus.inputs,
                             "Corpus file(s), directories (their .jsonl/.json[.gz|.zst|.xz] files) or glob patterns; "
                             "repeat the flag or list several"))
      ->required();
  cmd->add_option("--input-format", *format,
                  "auto: a file named *.jsonl or *.json (before .gz/.zst/.xz) is JSON lines, any other is text; "
                  "jsonl or text for all inputs")
      ->capture_default_str();
  cmd->add_option("--json-keys", options->corpus.json_keys, "JSON lines: the keys whose texts are trained on")
      ->capture_default_str();
  cmd->add_option("--output-dir", options->output_dir, "Directory for the trained files (created if missing)")
      ->required();
  cmd->add_option("--vocab-size", options->vocab_size,
                  "Vocabulary size to reach, special tokens included (HF's default 30000)")
      ->capture_default_str();
  cmd->add_option("--min-frequency", options->min_frequency,
                  "BPE/WordPiece: stop when the most frequent pair occurs fewer times (HF's Rust default 0; its "
                  "Python helper classes use 2)")
      ->capture_default_str();
  cmd->add_option("--special-tokens", *specials,
                  "Special tokens, ids 0..k-1 in this order (several values after one flag; none: give the flag "
                  "with no value). Default: <|endoftext|> (ByteLevelBPE), [PAD] [UNK] [CLS] [SEP] [MASK] "
                  "(WordPiece, which needs [UNK]); SentencePiece: added as user_defined_symbols beside its own "
                  "<unk> <s> </s>")
      ->expected(0, -1);
  cmd->add_option("--limit-alphabet", *limit_alphabet,
                  "BPE/WordPiece: keep only this many characters, the most frequent (HF drops ties at the cut in "
                  "no defined order; lmforge drops the higher code point first). Default: no limit (HF's Rust "
                  "default; its Python BertWordPieceTokenizer uses 1000)");
  CLI::Option* lowercase_flag = cmd->add_flag("--lowercase,!--no-lowercase", *lowercase,
                "Lower-case the text before training: ByteLevelBPE adds HF's Lowercase normalizer (default off; "
                "tokenizer.json carries it, vocab.json/merges.txt cannot, so GPT2BPETokenizer users lower-case "
                "their text themselves); "
                "WordPiece's BertNormalizer lower-cases and, unless --no-strip-accents, strips accents (default on; "
                "--no-lowercase keeps case and accents, BertWordPieceCase)");
  auto strip_accents = std::make_shared<bool>(false), chinese = std::make_shared<bool>(true),
       clean_text = std::make_shared<bool>(true);
  CLI::Option* strip_accents_flag = cmd->add_flag("--strip-accents,!--no-strip-accents", *strip_accents,
                "WordPiece: the BertNormalizer's strip_accents (NFD, then nonspacing marks dropped). Default: as "
                "--lowercase (HF's strip_accents=None), so --lowercase --no-strip-accents keeps é while folding case");
  CLI::Option* chinese_flag = cmd->add_flag("--handle-chinese-chars,!--no-handle-chinese-chars", *chinese,
                "WordPiece: the BertNormalizer's handle_chinese_chars, spaces around every CJK ideograph so each is "
                "a word of its own (default on, HF's and BERT's)");
  CLI::Option* clean_text_flag = cmd->add_flag("--clean-text,!--no-clean-text", *clean_text,
                "WordPiece: the BertNormalizer's clean_text, control characters removed and whitespace made spaces "
                "(default on)");
  cmd->add_flag("!--no-initial-alphabet", options->initial_alphabet,
                "ByteLevelBPE: do not add the 256 byte characters that the corpus lacks (the alphabet is then only "
                "the characters seen, as HF's BpeTrainer without initial_alphabet, e.g. the npm binding's default)");
  cmd->add_option("--threads", options->corpus.threads,
                  "Threads counting words (SentencePiece BPE: training); 0 = every core. SentencePiece unigram "
                  "always trains with spm_train's default 16 threads: libsentencepiece's unigram scores depend on "
                  "its thread count, so a fixed one gives the same model on every machine")
      ->capture_default_str();
  cmd->add_option("--character-coverage", *character_coverage,
                  "SentencePiece: spm_train's --character_coverage (spm's default 0.9995)");
  cmd->add_option("--random-seed", *random_seed,
                  "SentencePiece: spm_train's --random_seed (spm's default draws one, so runs differ; give a seed to "
                  "reproduce)");
  CLI::Option* byte_fallback_flag = cmd->add_flag("--byte-fallback,!--no-byte-fallback", *byte_fallback,
                "SentencePiece: spm_train's --byte_fallback (unknown characters become <0xNN> byte pieces)");
  repeatable(cmd->add_option("--spm-option", options->spm_options,
                             "SentencePiece: any other spm_train flag as name=value without dashes (e.g. "
                             "input_sentence_size=1000000, shuffle_input_sentence=true, split_digits=true); repeat "
                             "the flag"));
  cmd->add_option("--max-line-bytes", options->corpus.max_line_bytes,
                  "Longest input line in bytes; a longer one stops the run naming file:line")
      ->capture_default_str();
  cmd->add_option("--progress-seconds", options->corpus.progress_seconds,
                  "Seconds between progress lines on stderr (default: 1 on a terminal, 10 otherwise)");
  cmd->callback([=] {
    options->type = tt::parse_model_type(*type);
    if (*format == "auto") options->corpus.format = tt::InputFormat::kAuto;
    else if (*format == "jsonl") options->corpus.format = tt::InputFormat::kJsonLines;
    else if (*format == "text") options->corpus.format = tt::InputFormat::kText;
    else throw Error("--input-format " + *format + ": expected auto, jsonl or text");
    if (cmd->count("--special-tokens")) {
      // The flag without values reads as one empty string: no special tokens at all (HF's Rust default).
      options->special_tokens.emplace();
      for (const std::string& token : *specials)
        if (!token.empty()) options->special_tokens->push_back(token);
    }
    if (cmd->count("--limit-alphabet")) options->limit_alphabet = *limit_alphabet;
    if (lowercase_flag->count()) options->lowercase = *lowercase;
    if (strip_accents_flag->count()) options->strip_accents = *strip_accents;
    if (chinese_flag->count()) options->handle_chinese_chars = *chinese;
    if (clean_text_flag->count()) options->clean_text = *clean_text;
    if (byte_fallback_flag->count()) options->byte_fallback = *byte_fallback;
    if (cmd->count("--character-coverage")) options->character_coverage = *character_coverage;
    if (cmd->count("--random-seed")) options->random_seed = *random_seed;
    const tt::TrainSummary s = tt::run_tokenizer_train(*options);
    std::printf("trained %s: %s entries%s from %s documents (%s lines, %s MB) in %s files\n",
                tt::model_type_name(options->type), format_count(s.vocab_size).c_str(),
                s.merges ? (", " + format_count(s.merges) + " merges").c_str() : "",
                format_count(s.corpus.documents).c_str(), format_count(s.corpus.lines).c_str(),
                format_count(s.corpus.input_bytes >> 20).c_str(), format_count(s.corpus.files).c_str());
    if (s.total_words)
      std::printf("words: %s (%s distinct)\n", format_count(s.total_words).c_str(),
                  format_count(s.distinct_words).c_str());
    if (s.corpus.replaced) std::printf("replaced by U+FFFD: %s\n", format_count(s.corpus.replaced).c_str());
    std::printf("time: reading %.1f s, training %.1f s\n", s.count_seconds, s.train_seconds);
    for (const std::string& path : s.outputs) std::printf("wrote %s\n", path.c_str());
  });
}

}  // namespace

void add_tokenizer_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("tokenizer", "Tokenizer tools: `lmforge tokenizer train` trains a vocabulary");
  cmd->require_subcommand(1);
  add_train_subcommand(*cmd);
}

}  // namespace lmforge::cli
