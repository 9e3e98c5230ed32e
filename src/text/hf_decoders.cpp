// defines: make_decoder() and the tokenizer.json decoders (ByteLevel, Metaspace, WordPiece, BPEDecoder,
// ByteFallback, Fuse, Strip, Replace, Sequence), each as Hugging Face tokenizers runs it
#include <algorithm>

#include "text/gpt2_bpe.h"
#include "text/hf_component_util.h"
#include "text/hf_components.h"
#include "text/utf8_repair.h"

namespace lmforge::text::hf {

using simdjson::dom::element;

namespace {

// ---------------------------------------------------------------------------------------------------------
// Decoders

class SequenceDecoder final : public HfDecoder {
 public:
  std::vector<std::unique_ptr<HfDecoder>> steps;
  void decode_chain(std::vector<std::string>& t) const override {
    for (const auto& d : steps) d->decode_chain(t);
  }
};

class ByteLevelDecoder final : public HfDecoder {
 public:
  ByteLevelDecoder() {
    std::fill(std::begin(to_byte_), std::end(to_byte_), int16_t{-1});
    for (int b = 0; b < 256; ++b) to_byte_[gpt2_byte_to_unicode(uint8_t(b))] = int16_t(b);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string tb;
      bool ok = true;
      for_each_char(t, [&](uint32_t cp, size_t, int) {
        if (cp < 324 && to_byte_[cp] >= 0) tb.push_back(char(to_byte_[cp]));
        else ok = false;
      });
      bytes += ok ? tb : t;
    }
    std::string out;
    append_repaired_utf8(bytes, out);
    tokens.assign(1, out);
  }

 private:
  int16_t to_byte_[324];
};

class MetaspaceDecoder final : public HfDecoder {
 public:
  std::string rep;
  bool prepend = true;  // prepend_scheme != never
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, rep.size(), rep) == 0) {
          out.push_back(' ');
          k += rep.size();
        } else {
          out.push_back(t[k++]);
        }
      }
      if (i == 0 && prepend && !out.empty() && out[0] == ' ') out.erase(0, 1);
      tokens[i] = std::move(out);
    }
  }
};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t prev = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) {
    out.append(s, prev, at - prev);
    out += to;
    prev = at + from.size();
  }
  if (prev == 0) return;
  out.append(s, prev, std::string::npos);
  s.swap(out);
}

class WordPieceDecoder final : public HfDecoder {
 public:
  std::string prefix = "##";
  bool cleanup = true;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix.size(), prefix) == 0) t.erase(0, prefix.size());
        else t.insert(size_t{0}, 1, ' ');  // not insert(0, " "): a false -Wrestrict from GCC 12 at -O3
      }
      if (cleanup) {
        // HF's cleanup(): tokenization spaces before punctuation and contractions.
        replace_all(t, " .", ".");
        replace_all(t, " ?", "?");
        replace_all(t, " !", "!");
        replace_all(t, " ,", ",");
        replace_all(t, " ' ", "'");
        replace_all(t, " n't", "n't");
        replace_all(t, " 'm", "'m");
        replace_all(t, " do not", " don't");
        replace_all(t, " 's", "'s");
        replace_all(t, " 've", "'ve");
        replace_all(t, " 're", "'re");
      }
    }
  }
};

class BpeDecoder final : public HfDecoder {
 public:
  std::string suffix = "</w>";
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
  }
};

class ByteFallbackDecoder final : public HfDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t count = 0;
    auto flush = [&] {
      if (count == 0) return;
      std::string valid;
      const size_t replaced = repair_count(bytes, valid);
      if (replaced == 0) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < count; ++k) out.push_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      count = 0;
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        auto hex = [](char c) -> int {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          return -1;
        };
        const int hi = hex(t[3]), lo = hex(t[4]);
        if (hi >= 0 && lo >= 0) byte = hi * 16 + lo;
      }
      if (byte >= 0) {
        bytes.push_back(char(byte));
        ++count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }

 private:
  static size_t repair_count(const std::string& bytes, std::string& out) {
    append_repaired_utf8(bytes, out);
    return out == bytes ? 0 : 1;
  }
};

class FuseDecoder final : public HfDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

class StripDecoder final : public HfDecoder {
 public:
  std::string content;
  size_t start = 0, stop = 0;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      for (size_t k = 0; k < start && t.compare(0, content.size(), content) == 0 && !content.empty(); ++k)
        t.erase(0, content.size());
      for (size_t k = 0; k < stop && !content.empty() && t.size() >= content.size() &&
                         t.compare(t.size() - content.size(), content.size(), content) == 0;
           ++k)
        t.erase(t.size() - content.size());
    }
  }
};

class ReplaceDecoder final : public HfDecoder {
 public:
  ReplaceNormalizer impl;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) impl.normalize(t);
  }
};

}  // namespace

std::unique_ptr<HfDecoder> make_decoder(const element& e, const std::string& path, const Context& cx) {
  const std::string type = get_type(e, path, cx);
  if (type == "Sequence") {
    auto seq = std::make_unique<SequenceDecoder>();
    size_t i = 0;
    for (element sub : get_array(e, "decoders", path, cx)) {
      seq->steps.push_back(make_decoder(sub, path + ".decoders[" + std::to_string(i) + "]", cx));
      ++i;
    }
    return seq;
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    auto m = std::make_unique<MetaspaceDecoder>();
    uint32_t cp;
    m->rep = single_char(e, "replacement", path, cx, cp);
    if (auto scheme = opt_string(e, "prepend_scheme", path, cx)) m->prepend = *scheme != "never";
    else m->prepend = get_bool(e, "add_prefix_space", true, path, cx);
    return m;
  }
  if (type == "WordPiece") {
    auto w = std::make_unique<WordPieceDecoder>();
    w->prefix = opt_string(e, "prefix", path, cx).value_or("##");
    w->cleanup = get_bool(e, "cleanup", true, path, cx);
    return w;
  }
  if (type == "BPEDecoder") {
    auto b = std::make_unique<BpeDecoder>();
    b->suffix = opt_string(e, "suffix", path, cx).value_or("</w>");
    return b;
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto s = std::make_unique<StripDecoder>();
    s->content = get_string(e, "content", path, cx);
    s->start = size_t(opt_int(e, "start", path, cx).value_or(0));
    s->stop = size_t(opt_int(e, "stop", path, cx).value_or(0));
    return s;
  }
  if (type == "Replace") {
    auto r = std::make_unique<ReplaceDecoder>();
    r->impl.pattern = read_pattern(e, path, cx);
    r->impl.content = get_string(e, "content", path, cx);
    return r;
  }
  cx.fail(path, "decoder type \"" + type +
                    "\" is not supported (supported: ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback, "
                    "Fuse, Strip, Replace, Sequence)");
}

}  // namespace lmforge::text::hf
