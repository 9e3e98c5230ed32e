// defines: the SentencePiece tokenizer types (Megatron's SentencePieceTokenizer, GPTSentencePieceTokenizer,
// Llama2Tokenizer) over one shared, const sentencepiece::SentencePieceProcessor
#include "text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/error.h"

namespace lmforge::text {
namespace {

struct Special {
  std::string token;
  int32_t id;
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& model_file, SentencePieceFlavor flavor, int vocab_extra_ids)
      : flavor_(flavor) {
    if (vocab_extra_ids < 0) throw Error("--vocab-extra-ids must not be negative");
    if (vocab_extra_ids > 0 && flavor != SentencePieceFlavor::kMegatron)
      throw Error("--vocab-extra-ids applies to --tokenizer-type SentencePieceTokenizer only");
    auto status = sp_.Load(model_file);
    if (!status.ok())
      throw Error(model_file + ": cannot load SentencePiece model (--tokenizer-model): " + status.ToString());
    pieces_ = sp_.GetPieceSize();
    vocab_size_ = static_cast<size_t>(pieces_);
    if (flavor != SentencePieceFlavor::kMegatron) {
      if (sp_.eos_id() >= 0) eod_ = sp_.eos_id();
      bos_ = sp_.bos_id();
      if (flavor == SentencePieceFlavor::kLlama2 && bos_ < 0)
        throw Error(model_file + ": Llama2Tokenizer needs a model with a bos piece (bos_id is -1)");
      return;
    }
    // Megatron's _initalize: a dict piece -> id over all pieces (a repeated piece would keep its last id; spm
    // models have none), then each special token looked up or appended at the next free id.
    std::unordered_map<std::string, int32_t> vocab;
    for (int i = 0; i < pieces_; ++i) vocab[sp_.IdToPiece(i)] = i;
    auto add = [&](const std::string& token) {
      auto [it, inserted] = vocab.emplace(token, static_cast<int32_t>(vocab.size()));
      for (auto& s : specials_)
        if (s.token == token) return it->second;  // Python dict: re-adding keeps the first position
      specials_.push_back({token, it->second});
      return it->second;
    };
    auto piece_or = [&](int id, const char* fallback) {
      return id >= 0 && id < pieces_ ? sp_.IdToPiece(id) : std::string(fallback);  // Python raises IndexError
    };
    add("<CLS>");
    add("<SEP>");
    eod_ = add("<EOD>");
    add("<MASK>");
    add(piece_or(sp_.pad_id(), "<PAD>"));
    add(piece_or(sp_.bos_id(), "<BOS>"));
    add(piece_or(sp_.eos_id(), "<EOS>"));
    for (int i = 0; i < vocab_extra_ids; ++i) add("<extra_id_" + std::to_string(i) + ">");
    vocab_size_ = vocab.size();
    for (const auto& s : specials_) special_of_id_.emplace(s.id, s.token);
  }

  class Encoder final : public TextEncoder {
   public:
    explicit Encoder(const SentencePieceTokenizer& t) : t_(t) {}
    void encode(std::string_view text, std::vector<int32_t>& ids) override { t_.encode(text, ids); }

   private:
    const SentencePieceTokenizer& t_;
  };

  std::unique_ptr<TextEncoder> make_encoder() const override { return std::make_unique<Encoder>(*this); }

  void encode(std::string_view text, std::vector<int32_t>& ids) const {
    if (flavor_ == SentencePieceFlavor::kLlama2) ids.push_back(bos_);
    if (flavor_ != SentencePieceFlavor::kMegatron) return spm_encode(text, ids);
    // Megatron's tokenize(): earliest occurrence of any special token; on a tie the first in table order wins
    // (min() over the dict). Byte offsets order matches of valid UTF-8 exactly as code-point offsets do.
    size_t at = 0;
    while (true) {
      size_t best = std::string_view::npos;
      const Special* found = nullptr;
      for (const auto& s : specials_) {
        size_t p = text.find(s.token, at);
        if (p < best) best = p, found = &s;
      }
      if (!found) break;
      spm_encode(text.substr(at, best - at), ids);
      ids.push_back(found->id);
      at = best + found->token.size();
    }
    spm_encode(text.substr(at), ids);
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    std::vector<int> run;
    auto flush = [&] {
      if (run.empty()) return;
      std::string piece_text;
      auto status = sp_.Decode(run, &piece_text);
      if (!status.ok()) throw Error("SentencePiece decode failed: " + status.ToString());
      out += piece_text;
      run.clear();
    };
    for (int32_t id : ids) {
      if (flavor_ == SentencePieceFlavor::kMegatron) {
        auto it = special_of_id_.find(id);
        if (it != special_of_id_.end()) {  // Megatron's detokenize: decode(run) + " " + token + " "
          flush();
          out += ' ';
          out += it->second;
          out += ' ';
          continue;
        }
      }
      if (id < 0 || id >= pieces_)
        throw Error("token id " + std::to_string(id) + " is outside the SentencePiece vocabulary (" +
                    std::to_string(vocab_size_) + " ids)");
      run.push_back(id);
    }
    flush();
    return out;
  }

  size_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> eod_id() const override { return eod_; }
  std::string type_name() const override {
    switch (flavor_) {
      case SentencePieceFlavor::kMegatron: return "SentencePieceTokenizer";
      case SentencePieceFlavor::kGpt: return "GPTSentencePieceTokenizer";
      case SentencePieceFlavor::kLlama2: return "Llama2Tokenizer";
    }
    return "SentencePieceTokenizer";
  }

 private:
  void spm_encode(std::string_view text, std::vector<int32_t>& ids) const {
    if (text.empty()) return;
    std::vector<int> out;
    auto status = sp_.Encode(text, &out);
    if (!status.ok()) throw Error("SentencePiece encode failed: " + status.ToString());
    ids.insert(ids.end(), out.begin(), out.end());
  }

  sentencepiece::SentencePieceProcessor sp_;
  SentencePieceFlavor flavor_;
  int pieces_ = 0;
  size_t vocab_size_ = 0;
  int32_t bos_ = -1;
  std::optional<int32_t> eod_;
  std::vector<Special> specials_;  // Megatron's table, in its order
  std::unordered_map<int32_t, std::string> special_of_id_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_file, SentencePieceFlavor flavor,
                                                        int vocab_extra_ids) {
  return std::make_unique<SentencePieceTokenizer>(model_file, flavor, vocab_extra_ids);
}

}  // namespace lmforge::text
