// defines: make_tokenizer(): Megatron's --tokenizer-type names to Tokenizer instances; find_hf_tokenizer();
//          VocabularySizeOnly, the GPT2BPETokenizer of a vocabulary that only sizes the model
#include "text/tokenizer_factory.h"

#include <simdjson.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "text/bert_wordpiece.h"
#include "text/gpt2_bpe.h"
#include "text/hf_tokenizer_json.h"
#include "text/null_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"
#include "text/word_level.h"
#include "util/error.h"

namespace lmforge::text {
namespace {

// A vocab.json read as Megatron v1.1.5's GPT2Tokenizer reads it for training: json.load (a repeated key keeps its
// last id), vocab_size = len(encoder), eod = encoder['<|endoftext|>']. Nothing can be encoded or decoded with it.
class VocabularySizeOnly final : public Tokenizer {
 public:
  VocabularySizeOnly(std::string vocab_file, size_t size, int32_t eod)
      : vocab_file_(std::move(vocab_file)), size_(size), eod_(eod) {}
  std::unique_ptr<TextEncoder> make_encoder() const override { throw refusal("encode text"); }
  std::string decode(std::span<const int32_t>) const override { throw refusal("decode ids"); }
  size_t vocab_size() const override { return size_; }
  std::optional<int32_t> eod_id() const override { return eod_; }
  std::string type_name() const override { return "GPT2BPETokenizer"; }

 private:
  Error refusal(const std::string& what) const {
    return Error(vocab_file_ + " is not a byte-level BPE vocabulary: it gives only the vocabulary size and the "
                 "end-of-text id, so it cannot " + what);
  }
  std::string vocab_file_;
  size_t size_;
  int32_t eod_;
};

// The token -> id object of `vocab_file` (distinct tokens, and <|endoftext|>'s id), or nullopt when the file is not
// such an object (unreadable, not JSON, ids that are not integers): the byte-level reader's error then stands.
struct PlainVocab {
  size_t size = 0;
  std::optional<int32_t> eod;
};
std::optional<PlainVocab> read_plain_vocab(const std::string& vocab_file) {
  std::ifstream in(vocab_file, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string json = buffer.str();
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(json).get(object) != simdjson::SUCCESS) return std::nullopt;
  std::set<std::string_view> tokens;
  PlainVocab v;
  for (auto field : object) {
    int64_t id = 0;
    if (field.value.get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX) return std::nullopt;
    tokens.insert(field.key);
    if (field.key == "<|endoftext|>") v.eod = (int32_t)id;  // the last of repeated keys, as json.load
  }
  v.size = tokens.size();
  return v;
}

// GPT2BPETokenizer: GPT-2's byte-level BPE; a vocabulary it cannot use is accepted for size-and-eod-only callers.
std::unique_ptr<Tokenizer> make_gpt2_tokenizer(const TokenizerOptions& options) {
  try {
    return std::make_unique<Gpt2BpeTokenizer>(options.vocab_file, options.merge_file);
  } catch (const Error& e) {
    const std::optional<PlainVocab> plain = read_plain_vocab(options.vocab_file);
    if (!plain) throw;  // not even a token -> id object: the reader's error names the file and place
    if (!options.size_and_eod_only)
      throw Error(std::string(e.what()) + ". This command tokenizes or decodes text, which needs a byte-level BPE "
                  "vocabulary and its merges (lmforge train accepts such a vocab.json for data tokenized already, "
                  "reading only its size and end-of-text id, as Megatron v1.1.5 does)");
    if (!plain->eod)
      throw Error(options.vocab_file + ": has no <|endoftext|> token, whose id GPT2BPETokenizer takes as the "
                  "end of document (" + e.what() + ")");
    std::cerr << "lmforge: notice: --vocab-file " << options.vocab_file << " with --merge-file "
              << options.merge_file << " is not a byte-level BPE tokenizer (" << e.what()
              << "); training on data tokenized already needs only its size, " << plain->size
              << " tokens, and its end-of-text id, " << *plain->eod
              << ", which are taken as Megatron v1.1.5 takes them; nothing is encoded or decoded with it\n";
    return std::make_unique<VocabularySizeOnly>(options.vocab_file, plain->size, *plain->eod);
  }
}

// A Hugging Face repo id as the hub accepts it: "name" or "namespace/name" of letters, digits, - _ . (no "..").
bool looks_like_hub_name(const std::string& name) {
  static const std::regex id("[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?");
  return std::regex_match(name, id) && name.find("..") == std::string::npos && name.front() != '.';
}

}  // namespace

std::string find_hf_tokenizer(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(name_or_path, ec)) return name_or_path;
  const std::string flag = "--tokenizer-name-or-path " + name_or_path;
  if (!looks_like_hub_name(name_or_path))
    throw Error(flag + ": no such file or directory (and not a Hugging Face hub name to look up in the local cache)");
  // The caches Hugging Face's libraries use, in their order of precedence; every one that is set is searched.
  std::vector<std::pair<std::string, std::string>> caches;  // (how it was found, directory)
  const auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
  };
  if (!env("HF_HUB_CACHE").empty()) caches.push_back({"$HF_HUB_CACHE", env("HF_HUB_CACHE")});
  if (!env("HF_HOME").empty()) caches.push_back({"$HF_HOME/hub", env("HF_HOME") + "/hub"});
  if (!env("XDG_CACHE_HOME").empty())
    caches.push_back({"$XDG_CACHE_HOME/huggingface/hub", env("XDG_CACHE_HOME") + "/huggingface/hub"});
  if (!env("HOME").empty()) caches.push_back({"~/.cache/huggingface/hub", env("HOME") + "/.cache/huggingface/hub"});
  std::string repo = "models--" + name_or_path;
  for (size_t at = repo.find('/'); at != std::string::npos; at = repo.find('/', at + 2)) repo.replace(at, 1, "--");
  std::string looked;
  for (const auto& [source, cache] : caches) {
    const fs::path dir = fs::path(cache) / repo;
    std::string why;
    std::ifstream ref(dir / "refs" / "main");
    std::string revision;
    if (!(ref >> revision)) {
      why = fs::exists(dir, ec) ? "no refs/main" : "absent";
    } else {
      const fs::path snapshot = dir / "snapshots" / revision;
      if (fs::is_regular_file(snapshot / "tokenizer.json", ec)) return snapshot.string();
      why = "snapshot " + revision + " holds no tokenizer.json";
    }
    looked += (looked.empty() ? "" : "; ") + (dir / "snapshots").string() + " (" + source + ": " + why + ")";
  }
  if (caches.empty()) looked = "none: neither HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME nor HOME is set";
  throw Error(flag + ": no such file or directory, and not found in the local Hugging Face cache (looked in " + looked +
              "). lmforge does not download: fetch it once where the network is reachable (e.g. `huggingface-cli "
              "download " + name_or_path + " tokenizer.json tokenizer_config.json`) or give the path of a "
              "tokenizer.json");
}

void check_tokenizer_options(const TokenizerOptions& options) {
  const std::string& type = options.type;
  if (!options.add_special_tokens && type != "PretrainedFromHF")
    throw Error("--no-special-tokens applies to --tokenizer-type PretrainedFromHF only");
  // Megatron appends <extra_id_N> to its BERT and SentencePiece vocabularies (GPT-2 ignores the flag); elsewhere the
  // flag is refused rather than silently changing nothing.
  if (options.vocab_extra_ids < 0) throw Error("--vocab-extra-ids must be >= 0");
  if (options.vocab_extra_ids != 0 && type != "SentencePieceTokenizer" && type != "BertWordPieceLowerCase" &&
      type != "BertWordPieceCase")
    throw Error("--vocab-extra-ids applies to --tokenizer-type SentencePieceTokenizer, BertWordPieceLowerCase and "
                "BertWordPieceCase only");
  const bool sentencepiece =
      type == "SentencePieceTokenizer" || type == "GPTSentencePieceTokenizer" || type == "Llama2Tokenizer";
  if (type == "NullTokenizer") {
    for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"--vocab-file", options.vocab_file},
                                      {"--merge-file", options.merge_file},
                                      {"--tokenizer-model", options.model_file},
                                      {"--tokenizer-name-or-path", options.name_or_path},
                                      {"--eod-token", options.eod_token}})
      if (!value.empty())
        throw Error(std::string(flag) + " does not apply to --tokenizer-type NullTokenizer (its text is token ids; "
                    "--vocab-size gives the vocabulary)");
    if (options.vocab_size < 1 || options.vocab_size >= INT32_MAX)
      throw Error("--tokenizer-type NullTokenizer needs --vocab-size: the number of token ids before the "
                  "end-of-document id, at least 1 and below 2^31 - 1 (got " + std::to_string(options.vocab_size) + ")");
    return;
  }
  if (options.vocab_size != 0)
    throw Error("--vocab-size applies to --tokenizer-type NullTokenizer only (" + type +
                " takes its vocabulary size from its vocabulary file)");
  if (type == "GPT2BPETokenizer") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type GPT2BPETokenizer needs --vocab-file (vocab.json)");
    if (options.merge_file.empty()) throw Error("--tokenizer-type GPT2BPETokenizer needs --merge-file (merges.txt)");
  } else if (type == "BertWordPieceLowerCase" || type == "BertWordPieceCase") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type " + type + " needs --vocab-file (vocab.txt)");
  } else if (type == "PretrainedFromHF") {
    if (options.name_or_path.empty())
      throw Error("--tokenizer-type PretrainedFromHF needs --tokenizer-name-or-path (a tokenizer.json file, a "
                  "directory holding one, or a hub name in the local Hugging Face cache)");
  } else if (sentencepiece) {
    if (options.model_file.empty())
      throw Error("--tokenizer-type " + type + " needs --tokenizer-model (a SentencePiece .model file)");
  } else if (type == "WordLevel") {
    if (options.vocab_file.empty()) throw Error("--tokenizer-type WordLevel needs --vocab-file (vocab.json)");
  } else {
    throw Error("--tokenizer-type: unknown tokenizer \"" + type +
                "\"; valid types: GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase, PretrainedFromHF, "
                "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, WordLevel, NullTokenizer");
  }
  if (!options.eod_token.empty() && type != "PretrainedFromHF" && type != "WordLevel")
    throw Error("--eod-token applies to --tokenizer-type PretrainedFromHF and WordLevel only");
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options) {
  check_tokenizer_options(options);
  const std::string& type = options.type;
  // Text that is token ids already (Megatron-core's functional tests and mock data run on it).
  if (type == "NullTokenizer") return make_null_tokenizer(options.vocab_size);
  if (type == "GPT2BPETokenizer") return make_gpt2_tokenizer(options);
  // Megatron's type names mean Megatron's (Google BERT's) behaviour, so its datasets come out byte for byte.
  if (type == "BertWordPieceLowerCase" || type == "BertWordPieceCase")
    return make_bert_wordpiece_tokenizer(options.vocab_file, type == "BertWordPieceLowerCase",
                                         WordPieceFlavor::kMegatron, options.vocab_extra_ids);
  // Any Hugging Face tokenizer.json, ids as HF's encode(text, add_special_tokens) (Megatron: True).
  if (type == "PretrainedFromHF") {
    HfTokenizerOptions hf;
    hf.eod_token = options.eod_token;
    hf.add_special_tokens = options.add_special_tokens;
    return load_hf_tokenizer(find_hf_tokenizer(options.name_or_path), hf);
  }
  // Whitespace words looked up in a vocab.json (the Megatron v1.1.5 project's word-level preprocessor).
  if (type == "WordLevel") return make_word_level_tokenizer(options.vocab_file, options.unk_token, options.eod_token);
  // SentencePiece .model types, as Megatron's three wrappers of it (sentencepiece_tokenizer.h).
  const SentencePieceFlavor flavor = type == "SentencePieceTokenizer"      ? SentencePieceFlavor::kMegatron
                                     : type == "GPTSentencePieceTokenizer" ? SentencePieceFlavor::kGpt
                                                                           : SentencePieceFlavor::kLlama2;
  return make_sentencepiece_tokenizer(options.model_file, flavor, options.vocab_extra_ids);
}

}  // namespace lmforge::text
