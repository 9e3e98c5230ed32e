// defines: Gpt2BpeTokenizer (vocab/merges loading, decode) and Gpt2BpeEncoder (pre-tokenize, cache, BPE)
#include "text/gpt2_bpe.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <sstream>

#include "text/gpt2_pretokenizer.h"
#include "text/unicode_classes.h"
#include "text/utf8_repair.h"
#include "util/error.h"

namespace lmforge::text {

namespace {

// GPT-2's bytes_to_unicode(): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to themselves; the remaining 68
// (controls, space, DEL, 0x80..0xA0, soft hyphen) map to 256, 257, ... in byte order.
struct ByteMap {
  uint32_t to_unicode[256];
  int16_t to_byte[324];  // inverse over the code points used; -1 elsewhere
  ByteMap() {
    std::fill(std::begin(to_byte), std::end(to_byte), int16_t{-1});
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_unicode[b] = printable ? uint32_t(b) : next++;
      to_byte[to_unicode[b]] = int16_t(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open " + what + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path + ": cannot read " + what);
  return ss.str();
}

size_t line_of(std::string_view text, size_t offset) {
  return 1 + size_t(std::count(text.begin(), text.begin() + std::min(offset, text.size()), '\n'));
}

std::string hex_cp(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", cp);
  return buf;
}

// vocab.json's spelling (UTF-8 of byte stand-ins) -> raw bytes; nullopt names the offending code point.
bool spelling_to_bytes(std::string_view spelling, std::string& bytes, uint32_t& bad_cp) {
  bytes.clear();
  const auto* p = reinterpret_cast<const uint8_t*>(spelling.data());
  const auto* end = p + spelling.size();
  const ByteMap& map = byte_map();
  while (p < end) {
    uint32_t cp;
    const int len = decode_utf8(p, end, cp);
    if (len == 0) {
      bad_cp = 0xFFFD;
      return false;
    }
    if (cp >= 324 || map.to_byte[cp] < 0) {
      bad_cp = cp;
      return false;
    }
    bytes.push_back(char(map.to_byte[cp]));
    p += len;
  }
  return true;
}

// Minimal reader for vocab.json: one JSON object of string keys and integer values. Errors name file:line.
class VocabJsonReader {
 public:
  VocabJsonReader(std::string_view s, const std::string& name) : s_(s), name_(name) {}

  template <class OnEntry>
  void read(OnEntry&& on_entry) {
    skip_ws();
    expect('{', "expected '{' at the start of the vocabulary object");
    skip_ws();
    if (peek() == '}') {
      ++i_;
    } else {
      std::string key;
      while (true) {
        skip_ws();
        const size_t key_at = i_;
        expect('"', "expected a string key");
        read_string(key);
        skip_ws();
        expect(':', "expected ':' after a key");
        skip_ws();
        const int64_t value = read_int();
        on_entry(key, value, key_at);
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}', "expected ',' or '}' after a value");
        break;
      }
    }
    skip_ws();
    if (i_ != s_.size()) fail(i_, "unexpected text after the vocabulary object");
  }

  [[noreturn]] void fail(size_t at, const std::string& reason) const {
    throw Error(input_location(name_, line_of(s_, at)) + ": " + reason);
  }

 private:
  int peek() const { return i_ < s_.size() ? static_cast<unsigned char>(s_[i_]) : -1; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  void expect(char c, const char* reason) {
    if (peek() != static_cast<unsigned char>(c)) fail(i_, i_ < s_.size() ? reason : "unexpected end of file");
    ++i_;
  }
  uint32_t read_hex4() {
    if (i_ + 4 > s_.size()) fail(i_, "truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else fail(i_ - 1, "bad hex digit in \\u escape");
    }
    return v;
  }
  void read_string(std::string& out) {
    out.clear();
    while (true) {
      if (i_ >= s_.size()) fail(i_, "unterminated string");
      const char c = s_[i_++];
      if (c == '"') return;
      if (static_cast<unsigned char>(c) < 0x20) fail(i_ - 1, "control character inside a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) fail(i_, "unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t cp = read_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') fail(i_, "unpaired surrogate escape");
            i_ += 2;
            const uint32_t lo = read_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail(i_ - 6, "unpaired surrogate escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail(i_ - 6, "unpaired surrogate escape");
          }
          append_utf8(cp, out);
          break;
        }
        default: fail(i_ - 1, std::string("bad escape \\") + e);
      }
    }
  }
  int64_t read_int() {
    const size_t start = i_;
    bool neg = false;
    if (peek() == '-') {
      neg = true;
      ++i_;
    }
    int64_t v = 0;
    size_t digits = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (int64_t{1} << 40)) fail(start, "token id out of range");
      v = v * 10 + (s_[i_++] - '0');
      ++digits;
    }
    if (digits == 0 || peek() == '.' || peek() == 'e' || peek() == 'E') fail(start, "expected an integer token id");
    return neg ? -v : v;
  }

  std::string_view s_;
  const std::string& name_;
  size_t i_ = 0;
};

}  // namespace

uint32_t gpt2_byte_to_unicode(uint8_t byte) { return byte_map().to_unicode[byte]; }

// ---------------------------------------------------------------------------------------------------------
// Loading

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const std::string& vocab_file, const std::string& merge_file,
                                   Gpt2BpeOptions options)
    : options_(options) {
  const std::string vocab = read_file(vocab_file, "the GPT-2 vocabulary (vocab.json)");
  const std::string merges = read_file(merge_file, "the GPT-2 merges (merges.txt)");
  load(vocab, merges, vocab_file, merge_file);
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(std::string_view vocab_json, std::string_view merges_txt,
                                   const std::string& vocab_name, const std::string& merges_name,
                                   Gpt2BpeOptions options)
    : options_(options) {
  load(vocab_json, merges_txt, vocab_name, merges_name);
}

Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

void Gpt2BpeTokenizer::load(std::string_view vocab_json, std::string_view merges_txt, const std::string& vocab_name,
                            const std::string& merges_name) {
  if (options_.cache_max_entries == 0) throw Error("GPT-2 tokenizer: the word cache needs at least one entry");
  parse_vocab(vocab_json, vocab_name);
  parse_merges(merges_txt, merges_name, vocab_name);
}

void Gpt2BpeTokenizer::parse_vocab(std::string_view json, const std::string& name) {
  // Ids of a real vocabulary are dense; this cap only stops a corrupt file from allocating gigabytes.
  constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;
  VocabJsonReader reader(json, name);
  std::vector<std::pair<int32_t, std::string>> entries;
  std::string bytes;
  int64_t max_id = -1;
  reader.read([&](const std::string& key, int64_t id, size_t at) {
    uint32_t bad_cp = 0;
    if (!spelling_to_bytes(key, bytes, bad_cp))
      reader.fail(at, "token \"" + key + "\" contains " + hex_cp(bad_cp) +
                          ", which is not in GPT-2's byte-to-unicode alphabet");
    if (id < 0 || id > kMaxId) reader.fail(at, "token \"" + key + "\" has id " + std::to_string(id) + " out of range");
    auto [it, inserted] = vocab_.emplace(bytes, int32_t(id));
    if (!inserted) it->second = int32_t(id);  // as Python's json: a repeated key keeps its last value
    max_id = std::max(max_id, id);
  });
  if (vocab_.empty()) reader.fail(0, "the vocabulary is empty");

  std::vector<const std::string*> by_id(size_t(max_id) + 1, nullptr);
  for (const auto& [tok, id] : vocab_) {
    if (by_id[id] != nullptr)
      throw Error(name + ": id " + std::to_string(id) + " is used by two tokens");
    by_id[id] = &tok;
  }
  token_offset_.assign(by_id.size() + 1, 0);
  token_present_.assign(by_id.size(), 0);
  for (size_t id = 0; id < by_id.size(); ++id) {
    token_offset_[id] = uint32_t(token_arena_.size());
    if (by_id[id]) {
      token_arena_ += *by_id[id];
      token_present_[id] = 1;
    }
  }
  token_offset_[by_id.size()] = uint32_t(token_arena_.size());

  const ByteMap& map = byte_map();
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(std::string(1, char(b)));
    if (it == vocab_.end()) {
      std::string spelled;
      append_utf8(map.to_unicode[b], spelled);
      throw Error(name + ": the vocabulary has no token for byte " + std::to_string(b) + " (\"" + spelled +
                  "\"); a byte-level BPE vocabulary needs all 256");
    }
    byte_id_[b] = it->second;
  }
  if (auto it = vocab_.find("<|endoftext|>"); it != vocab_.end()) eod_id_ = it->second;
}

void Gpt2BpeTokenizer::parse_merges(std::string_view text, const std::string& name, const std::string& vocab_name) {
  struct Pair {
    int32_t left, right, merged;
  };
  std::vector<Pair> merges;
  size_t line_no = 0, pos = 0;
  std::string left_bytes, right_bytes;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.empty()) continue;
    if (line_no == 1 && line.starts_with("#version")) continue;
    const auto where = [&] { return input_location(name, line_no) + ": "; };
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw Error(where() + "expected two tokens separated by one space, got \"" + std::string(line) + "\"");
    const std::string_view left = line.substr(0, space), right = line.substr(space + 1);
    uint32_t bad_cp = 0;
    if (!spelling_to_bytes(left, left_bytes, bad_cp) || !spelling_to_bytes(right, right_bytes, bad_cp))
      throw Error(where() + "\"" + std::string(line) + "\" contains " + hex_cp(bad_cp) +
                  ", which is not in GPT-2's byte-to-unicode alphabet");
    const auto l = vocab_.find(left_bytes), r = vocab_.find(right_bytes), m = vocab_.find(left_bytes + right_bytes);
    const auto missing = [&](std::string_view tok) {
      return Error(where() + "merge token \"" + std::string(tok) + "\" is not in the vocabulary " + vocab_name);
    };
    if (l == vocab_.end()) throw missing(left);
    if (r == vocab_.end()) throw missing(right);
    if (m == vocab_.end()) throw missing(std::string(left) + std::string(right));
    merges.push_back({l->second, r->second, m->second});
  }
  merge_count_ = merges.size();

  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity <<= 1;
  merge_mask_ = capacity - 1;
  merge_shift_ = 64 - std::countr_zero(capacity);
  compact_ = token_present_.size() <= 0xFFFF && merges.size() <= 0xFFFF;  // keys never all ones
  merges_.assign(compact_ ? capacity : 2 * capacity, kEmpty);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    // A pair listed twice keeps its last rank, as Hugging Face's and GPT-2's dict-building code do.
    const Pair& mg = merges[rank];
    if (compact_) {
      const uint64_t key = (uint64_t(uint32_t(mg.left)) << 16) | uint32_t(mg.right);
      size_t h = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
      while (merges_[h] != kEmpty && (merges_[h] >> 32) != key) h = (h + 1) & merge_mask_;
      merges_[h] = (key << 32) | (uint64_t(rank) << 16) | uint64_t(uint32_t(mg.merged));
    } else {
      const uint64_t key = (uint64_t(uint32_t(mg.left)) << 32) | uint32_t(mg.right);
      size_t h = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
      while (merges_[2 * h] != kEmpty && merges_[2 * h] != key) h = (h + 1) & merge_mask_;
      merges_[2 * h] = key;
      merges_[2 * h + 1] = (uint64_t(rank) << 32) | uint32_t(mg.merged);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Queries and decoding

std::string_view Gpt2BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || size_t(id) >= token_present_.size() || !token_present_[id]) return {};
  return std::string_view(token_arena_).substr(token_offset_[id], token_offset_[id + 1] - token_offset_[id]);
}

std::optional<int32_t> Gpt2BpeTokenizer::token_id(std::string_view bytes) const {
  auto it = vocab_.find(std::string(bytes));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::string Gpt2BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string raw;
  for (const int32_t id : ids) {
    if (id < 0 || size_t(id) >= token_present_.size() || !token_present_[id])
      throw Error("GPT-2 decode: token id " + std::to_string(id) + " is not in the vocabulary");
    raw.append(token_arena_, token_offset_[id], token_offset_[id + 1] - token_offset_[id]);
  }
  std::string out;
  out.reserve(raw.size());
  append_repaired_utf8(raw, out);
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Encoding

// Per-thread state: a bounded word cache (piece bytes -> ids) over two arenas, and BPE scratch buffers.
class Gpt2BpeEncoder final : public TextEncoder {
 public:
  // Capped at 2^24 entries so that arena offsets (at most 64 bytes per entry) fit in 32 bits.
  explicit Gpt2BpeEncoder(const Gpt2BpeTokenizer& tok)
      : tok_(tok), max_entries_(std::min<size_t>(tok.options_.cache_max_entries, size_t{1} << 24)) {
    reset_slots(1024);
  }

  void encode(std::string_view text, std::vector<int32_t>& ids) override {
    for_each_gpt2_piece(text, [&](const uint8_t* p, size_t n) { encode_piece(p, n, ids); });
  }

 private:
  // Pieces longer than this are not cached (they are rare, and would bloat the arena); the linear BPE below
  // handles up to kLinearMax symbols, longer words go to the heap-based one.
  static constexpr size_t kMaxCachedLen = 128;
  static constexpr size_t kLinearMax = 64;

  struct Node {
    int32_t id;  // -1 once merged into its left neighbour
    int32_t prev, next;
  };

  struct Slot {
    uint32_t tag;  // high bits of the hash; the slot is free when key_len == 0
    uint32_t key_off;
    uint32_t ids_off;
    uint16_t key_len;
    uint16_t ids_len;
  };

  static uint64_t hash_bytes(const uint8_t* p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    while (n >= 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
      p += 8;
      n -= 8;
    }
    if (n > 0) {
      uint64_t v = 0;
      if (n >= 4) {
        uint32_t a, b;
        std::memcpy(&a, p, 4);
        std::memcpy(&b, p + n - 4, 4);
        v = (uint64_t(a) << 32) | b;
      } else {
        v = (uint64_t(p[0]) << 16) | (uint64_t(p[n >> 1]) << 8) | p[n - 1];
      }
      h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 29);
  }

  void reset_slots(size_t capacity) {
    slots_.assign(capacity, Slot{0, 0, 0, 0, 0});
    mask_ = capacity - 1;
    size_ = 0;
  }

  void encode_piece(const uint8_t* p, size_t n, std::vector<int32_t>& out) {
    if (n == 1) {
      out.push_back(tok_.byte_id_[p[0]]);
      return;
    }
    if (n > kMaxCachedLen) {
      bpe(p, n, out);
      return;
    }
    const uint64_t h = hash_bytes(p, n);
    const uint32_t tag = uint32_t(h >> 32);
    size_t i = h & mask_;
    while (slots_[i].key_len != 0) {
      const Slot& s = slots_[i];
      if (s.tag == tag && s.key_len == n && std::memcmp(key_arena_.data() + s.key_off, p, n) == 0) {
        // A plain loop: pieces have a few ids, and out.insert() would call memmove for each.
        const size_t at = out.size();
        out.resize(at + s.ids_len);
        const int32_t* src = ids_arena_.data() + s.ids_off;
        for (size_t k = 0; k < s.ids_len; ++k) out[at + k] = src[k];
        return;
      }
      i = (i + 1) & mask_;
    }
    const size_t before = out.size();
    bpe(p, n, out);
    insert(p, n, h, out.data() + before, out.size() - before);
  }

  void insert(const uint8_t* p, size_t n, uint64_t h, const int32_t* ids, size_t count) {
    // Bounded memory: at max_entries_ pieces, or when long pieces have filled the arenas (64 bytes per entry
    // on average), forget everything and start again.
    if (size_ >= max_entries_ || key_arena_.size() + ids_arena_.size() * sizeof(int32_t) > max_entries_ * 64) {
      key_arena_.clear();
      ids_arena_.clear();
      std::fill(slots_.begin(), slots_.end(), Slot{0, 0, 0, 0, 0});
      size_ = 0;
    }
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = h & mask_;
    while (slots_[i].key_len != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{uint32_t(h >> 32), uint32_t(key_arena_.size()), uint32_t(ids_arena_.size()), uint16_t(n),
                     uint16_t(count)};
    key_arena_.insert(key_arena_.end(), p, p + n);
    ids_arena_.insert(ids_arena_.end(), ids, ids + count);
    ++size_;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t size = size_;
    reset_slots(old.size() * 2);
    for (const Slot& s : old) {
      if (s.key_len == 0) continue;
      const uint64_t h = hash_bytes(key_arena_.data() + s.key_off, s.key_len);
      size_t i = h & mask_;
      while (slots_[i].key_len != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
    size_ = size;
  }

  // Byte-pair encoding of one piece: start from one symbol per byte; repeatedly merge the adjacent pair with
  // the lowest rank, the leftmost one on ties, until no adjacent pair has a merge. Appends the ids to out.
  void bpe(const uint8_t* p, size_t n, std::vector<int32_t>& out) {
    if (n > kLinearMax) {
      bpe_heap(p, n, out);
      return;
    }
    // sym[k] is the k-th symbol, rank[k]/merged[k] the merge of the pair (sym[k], sym[k+1]).
    int32_t sym[kLinearMax];
    uint32_t rank[kLinearMax];
    int32_t merged[kLinearMax];
    size_t m = n;
    for (size_t k = 0; k < n; ++k) sym[k] = tok_.byte_id_[p[k]];
    auto set_pair = [&](size_t k) {
      const auto slot = tok_.find_merge(sym[k], sym[k + 1]);
      rank[k] = slot.rank;
      merged[k] = slot.merged;
    };
    for (size_t k = 0; k + 1 < m; ++k) set_pair(k);
    while (m > 1) {
      // Lowest rank, then its leftmost position: two branch-free passes the compiler vectorises.
      uint32_t best = Gpt2BpeTokenizer::kNoMerge;
      for (size_t k = 0; k + 1 < m; ++k) best = std::min(best, rank[k]);
      if (best == Gpt2BpeTokenizer::kNoMerge) break;
      size_t at = 0;
      while (rank[at] != best) ++at;
      sym[at] = merged[at];
      // Drop symbol at+1 and pair at+1; pairs at-1 and at change.
      std::memmove(sym + at + 1, sym + at + 2, (m - at - 2) * sizeof(int32_t));
      if (m >= at + 3) {
        std::memmove(rank + at + 1, rank + at + 2, (m - at - 3) * sizeof(uint32_t));
        std::memmove(merged + at + 1, merged + at + 2, (m - at - 3) * sizeof(int32_t));
      }
      --m;
      if (at + 1 < m) set_pair(at);
      if (at > 0) set_pair(at - 1);
    }
    out.insert(out.end(), sym, sym + m);
  }

  // The same for long pieces in O(n log n): symbols in a linked list, candidate pairs in a min-heap keyed by
  // (rank, position of the left symbol), so equal ranks pop leftmost first. Entries made stale by an earlier
  // merge are recognised on pop (left symbol gone, or its current pair has another rank) and skipped.
  void bpe_heap(const uint8_t* p, size_t n, std::vector<int32_t>& out) {
    nodes_.resize(n);
    for (size_t k = 0; k < n; ++k)
      nodes_[k] = Node{tok_.byte_id_[p[k]], int32_t(k) - 1, k + 1 < n ? int32_t(k + 1) : -1};
    heap_.clear();
    auto push_pair = [&](int32_t left) {
      const int32_t right = nodes_[left].next;
      if (right < 0) return;
      const auto slot = tok_.find_merge(nodes_[left].id, nodes_[right].id);
      if (slot.rank == Gpt2BpeTokenizer::kNoMerge) return;
      heap_.push_back((uint64_t(slot.rank) << 32) | uint32_t(left));
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    };
    for (size_t k = 0; k + 1 < n; ++k) push_pair(int32_t(k));
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      const uint64_t top = heap_.back();
      heap_.pop_back();
      const uint32_t rank = uint32_t(top >> 32);
      const int32_t left = int32_t(uint32_t(top));
      Node& a = nodes_[left];
      if (a.id < 0 || a.next < 0) continue;
      Node& b = nodes_[a.next];
      const auto slot = tok_.find_merge(a.id, b.id);
      if (slot.rank != rank) continue;
      a.id = slot.merged;
      b.id = -1;
      a.next = b.next;
      if (a.next >= 0) nodes_[a.next].prev = left;
      if (a.prev >= 0) push_pair(a.prev);
      push_pair(left);
    }
    for (int32_t k = 0; k >= 0; k = nodes_[k].next) out.push_back(nodes_[k].id);
  }

  const Gpt2BpeTokenizer& tok_;
  const size_t max_entries_;
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
  std::vector<uint8_t> key_arena_;
  std::vector<int32_t> ids_arena_;
  std::vector<Node> nodes_;
  std::vector<uint64_t> heap_;
};

std::unique_ptr<TextEncoder> Gpt2BpeTokenizer::make_encoder() const { return std::make_unique<Gpt2BpeEncoder>(*this); }

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  Gpt2BpeEncoder(*this).encode(text, ids);
  return ids;
}

}  // namespace lmforge::text
