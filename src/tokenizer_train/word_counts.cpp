// count_words(): per-thread WordCountMaps filled by read_corpus()'s workers, summed at the end (a plain sum, so the
// thread count cannot change the result, as in HF's rayon reduce).
#include "tokenizer_train/word_counts.h"

#include <simdjson.h>

#include <cstring>

#include "text/gpt2_bpe.h"
#include "text/gpt2_pretokenizer.h"
#include "text/hf_components.h"
#include "util/error.h"
#include "util/progress.h"

namespace lmforge::tokenizer_train {
namespace {

// A 64-bit hash of short byte strings (8 bytes at a time, multiply-xorshift mixing).
uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, s.data() + i, 8);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    uint64_t v = 0;
    std::memcpy(&v, s.data() + i, s.size() - i);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
  }
  h ^= h >> 32;
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 29);
}

// The HF stages a trainer's words pass through, built from their tokenizer.json form by lmforge's pipeline
// (text/hf_components.h), which tests/text checks against HF's own ids.
std::unique_ptr<text::hf::HfNormalizer> make_stage_normalizer(const std::string& json) {
  simdjson::dom::parser parser;
  const simdjson::dom::element e = parser.parse(json);
  return text::hf::make_normalizer(e, "normalizer", text::hf::Context{"the trainer's normalizer"});
}
std::unique_ptr<text::hf::HfPreTokenizer> make_stage_pre_tokenizer(const std::string& json) {
  simdjson::dom::parser parser;
  const simdjson::dom::element e = parser.parse(json);
  return text::hf::make_pre_tokenizer(e, "pre_tokenizer", text::hf::Context{"the trainer's pre-tokenizer"});
}

}  // namespace

std::string bert_normalizer_json(const WordSplitOptions& o) {
  auto flag = [](bool b) { return b ? "true" : "false"; };
  return std::string(R"({"type":"BertNormalizer","clean_text":)") + flag(o.clean_text) +
         R"(,"handle_chinese_chars":)" + flag(o.handle_chinese_chars) + R"(,"strip_accents":)" +
         flag(o.strip_accents.value_or(o.lowercase)) + R"(,"lowercase":)" + flag(o.lowercase) + "}";
}

namespace {

class WordSink final : public LineSink {
 public:
  explicit WordSink(const WordSplitOptions& options) : options_(options) {
    if (options.split == WordSplit::kBert) {
      normalizer_ = make_stage_normalizer(bert_normalizer_json(options));
      pre_tokenizer_ = make_stage_pre_tokenizer(R"({"type":"BertPreTokenizer"})");
    } else if (options.lowercase) {
      normalizer_ = make_stage_normalizer(R"({"type":"Lowercase"})");
    }
  }
  void add_line(std::string_view line) override {
    if (normalizer_) {
      scratch_.assign(line);
      normalizer_->normalize(scratch_);
      line = scratch_;
    }
    if (options_.split == WordSplit::kByteLevel) {
      text::for_each_gpt2_piece(line, [&](const uint8_t* data, size_t size) {
        words_.add(std::string_view(reinterpret_cast<const char*>(data), size));
        ++total_;
      });
      return;
    }
    pieces_.clear();
    pieces_.push_back(text::hf::Piece{std::string(line), true});
    pre_tokenizer_->pre_tokenize(pieces_);
    for (const text::hf::Piece& p : pieces_) {
      words_.add(p.text);
      ++total_;
    }
  }
  WordCountMap& words() { return words_; }
  uint64_t total() const { return total_; }

 private:
  WordSplitOptions options_;
  std::unique_ptr<text::hf::HfNormalizer> normalizer_;
  std::unique_ptr<text::hf::HfPreTokenizer> pre_tokenizer_;
  std::string scratch_;
  text::hf::Pieces pieces_;
  WordCountMap words_;
  uint64_t total_ = 0;
};

}  // namespace

WordCountMap::WordCountMap() {
  slots_.assign(1 << 12, Slot{0, 0, 0, kEmpty});
  mask_ = slots_.size() - 1;
}

size_t WordCountMap::memory_bytes() const { return slots_.size() * sizeof(Slot) + arena_.capacity(); }

void WordCountMap::grow() {
  std::vector<Slot> old(slots_.size() * 2, Slot{0, 0, 0, kEmpty});
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.length == kEmpty) continue;
    size_t h = s.hash & mask_;
    while (slots_[h].length != kEmpty) h = (h + 1) & mask_;
    slots_[h] = s;
  }
}

void WordCountMap::add(std::string_view word, uint64_t count) {
  if (word.size() >= kEmpty) throw Error("a word of 4 GB or more cannot be counted");
  const uint64_t hash = hash_bytes(word);
  size_t h = hash & mask_;
  while (true) {
    Slot& s = slots_[h];
    if (s.length == kEmpty) break;
    if (s.hash == hash && s.length == word.size() &&
        std::memcmp(arena_.data() + s.offset, word.data(), word.size()) == 0) {
      s.count += count;
      return;
    }
    h = (h + 1) & mask_;
  }
  slots_[h] = Slot{hash, arena_.size(), count, uint32_t(word.size())};
  arena_.append(word);
  if (2 * ++size_ > slots_.size()) grow();
}

void WordCountMap::add_all(const WordCountMap& other) {
  other.for_each([&](std::string_view word, uint64_t count) { add(word, count); });
}

WordCountResult count_words(const CorpusOptions& corpus, const WordSplitOptions& split) {
  std::vector<std::unique_ptr<LineSink>> sinks;
  WordCountResult result;
  result.corpus = read_corpus(
      corpus, [&] { return std::make_unique<WordSink>(split); }, sinks);
  WordCountMap all;
  for (auto& sink : sinks) {
    auto& words = static_cast<WordSink&>(*sink);
    result.total_words += words.total();
    if (sinks.size() == 1) {
      all = std::move(words.words());
    } else {
      all.add_all(words.words());
    }
    sink.reset();  // its map is no longer needed
  }
  result.words.reserve(all.size());
  all.for_each([&](std::string_view word, uint64_t count) {
    WordCount w;
    w.count = count;
    if (split.split == WordSplit::kByteLevel) {
      // HF's ByteLevel pre-tokenizer hands the trainer each byte as its printable stand-in character.
      w.word.reserve(word.size() * 2);
      for (char c : word) {
        const uint32_t cp = text::gpt2_byte_to_unicode(uint8_t(c));
        if (cp < 0x80) {
          w.word += char(cp);
        } else {
          w.word += char(0xC0 | (cp >> 6));
          w.word += char(0x80 | (cp & 0x3F));
        }
      }
    } else {
      w.word.assign(word);
    }
    result.words.push_back(std::move(w));
  });
  return result;
}

}  // namespace lmforge::tokenizer_train
