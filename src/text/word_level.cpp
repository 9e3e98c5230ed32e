// defines: WordLevelTokenizer and its encoder (make_word_level_tokenizer())
#include "text/word_level.h"

#include <simdjson.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/python_str.h"
#include "util/error.h"

namespace lmforge::text {
namespace {

// Heterogeneous lookup: words are looked up as string_views into the text, without building strings.
struct WordHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using WordIds = std::unordered_map<std::string, int32_t, WordHash, std::equal_to<>>;

class WordLevelTokenizer final : public Tokenizer {
 public:
  WordLevelTokenizer(WordIds ids, int32_t unk, std::optional<int32_t> eod) : ids_(std::move(ids)), unk_(unk), eod_(eod) {
    int32_t max_id = -1;
    for (const auto& [word, id] : ids_) max_id = std::max(max_id, id);
    words_.resize(size_t(max_id + 1));
    for (const auto& [word, id] : ids_) words_[size_t(id)] = word;
    // Megatron's builder is given the vocabulary's size (len(vocab)); ids beyond it (a sparse vocabulary) widen it
    // so that the dataset's dtype holds every id.
    vocab_size_ = std::max(ids_.size(), words_.size());
  }

  class Encoder final : public TextEncoder {
   public:
    explicit Encoder(const WordLevelTokenizer& t) : t_(t) {}
    void encode(std::string_view text, std::vector<int32_t>& ids) override {
      words_.clear();
      python_split(text, words_);
      for (std::string_view w : words_) {
        const auto it = t_.ids_.find(w);
        ids.push_back(it == t_.ids_.end() ? t_.unk_ : it->second);
      }
    }

   private:
    const WordLevelTokenizer& t_;
    std::vector<std::string_view> words_;
  };

  std::unique_ptr<TextEncoder> make_encoder() const override { return std::make_unique<Encoder>(*this); }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || size_t(ids[i]) >= words_.size())
        throw Error("decode: id " + std::to_string(ids[i]) + " is outside the vocabulary");
      if (i) out += ' ';
      out += words_[size_t(ids[i])];
    }
    return out;
  }
  size_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> eod_id() const override { return eod_; }
  std::string type_name() const override { return "WordLevel"; }

 private:
  WordIds ids_;
  std::vector<std::string> words_;
  int32_t unk_;
  std::optional<int32_t> eod_;
  size_t vocab_size_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> make_word_level_tokenizer(const std::string& vocab_file, const std::string& unk_token,
                                                     const std::string& eod_token) {
  std::ifstream in(vocab_file, std::ios::binary);
  if (!in) throw Error(vocab_file + ": cannot open the word-level vocabulary (--vocab-file)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string json = buffer.str();
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (auto error = parser.parse(json).get(object))
    throw Error(vocab_file + ": not a JSON object of token -> id (" + simdjson::error_message(error) + ")");
  WordIds ids;
  for (auto field : object) {
    int64_t id = 0;
    if (field.value.get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX)
      throw Error(vocab_file + ": the id of token \"" + std::string(field.key) + "\" is not an integer in [0, 2^31)");
    ids[std::string(field.key)] = static_cast<int32_t>(id);  // json.load: a repeated key keeps its last value
  }
  const auto unk = ids.find(unk_token);
  if (unk == ids.end())
    throw Error(vocab_file + ": the vocabulary has no unknown-word token \"" + unk_token + "\" (--unk-token)");
  std::optional<int32_t> eod;
  if (eod_token.empty()) {  // the script's <|endoftext|> when the vocabulary has it
    if (const auto it = ids.find(std::string_view("<|endoftext|>")); it != ids.end()) eod = it->second;
  } else {
    const auto it = ids.find(eod_token);
    if (it == ids.end())
      throw Error(vocab_file + ": the vocabulary has no end-of-document token \"" + eod_token + "\" (--eod-token)");
    eod = it->second;
  }
  const int32_t unk_id = unk->second;
  return std::make_unique<WordLevelTokenizer>(std::move(ids), unk_id, eod);
}

}  // namespace lmforge::text
