// defines: NullTokenizer and its encoder (make_null_tokenizer())
#include "text/null_tokenizer.h"

#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "util/error.h"

namespace lmforge::text {
namespace {

// Python's str.strip() of ASCII whitespace, which int() applies to its argument (space, \t, \n, \v, \f, \r).
std::string_view strip_ascii_space(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

class NullTokenizer final : public Tokenizer {
 public:
  explicit NullTokenizer(int64_t vocab_size) : vocab_size_(vocab_size) {}

  class Encoder final : public TextEncoder {
   public:
    explicit Encoder(const NullTokenizer& t) : t_(t) {}
    void encode(std::string_view text, std::vector<int32_t>& ids) override {
      if (strip_ascii_space(text).empty()) return;
      const size_t first = ids.size();
      size_t pos = 0;
      while (true) {  // text.split(' '): a piece between single spaces, empty ones included
        const size_t space = text.find(' ', pos);
        const std::string_view raw = text.substr(pos, space == std::string_view::npos ? text.npos : space - pos);
        std::string_view piece = strip_ascii_space(raw);
        if (!piece.empty() && piece.front() == '+') piece.remove_prefix(1);
        int64_t id = -1;
        const auto [end, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), id);
        if (piece.empty() || ec != std::errc() || end != piece.data() + piece.size() || id < 0 ||
            id > t_.vocab_size_) {
          ids.resize(first);  // nothing of a refused text is kept
          throw Error("NullTokenizer: \"" + std::string(raw.substr(0, 40)) + (raw.size() > 40 ? "..." : "") +
                      "\" is not a token id: the text must be integers in [0, " + std::to_string(t_.vocab_size_) +
                      "] separated by single spaces (--vocab-size " + std::to_string(t_.vocab_size_) +
                      "; the end-of-document id is " + std::to_string(t_.vocab_size_) + ")");
        }
        ids.push_back(static_cast<int32_t>(id));
        if (space == std::string_view::npos) break;
        pos = space + 1;
      }
    }

   private:
    const NullTokenizer& t_;
  };

  std::unique_ptr<TextEncoder> make_encoder() const override { return std::make_unique<Encoder>(*this); }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
    }
    return out;
  }
  size_t vocab_size() const override { return static_cast<size_t>(vocab_size_) + 1; }
  std::optional<int32_t> eod_id() const override { return static_cast<int32_t>(vocab_size_); }
  std::string type_name() const override { return "NullTokenizer"; }

 private:
  int64_t vocab_size_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_null_tokenizer(int64_t vocab_size) {
  // check_tokenizer_options() has refused any other size, naming --vocab-size
  if (vocab_size < 1 || vocab_size >= INT32_MAX) throw std::invalid_argument("make_null_tokenizer: vocab_size");
  return std::make_unique<NullTokenizer>(vocab_size);
}

}  // namespace lmforge::text
