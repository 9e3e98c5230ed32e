// defines: the stages of a tokenizer.json pipeline (HfNormalizer, HfPreTokenizer, HfModel, HfDecoder) and the
// builders that read them from JSON (internal to the hf_* files). One file per kind of stage:
//   hf_normalizers.cpp     make_normalizer() and the normalizers
//   hf_pre_tokenizers.cpp  make_pre_tokenizer() and the pre-tokenizers
//   hf_models.cpp          make_model() and the models (BPE, WordPiece, Unigram, WordLevel)
//   hf_decoders.cpp        make_decoder() and the decoders
//   hf_post_processor.*    the post-processors (special tokens around a text)
//   hf_components.cpp      the JSON access and UTF-8 helpers below; hf_component_util.h what the stage files share
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <simdjson.h>


namespace lmforge::text::hf {

// A piece of text between pre-tokenizer splits. at_start: it begins at offset 0 of the original input (what
// Metaspace's prepend_scheme "first" tests).
struct Piece {
  std::string text;
  bool at_start = false;
};
using Pieces = std::vector<Piece>;

class HfNormalizer {
 public:
  virtual ~HfNormalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};

class HfPreTokenizer {
 public:
  virtual ~HfPreTokenizer() = default;
  virtual void pre_tokenize(Pieces& pieces) const = 0;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class HfModel {
 public:
  virtual ~HfModel() = default;
  // Appends the ids of one pre-tokenized word. Thread-safe (no mutable state).
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
  std::optional<int32_t> token_to_id(std::string_view token) const {
    auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* id_to_token(int32_t id) const {
    if (id < 0 || size_t(id) >= id_to_token_.size() || !present_[id]) return nullptr;
    return &id_to_token_[id];
  }
  const Vocab& vocab() const { return vocab_; }
  virtual std::string type() const = 0;

 protected:
  void index_vocab();  // fills id_to_token_ from vocab_
  Vocab vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<uint8_t> present_;
};

class HfDecoder {
 public:
  virtual ~HfDecoder() = default;
  // HF's decode_chain: tokens in, tokens out (concatenated by the caller).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Builders. `path` is the JSON path of `e` for error messages ("normalizer.normalizers[1]"); `origin` the file.
struct Context {
  std::string origin;
  [[noreturn]] void fail(const std::string& path, const std::string& reason) const;
};
std::unique_ptr<HfNormalizer> make_normalizer(const simdjson::dom::element& e, const std::string& path,
                                              const Context& cx);
std::unique_ptr<HfPreTokenizer> make_pre_tokenizer(const simdjson::dom::element& e, const std::string& path,
                                                   const Context& cx);
std::unique_ptr<HfModel> make_model(const simdjson::dom::element& e, const std::string& path, const Context& cx);
std::unique_ptr<HfDecoder> make_decoder(const simdjson::dom::element& e, const std::string& path,
                                        const Context& cx);

// JSON access with errors naming the path. opt_*: missing or null -> nullopt.
std::optional<simdjson::dom::element> opt_field(const simdjson::dom::element& e, std::string_view key);
std::string get_type(const simdjson::dom::element& e, const std::string& path, const Context& cx);
std::string get_string(const simdjson::dom::element& e, std::string_view key, const std::string& path,
                       const Context& cx);
std::optional<std::string> opt_string(const simdjson::dom::element& e, std::string_view key,
                                      const std::string& path, const Context& cx);
bool get_bool(const simdjson::dom::element& e, std::string_view key, bool def, const std::string& path,
              const Context& cx);
std::optional<int64_t> opt_int(const simdjson::dom::element& e, std::string_view key, const std::string& path,
                               const Context& cx);
std::optional<double> opt_double(const simdjson::dom::element& e, std::string_view key, const std::string& path,
                                 const Context& cx);
simdjson::dom::array get_array(const simdjson::dom::element& e, std::string_view key, const std::string& path,
                               const Context& cx);

// Combining marks as HF's StripAccents sees them (hf_unicode_tables.cpp).
bool hf_is_combining_mark(uint32_t cp);

// UTF-8 helpers shared by the stages.
// Decodes the character at s[i]; invalid bytes read as U+FFFD of length 1.
uint32_t next_char(std::string_view s, size_t i, int& len);

}  // namespace lmforge::text::hf
