// defines: libFuzzer target for the tokenizers: GPT-2 byte-level BPE must decode its encoding of any valid UTF-8
//          text back to the text (byte-level BPE loses nothing); BERT WordPiece and the tokenizer.json pipelines
//          (GPT-2 and BERT) must encode any bytes and decode their ids without crashing
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer_factory.h"

namespace {

std::string shared(const std::string& relative) { return std::string(LMFORGE_SHARED_DIR) + "/" + relative; }

struct Tokenizers {
  std::unique_ptr<lmforge::text::Tokenizer> gpt2, bert, hf_gpt2, hf_bert;
  Tokenizers() {
    lmforge::text::TokenizerOptions o;
    o.type = "GPT2BPETokenizer";
    o.vocab_file = shared("data/vocab/gpt2-vocab.json");
    o.merge_file = shared("data/vocab/gpt2-merges.txt");
    gpt2 = lmforge::text::make_tokenizer(o);
    lmforge::text::TokenizerOptions b;
    b.type = "BertWordPieceLowerCase";
    b.vocab_file = shared("data/vocab/bert-base-uncased-vocab.txt");
    bert = lmforge::text::make_tokenizer(b);
    lmforge::text::TokenizerOptions h;
    h.type = "PretrainedFromHF";
    h.name_or_path = shared("data/vocab/gpt2.tokenizer.json");
    hf_gpt2 = lmforge::text::make_tokenizer(h);
    h.name_or_path = shared("data/vocab/bert.tokenizer.json");
    hf_bert = lmforge::text::make_tokenizer(h);
  }
};

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizers t;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<int32_t> ids;
  t.gpt2->make_encoder()->encode(text, ids);
  if (valid_utf8(text) && t.gpt2->decode(ids) != text) std::abort();  // byte-level BPE must round-trip
  for (const auto* tok : {t.bert.get(), t.hf_gpt2.get(), t.hf_bert.get()}) {
    ids.clear();
    tok->make_encoder()->encode(text, ids);
    for (int32_t id : ids)
      if (id < 0 || static_cast<size_t>(id) >= tok->vocab_size()) std::abort();
    (void)tok->decode(ids);
  }
  return 0;
}
