// defines: load_hf_tokenizer(): the tokenizer.json pipeline (added tokens, normalizer, pre-tokenizer, model,
// decoder), with fast paths onto the GPT-2 BPE and BERT WordPiece implementations where the file is exactly those
#include "text/hf_tokenizer_json.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_set>

#include "text/bert_wordpiece.h"
#include "text/gpt2_bpe.h"
#include "text/hf_components.h"
#include "text/hf_post_processor.h"
#include "text/unicode_classes.h"
#include "text/utf8_repair.h"
#include "util/error.h"
#include "util/json_text.h"

namespace lmforge::text {

namespace {

using namespace hf;
using simdjson::dom::element;

struct AddedToken {
  int32_t id;
  std::string content;  // for normalized tokens: the content after the normalizer
  bool single_word, lstrip, rstrip, normalized, special;
};

// Leftmost-longest matching of added tokens (HF builds an Aho-Corasick automaton with MatchKind::LeftmostLongest;
// the sets are small, so candidates are bucketed by first byte and tried longest first).
class AddedMatcher {
 public:
  void add(const AddedToken* t) {
    if (t->content.empty()) return;
    auto& bucket = by_first_[static_cast<unsigned char>(t->content[0])];
    bucket.push_back(t);
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
    any_ = true;
  }
  bool empty() const { return !any_; }
  // Next match starting at or after `from`, or nullptr.
  const AddedToken* find(std::string_view s, size_t from, size_t& at) const {
    for (size_t i = from; i < s.size(); ++i) {
      const auto& bucket = by_first_[static_cast<unsigned char>(s[i])];
      for (const AddedToken* t : bucket) {
        if (s.size() - i >= t->content.size() && std::memcmp(s.data() + i, t->content.data(), t->content.size()) == 0) {
          at = i;
          return t;
        }
      }
    }
    return nullptr;
  }

 private:
  std::vector<const AddedToken*> by_first_[256];
  bool any_ = false;
};

bool is_ws(uint32_t cp) { return char_class(cp) == kSpace; }
bool is_word(uint32_t cp) { return char_class(cp) == kLetter || char_class(cp) == kNumber || cp == '_'; }

uint32_t last_char(std::string_view s, size_t end, size_t& start) {
  size_t k = end - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  int len;
  start = k;
  return next_char(s, k, len);
}

// HF's AddedVocabulary::find_matches: splits `s` into added tokens and the text between them.
template <class OnText, class OnToken>
void split_added(std::string_view s, const AddedMatcher& m, OnText&& on_text, OnToken&& on_token) {
  if (m.empty()) {
    if (!s.empty()) on_text(0, s.size());
    return;
  }
  size_t start_offset = 0, from = 0, at = 0;
  while (const AddedToken* t = m.find(s, from, at)) {
    size_t start = at, stop = at + t->content.size();
    from = stop;
    if (start < start_offset) continue;  // inside whitespace an rstrip already took
    if (t->single_word) {
      size_t k;
      const bool start_space = start == 0 || !is_word(last_char(s, start, k));
      int len;
      const bool stop_space = stop == s.size() || !is_word(next_char(s, stop, len));
      if (!start_space || !stop_space) continue;
    }
    if (t->lstrip) {
      size_t b = start;
      while (b > 0) {
        size_t k;
        if (!is_ws(last_char(s, b, k))) break;
        b = k;
      }
      start = std::max(b, start_offset);
    }
    if (t->rstrip) {
      while (stop < s.size()) {
        int len;
        if (!is_ws(next_char(s, stop, len))) break;
        stop += size_t(len);
      }
    }
    if (start > start_offset) on_text(start_offset, start);
    on_token(t->id);
    start_offset = stop;
  }
  if (start_offset < s.size()) on_text(start_offset, s.size());
}

std::string read_whole(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open " + what + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path + ": cannot read " + what);
  return ss.str();
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Per-thread word cache: word bytes -> ids, open addressing over arenas (a node-based map spends its time
// chasing pointers). Emptied when it reaches kMaxEntries, so a worker's memory stays bounded.
class WordCache {
 public:
  WordCache() { table_.assign(1 << 12, Entry{}); }
  // The cached ids of `w`, or false.
  bool find(std::string_view w, uint64_t h, std::vector<int32_t>& out) const {
    for (size_t i = h & mask(); table_[i].len_plus1 != 0; i = (i + 1) & mask()) {
      const Entry& e = table_[i];
      if (e.hash == h && e.len_plus1 - 1 == w.size() && std::memcmp(keys_.data() + e.key_off, w.data(), w.size()) == 0) {
        out.insert(out.end(), ids_.begin() + e.ids_off, ids_.begin() + e.ids_off + e.ids_len);
        return true;
      }
    }
    return false;
  }
  void insert(std::string_view w, uint64_t h, const int32_t* ids, size_t n) {
    if (size_ >= kMaxEntries) {
      std::fill(table_.begin(), table_.end(), Entry{});
      keys_.clear();
      ids_.clear();
      size_ = 0;
    }
    if ((size_ + 1) * 2 > table_.size()) {
      std::vector<Entry> old = std::move(table_);
      table_.assign(old.size() * 2, Entry{});
      for (const Entry& e : old)
        if (e.len_plus1 != 0) table_[free_slot(e.hash)] = e;
    }
    table_[free_slot(h)] = Entry{h, uint32_t(keys_.size()), uint32_t(w.size() + 1), uint32_t(ids_.size()), uint32_t(n)};
    keys_.append(w);
    ids_.insert(ids_.end(), ids, ids + n);
    ++size_;
  }
  static uint64_t hash(std::string_view w) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ w.size();
    const char* p = w.data();
    size_t n = w.size();
    auto mix = [](uint64_t x) {
      x ^= x >> 31;
      x *= 0xBF58476D1CE4E5B9ull;
      return x ^ (x >> 29);
    };
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      h = mix(h ^ v) * 0x94D049BB133111EBull;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p, n);
    return mix(h ^ tail ^ (uint64_t(n) << 59));
  }

 private:
  static constexpr size_t kMaxEntries = 1 << 18;
  struct Entry {
    uint64_t hash = 0;
    uint32_t key_off = 0, len_plus1 = 0;  // 0: free
    uint32_t ids_off = 0, ids_len = 0;
  };
  size_t mask() const { return table_.size() - 1; }
  size_t free_slot(uint64_t h) const {
    size_t i = h & mask();
    while (table_[i].len_plus1 != 0) i = (i + 1) & mask();
    return i;
  }
  std::vector<Entry> table_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t size_ = 0;
};

class HfTokenizer;

class HfEncoder final : public TextEncoder {
 public:
  explicit HfEncoder(const HfTokenizer& tok);
  void encode(std::string_view text, std::vector<int32_t>& ids) override;

 private:
  void encode_plain(std::string_view text, std::vector<int32_t>& ids);
  void encode_text(std::string_view s, bool at_start, std::vector<int32_t>& ids);
  void encode_normalized(std::string_view s, bool at_start, std::vector<int32_t>& ids);
  void encode_word(const std::string& w, std::vector<int32_t>& ids);

  const HfTokenizer& tok_;
  std::unique_ptr<TextEncoder> fast_;
  WordCache cache_;
  std::string scratch_;
  std::vector<int32_t> text_ids_;
  Pieces pieces_;
};

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(std::string_view json, const std::string& origin, const HfTokenizerOptions& options,
              std::optional<std::string> config_eos) {
    cx_.origin = origin;
    simdjson::dom::parser parser;
    element root;
    simdjson::padded_string padded(json);
    if (auto err = parser.parse(padded).get(root); err)
      throw Error(origin + ": not valid JSON: " + simdjson::error_message(err));
    if (root.type() != simdjson::dom::element_type::OBJECT) cx_.fail("(root)", "expected a JSON object");

    auto model = opt_field(root, "model");
    if (!model) cx_.fail("model", "missing");
    model_ = make_model(*model, "model", cx_);
    if (auto n = opt_field(root, "normalizer")) normalizer_ = make_normalizer(*n, "normalizer", cx_);
    if (auto p = opt_field(root, "pre_tokenizer")) pre_tokenizer_ = make_pre_tokenizer(*p, "pre_tokenizer", cx_);
    if (auto d = opt_field(root, "decoder")) {
      try {
        decoder_ = make_decoder(*d, "decoder", cx_);
      } catch (const Error& e) {
        decoder_error_ = e.what();  // reported by decode(); encoding does not need the decoder
      }
    }
    read_added_tokens(root);
    // The post-processor's ids around each text (none when the file has none, or the layout leaves ids as they are).
    if (auto p = opt_field(root, "post_processor")) {
      HfSpecialTokens special = make_post_processor(*p, "post_processor", cx_, options.add_special_tokens);
      if (!special.identity()) special_ = std::move(special);
    }
    if (options.fast_paths) choose_fast_path(root, *model);

    // get_vocab_size(with_added_tokens=true): distinct strings of the model vocabulary and added tokens.
    vocab_size_ = model_->vocab().size();
    for (const auto& t : added_)
      if (!model_->token_to_id(t.raw)) ++vocab_size_;  // contents are distinct (repeats were dropped)

    auto find_token = [&](const std::string& s) -> std::optional<int32_t> {
      for (const auto& t : added_)
        if (t.raw == s) return t.tok.id;
      return model_->token_to_id(s);
    };
    if (!options.eod_token.empty()) {
      eod_id_ = find_token(options.eod_token);
      if (!eod_id_)
        throw Error(origin + ": --eod-token \"" + options.eod_token +
                    "\" is neither an added token nor in the model's vocabulary");
    } else {
      if (config_eos) eod_id_ = find_token(*config_eos);
      for (const char* c : {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eos|>", "[EOS]"}) {
        if (eod_id_) break;
        eod_id_ = find_token(c);
      }
    }
  }

  std::unique_ptr<TextEncoder> make_encoder() const override { return std::make_unique<HfEncoder>(*this); }

  std::string decode(std::span<const int32_t> ids) const override {
    if (!decoder_error_.empty()) throw Error("decode: " + decoder_error_);
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const int32_t id : ids) {
      if (auto it = added_by_id_.find(id); it != added_by_id_.end()) {
        tokens.push_back(it->second);
      } else if (const std::string* t = model_->id_to_token(id)) {
        tokens.push_back(*t);
      } else {
        throw Error("decode: token id " + std::to_string(id) + " is not in the vocabulary of " + cx_.origin);
      }
    }
    std::string out;
    if (decoder_) {
      decoder_->decode_chain(tokens);
      for (const auto& t : tokens) out += t;
    } else {
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (i) out.push_back(' ');
        out += tokens[i];
      }
    }
    std::string valid;
    append_repaired_utf8(out, valid);
    return valid;
  }
  size_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> eod_id() const override { return eod_id_; }
  std::string type_name() const override { return "PretrainedFromHF"; }

 private:
  friend class HfEncoder;
  enum class Fast { kNone, kGpt2, kBert };

  struct Added {
    AddedToken tok;
    std::string raw;  // content as written in the file
  };

  void read_added_tokens(const element& root) {
    auto list = opt_field(root, "added_tokens");
    if (!list) return;
    simdjson::dom::array arr;
    if (list->get(arr) != simdjson::SUCCESS) cx_.fail("added_tokens", "expected an array");
    // Ids as HF's AddedVocabulary::add_tokens assigns them when it loads the file (the "id" fields are only
    // compared, with a warning): a content already in the model's vocabulary keeps that id; a new one gets the
    // model's vocabulary size, or one more than the largest added id once that reaches it. A repeated content is
    // ignored.
    std::unordered_map<std::string, int32_t> by_content;
    const int64_t model_size = int64_t(model_->vocab().size());
    int64_t max_id = -1;
    size_t i = 0;
    for (element t : arr) {
      const std::string path = "added_tokens[" + std::to_string(i++) + "]";
      auto file_id = opt_int(t, "id", path, cx_);
      if (!file_id || *file_id < 0 || *file_id > INT32_MAX) cx_.fail(path + ".id", "expected a token id");
      Added a;
      a.raw = get_string(t, "content", path, cx_);
      if (a.raw.empty() || by_content.count(a.raw)) continue;
      int64_t id;
      if (auto m = model_->token_to_id(a.raw)) id = *m;
      else if (max_id < 0) id = model_size;
      else id = (max_id >= model_size || model_size == 0) ? max_id + 1 : model_size;
      if (id > INT32_MAX) cx_.fail(path, "token id out of range");
      by_content[a.raw] = int32_t(id);
      max_id = std::max(max_id, id);
      a.tok = AddedToken{int32_t(id), a.raw, get_bool(t, "single_word", false, path, cx_),
                         get_bool(t, "lstrip", false, path, cx_), get_bool(t, "rstrip", false, path, cx_),
                         get_bool(t, "normalized", true, path, cx_), get_bool(t, "special", false, path, cx_)};
      // Normalized tokens are matched in normalized text, so their patterns are normalized too.
      if (a.tok.normalized && normalizer_) normalizer_->normalize(a.tok.content);
      added_.push_back(std::move(a));
    }
    for (const Added& a : added_) {
      (a.tok.normalized ? normalized_ : raw_).add(&a.tok);
      added_by_id_[a.tok.id] = a.tok.content;  // HF decodes a normalized token to its normalized content
    }
  }

  // The two implementations tuned for speed, used when the file is exactly their pipeline (pre-tokenizer and
  // model; for BERT also the normalizer). If they refuse the vocabulary, the generic pipeline runs.
  void choose_fast_path(const element& root, const element& model) {
    auto pre = opt_field(root, "pre_tokenizer");
    auto norm = opt_field(root, "normalizer");
    if (!pre) return;
    const std::string pre_type = get_type(*pre, "pre_tokenizer", cx_);
    const std::string mtype = model_->type();
    if (pre_type == "ByteLevel" && mtype == "BPE" && get_bool(*pre, "use_regex", true, "pre_tokenizer", cx_) &&
        !opt_string(model, "continuing_subword_prefix", "model", cx_).value_or("").size() &&
        !opt_string(model, "end_of_word_suffix", "model", cx_).value_or("").size() &&
        !get_bool(model, "ignore_merges", false, "model", cx_)) {
      std::string vocab = "{";
      for (const auto& [tok, id] : model_->vocab()) {
        if (vocab.size() > 1) vocab.push_back(',');
        vocab += json_quote(tok) + ":" + std::to_string(id);
      }
      vocab.push_back('}');
      std::string merges;
      for (element m : get_array(model, "merges", "model", cx_)) {
        std::string_view str;
        simdjson::dom::array pair;
        if (m.get(str) == simdjson::SUCCESS) {
          merges.append(str);
        } else if (m.get(pair) == simdjson::SUCCESS && pair.size() == 2) {
          std::string_view a, b;
          if (pair.at(0).get(a) != simdjson::SUCCESS || pair.at(1).get(b) != simdjson::SUCCESS) return;
          if (a.find(' ') != std::string_view::npos || b.find(' ') != std::string_view::npos) return;
          merges.append(a);
          merges.push_back(' ');
          merges.append(b);
        }
        merges.push_back('\n');
      }
      try {
        fast_tok_ = std::make_unique<Gpt2BpeTokenizer>(vocab, merges, cx_.origin, cx_.origin);
      } catch (const Error&) {
        return;  // not a complete byte-level vocabulary: the generic BPE reproduces HF there
      }
      fast_ = Fast::kGpt2;
      fast_prefix_space_ = get_bool(*pre, "add_prefix_space", true, "pre_tokenizer", cx_);
      return;
    }
    if (pre_type == "BertPreTokenizer" && mtype == "WordPiece" && norm &&
        get_type(*norm, "normalizer", cx_) == "BertNormalizer" && normalized_.empty() &&
        opt_string(model, "continuing_subword_prefix", "model", cx_).value_or("##") == "##") {
      const auto& v = model_->vocab();
      std::vector<std::string> tokens(v.size());
      std::vector<uint8_t> seen(v.size(), 0);
      for (const auto& [tok, id] : v) {
        if (size_t(id) >= v.size() || seen[id]) return;  // ids not dense
        tokens[id] = tok;
        seen[id] = 1;
      }
      WordPieceOptions o;
      o.flavor = WordPieceFlavor::kHuggingFace;
      o.lower_case = get_bool(*norm, "lowercase", true, "normalizer", cx_);
      o.max_input_chars_per_word = size_t(opt_int(model, "max_input_chars_per_word", "model", cx_).value_or(100));
      o.unk_token = opt_string(model, "unk_token", "model", cx_).value_or("[UNK]");
      try {
        fast_tok_ = make_bert_wordpiece_tokenizer(std::move(tokens), o, cx_.origin);
      } catch (const Error&) {
        return;
      }
      fast_ = Fast::kBert;
    }
  }

 private:
  Context cx_;
  std::unique_ptr<HfModel> model_;
  std::unique_ptr<HfNormalizer> normalizer_;
  std::unique_ptr<HfPreTokenizer> pre_tokenizer_;
  std::unique_ptr<HfDecoder> decoder_;
  std::optional<HfSpecialTokens> special_;
  std::string decoder_error_;
  std::vector<Added> added_;
  AddedMatcher raw_, normalized_;
  std::unordered_map<int32_t, std::string> added_by_id_;
  size_t vocab_size_ = 0;
  std::optional<int32_t> eod_id_;
  Fast fast_ = Fast::kNone;
  bool fast_prefix_space_ = false;
  std::unique_ptr<Tokenizer> fast_tok_;
};

HfEncoder::HfEncoder(const HfTokenizer& tok) : tok_(tok) {
  if (tok.fast_tok_) fast_ = tok.fast_tok_->make_encoder();
}

void HfEncoder::encode(std::string_view text, std::vector<int32_t>& ids) {
  // HF adds the special tokens even around an empty text, so every text gives ids.
  if (tok_.special_) {
    tok_.special_->apply([&](std::vector<int32_t>& out) { encode_plain(text, out); }, ids, text_ids_);
    return;
  }
  encode_plain(text, ids);
}

void HfEncoder::encode_plain(std::string_view text, std::vector<int32_t>& ids) {
  split_added(
      text, tok_.raw_, [&](size_t b, size_t e) { encode_text(text.substr(b, e - b), b == 0, ids); },
      [&](int32_t id) { ids.push_back(id); });
}

void HfEncoder::encode_text(std::string_view s, bool at_start, std::vector<int32_t>& ids) {
  if (tok_.fast_ == HfTokenizer::Fast::kBert) {
    fast_->encode(s, ids);
    return;
  }
  if (!tok_.normalizer_) {
    split_added(
        s, tok_.normalized_, [&](size_t b, size_t e) { encode_normalized(s.substr(b, e - b), at_start && b == 0, ids); },
        [&](int32_t id) { ids.push_back(id); });
    return;
  }
  std::string norm(s);
  tok_.normalizer_->normalize(norm);
  split_added(
      norm, tok_.normalized_,
      [&](size_t b, size_t e) { encode_normalized(std::string_view(norm).substr(b, e - b), at_start && b == 0, ids); },
      [&](int32_t id) { ids.push_back(id); });
}

void HfEncoder::encode_normalized(std::string_view s, bool at_start, std::vector<int32_t>& ids) {
  if (s.empty()) return;
  if (tok_.fast_ == HfTokenizer::Fast::kGpt2) {
    if (tok_.fast_prefix_space_ && s[0] != ' ') {
      scratch_.assign(" ");
      scratch_.append(s);
      fast_->encode(scratch_, ids);
    } else {
      fast_->encode(s, ids);
    }
    return;
  }
  pieces_.clear();
  pieces_.push_back(Piece{std::string(s), at_start});
  if (tok_.pre_tokenizer_) tok_.pre_tokenizer_->pre_tokenize(pieces_);
  for (const Piece& p : pieces_) encode_word(p.text, ids);
}

void HfEncoder::encode_word(const std::string& w, std::vector<int32_t>& ids) {
  if (w.empty()) return;
  if (w.size() > 256) {  // rare; would bloat the cache
    tok_.model_->tokenize(w, ids);
    return;
  }
  const uint64_t h = WordCache::hash(w);
  if (cache_.find(w, h, ids)) return;
  const size_t before = ids.size();
  tok_.model_->tokenize(w, ids);
  cache_.insert(w, h, ids.data() + before, ids.size() - before);
}

}  // namespace

std::unique_ptr<Tokenizer> make_hf_tokenizer(std::string_view json, const std::string& origin,
                                             const HfTokenizerOptions& options) {
  return std::make_unique<HfTokenizer>(json, origin, options, std::nullopt);
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path, const HfTokenizerOptions& options) {
  std::string file = path;
  std::optional<std::string> config_eos;
  if (is_dir(path)) {
    file = path + "/tokenizer.json";
    const std::string config = path + "/tokenizer_config.json";
    std::ifstream probe(config);
    if (probe && options.eod_token.empty()) {
      const std::string text = read_whole(config, "tokenizer_config.json");
      simdjson::dom::parser parser;
      simdjson::padded_string padded(text);
      element root;
      if (auto err = parser.parse(padded).get(root); err)
        throw Error(config + ": not valid JSON: " + simdjson::error_message(err));
      if (auto eos = opt_field(root, "eos_token")) {
        std::string_view s;
        if (eos->get(s) == simdjson::SUCCESS) {
          config_eos = std::string(s);
        } else if (auto c = opt_field(*eos, "content"); c && c->get(s) == simdjson::SUCCESS) {
          config_eos = std::string(s);
        }
      }
    }
  }
  const std::string json = read_whole(file, "the Hugging Face tokenizer (tokenizer.json)");
  return std::make_unique<HfTokenizer>(json, file, options, config_eos);
}

}  // namespace lmforge::text
