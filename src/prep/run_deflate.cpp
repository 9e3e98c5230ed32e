// defines: RunDeflater::compress(), DeflateCode, huffman_lengths()
//
// The stream (RFC 1950 zlib wrapper around one RFC 1951 block):
//   0x78 0x01 | BFINAL=1, BTYPE=2 (dynamic), HLIT, HDIST, HCLEN, the code-length code, the run-length coded code
//   lengths | symbols | end of block | Adler-32 (big-endian).
// Symbols: a byte is a literal; a run of k >= kMinRun equal bytes is the byte as a literal and then matches of
// distance 1 (copy the byte before) for the other k - 1, each 3 to 258 long. Two distance codes of length 1 are
// declared (a complete code; only code 0, distance 1, is used).
#include "prep/run_deflate.h"

#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <queue>

#include "util/error.h"

namespace lmforge::prep {
namespace {

constexpr int kLitLenSymbols = 286, kEndOfBlock = 256, kCodeLengthSymbols = 19;
// RFC 1951 §3.2.5: length symbols 257..285, their base lengths and extra bits.
constexpr std::array<uint16_t, 29> kLengthBase = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                                  31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::array<uint8_t, 29> kLengthExtra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                                  2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
// The order the code-length code's lengths are sent in (§3.2.7).
constexpr std::array<uint8_t, kCodeLengthSymbols> kCodeLengthOrder = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                                                      11, 4,  12, 3, 13, 2, 14, 1, 15};

// Match length 3..258 -> index into kLengthBase (symbol 257 + index).
constexpr std::array<uint8_t, 259> make_length_index() {
  std::array<uint8_t, 259> t{};
  for (size_t s = 0; s < kLengthBase.size(); ++s)
    for (uint32_t len = kLengthBase[s]; len < kLengthBase[s] + (1u << kLengthExtra[s]) && len <= 258; ++len)
      t[len] = static_cast<uint8_t>(s);  // 258 ends at symbol 285 (written last), not 284 + 31
  return t;
}
constexpr std::array<uint8_t, 259> kLengthIndex = make_length_index();

// LSB-first bit output (deflate's bit order); codes are stored bit-reversed so they go out MSB first. Between two
// flushes at most 56 bits are put; flush() stores whole bytes with one unaligned 8-byte write.
class BitWriter {
 public:
  explicit BitWriter(unsigned char* p) : p_(p) {}
  void put(uint64_t value, int bits) {
    buffer_ |= value << count_;
    count_ += bits;
  }
  void flush() {
    std::memcpy(p_, &buffer_, 8);  // little-endian: the first bits in the first byte
    p_ += count_ >> 3;
    buffer_ >>= count_ & ~7;  // count_ < 64: callers put at most 56 bits between flushes
    count_ &= 7;
  }
  unsigned char* finish() {  // pads the last byte with zero bits
    flush();
    if (count_ > 0) ++p_;
    return p_;
  }

 private:
  unsigned char* p_;
  uint64_t buffer_ = 0;
  int count_ = 0;
};

// Canonical codes (§3.2.2) for `lengths`, bit-reversed for BitWriter.
std::vector<uint16_t> canonical_codes(const std::vector<uint8_t>& lengths) {
  std::array<uint16_t, 16> count{}, next{};
  for (uint8_t l : lengths) ++count[l];
  count[0] = 0;
  for (int bits = 1, code = 0; bits < 16; ++bits) {
    code = (code + count[bits - 1]) << 1;
    next[bits] = static_cast<uint16_t>(code);
  }
  std::vector<uint16_t> codes(lengths.size(), 0);
  for (size_t s = 0; s < lengths.size(); ++s) {
    if (lengths[s] == 0) continue;
    const uint16_t code = next[lengths[s]]++;
    uint16_t reversed = 0;
    for (int b = 0; b < lengths[s]; ++b) reversed = static_cast<uint16_t>(reversed | (((code >> b) & 1) << (lengths[s] - 1 - b)));
    codes[s] = reversed;
  }
  return codes;
}

// An 8-byte word of one repeated byte.
inline bool uniform(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w == (w & 0xFF) * 0x0101010101010101ull;
}

// Calls literals(begin, end) and run(byte, count) for data[0, n) in stream order: the one definition both passes
// (counting, writing) follow, so the code built from the counts covers exactly what is written. A run is found
// where an 8-byte aligned word holds one repeated byte (one compare per 8 bytes), then extended both ways; it is at
// least kMinRun long. Shorter runs that straddle word boundaries stay literals.
template <class Literals, class Run>
void for_each_stretch(const unsigned char* data, size_t n, Literals literals, Run run) {
  static_assert(RunDeflater::kMinRun == 8);
  size_t i = 0;
  while (i < n) {
    size_t w = (i + 7) & ~size_t(7);
    while (w + 8 <= n && !uniform(data + w)) w += 8;
    if (w + 8 > n) break;
    const unsigned char c = data[w];
    size_t begin = w, end = w + 8;
    while (begin > i && data[begin - 1] == c) --begin;
    for (; end + 8 <= n && uniform(data + end) && data[end] == c;) end += 8;
    while (end < n && data[end] == c) ++end;
    if (begin > i) literals(i, begin);
    run(c, end - begin);
    i = end;
  }
  if (i < n) literals(i, n);
}

// The matches of distance 1 after a run's first byte: count - 1 bytes in pieces of 3..258, none left shorter than 3
// (259 -> 256 + 3).
template <class Match>
void for_each_match(size_t count, Match match) {
  for (size_t m = count - 1; m > 0;) {
    const size_t len = m > 258 ? (m - 258 < 3 ? m - 3 : 258) : m;
    match(len);
    m -= len;
  }
}

}  // namespace

std::vector<uint8_t> huffman_lengths(const std::vector<uint32_t>& counts, int max_bits) {
  std::vector<uint64_t> freq(counts.begin(), counts.end());
  for (size_t s = 0, used = size_t(std::count_if(freq.begin(), freq.end(), [](uint64_t f) { return f > 0; }));
       used < 2 && s < freq.size(); ++s)
    if (freq[s] == 0) {
      freq[s] = 1;
      ++used;
    }
  std::vector<uint8_t> lengths(freq.size(), 0);
  for (;;) {
    // Huffman's algorithm: leaves 0..n-1, internal nodes after them; parent[] links each node to its merge.
    using Item = std::pair<uint64_t, size_t>;  // (weight, node): ties broken by node for a deterministic code
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
    std::vector<size_t> parent(freq.size(), 0);
    for (size_t s = 0; s < freq.size(); ++s)
      if (freq[s] > 0) heap.emplace(freq[s], s);
    while (heap.size() > 1) {
      const Item x = heap.top();
      heap.pop();
      const Item y = heap.top();
      heap.pop();
      const size_t node = parent.size();
      parent.push_back(0);
      parent[x.second] = node;
      parent[y.second] = node;
      heap.emplace(x.first + y.first, node);
    }
    // Depths top-down: a parent is made after its children, so walking nodes backwards meets parents first.
    std::vector<uint8_t> depth(parent.size(), 0);
    int deepest = 0;
    for (size_t node = parent.size() - 1; node-- > 0;) {
      if (node >= freq.size() || freq[node] > 0) depth[node] = static_cast<uint8_t>(depth[parent[node]] + 1);
      if (node < freq.size()) deepest = std::max<int>(deepest, depth[node]);
    }
    if (deepest <= max_bits) {
      for (size_t s = 0; s < freq.size(); ++s) lengths[s] = freq[s] > 0 ? depth[s] : 0;
      return lengths;
    }
    // Too deep: flatten the counts (each used one halved, rounded up, so it stays used) and build again; all equal
    // counts give a balanced tree, log2(286) < 15 and log2(19) < 7 deep.
    for (uint64_t& f : freq)
      if (f > 0) f = (f + 1) / 2;
  }
}

namespace {

// The counts of the symbols for_each_stretch() gives (end of block not included).
void count_symbols(const unsigned char* data, size_t n, std::vector<uint32_t>& freq) {
  freq.assign(kLitLenSymbols, 0);
  std::array<std::array<uint32_t, 256>, 4> hist{};  // four tables: repeated bytes do not wait on one counter
  for_each_stretch(
      data, n,
      [&](size_t b, size_t e) {
        for (; b + 4 <= e; b += 4) {
          ++hist[0][data[b]];
          ++hist[1][data[b + 1]];
          ++hist[2][data[b + 2]];
          ++hist[3][data[b + 3]];
        }
        for (; b < e; ++b) ++hist[0][data[b]];
      },
      [&](unsigned char c, size_t count) {
        ++hist[0][c];
        for_each_match(count, [&](size_t len) { ++freq[257 + kLengthIndex[len]]; });
      });
  for (int c = 0; c < 256; ++c) freq[c] = hist[0][c] + hist[1][c] + hist[2][c] + hist[3][c];
}

}  // namespace

DeflateCode::DeflateCode(const std::vector<uint32_t>& counts) {
  std::vector<uint32_t> freq = counts;
  freq.resize(kLitLenSymbols, 0);
  freq[kEndOfBlock] = std::max<uint32_t>(freq[kEndOfBlock], 1);
  lengths_ = huffman_lengths(freq, kMaxBits);
  codes_ = canonical_codes(lengths_);
  for (int c = 0; c < 256; ++c) literal_[size_t(c)] = codes_[size_t(c)] | uint32_t(lengths_[size_t(c)]) << 16;
  size_t hlit = kLitLenSymbols;
  while (hlit > 257 && lengths_[hlit - 1] == 0) --hlit;
  constexpr size_t kDistances = 2;  // codes 0 and 1, length 1 each (code 0 = distance 1 is bit 0)

  // Code lengths of both alphabets, run-length coded with 16 (repeat previous 3-6), 17 (3-10 zeros), 18 (11-138).
  std::vector<uint8_t> all(lengths_.begin(), lengths_.begin() + long(hlit));
  all.insert(all.end(), kDistances, 1);
  struct Item {
    uint8_t symbol, extra_bits, extra;
  };
  std::vector<Item> items;
  for (size_t i = 0; i < all.size();) {
    const uint8_t v = all[i];
    size_t run = 1;
    while (i + run < all.size() && all[i + run] == v) ++run;
    i += run;
    if (v == 0) {
      for (; run >= 11; run -= std::min<size_t>(run, 138))
        items.push_back({18, 7, static_cast<uint8_t>(std::min<size_t>(run, 138) - 11)});
      if (run >= 3) {
        items.push_back({17, 3, static_cast<uint8_t>(run - 3)});
        run = 0;
      }
    } else {
      items.push_back({v, 0, 0});
      --run;
      for (; run >= 3; run -= std::min<size_t>(run, 6))
        items.push_back({16, 2, static_cast<uint8_t>(std::min<size_t>(run, 6) - 3)});
    }
    for (; run > 0; --run) items.push_back({v, 0, 0});
  }
  std::vector<uint32_t> cl_freq(kCodeLengthSymbols, 0);
  for (const Item& it : items) ++cl_freq[it.symbol];
  const std::vector<uint8_t> cl_lengths = huffman_lengths(cl_freq, 7);
  const std::vector<uint16_t> cl_codes = canonical_codes(cl_lengths);
  size_t hclen = kCodeLengthSymbols;
  while (hclen > 4 && cl_lengths[kCodeLengthOrder[hclen - 1]] == 0) --hclen;

  // The block header as (bits, count) pieces, written before each stream's symbols.
  header_.push_back({1, 1});  // BFINAL
  header_.push_back({2, 2});  // BTYPE 2: dynamic Huffman codes
  header_.push_back({uint32_t(hlit - 257), 5});
  header_.push_back({uint32_t(kDistances - 1), 5});
  header_.push_back({uint32_t(hclen - 4), 4});
  for (size_t k = 0; k < hclen; ++k) header_.push_back({cl_lengths[kCodeLengthOrder[k]], 3});
  for (const Item& it : items) {
    header_.push_back({cl_codes[it.symbol], cl_lengths[it.symbol]});
    if (it.extra_bits) header_.push_back({it.extra, it.extra_bits});
  }
}

DeflateCode DeflateCode::covering(const unsigned char* sample, size_t n) {
  std::vector<uint32_t> freq;
  count_symbols(sample, n, freq);
  for (uint32_t& f : freq) ++f;  // every byte and every match length gets a code
  return DeflateCode(freq);
}

size_t RunDeflater::compress(const unsigned char* data, size_t n, StreamBuffer& out) {
  if (n == 0) throw Error("RunDeflater: nothing to compress (an HDF5 chunk is never empty)");
  count_symbols(data, n, freq_);
  return compress(data, n, DeflateCode(freq_), out);
}

size_t RunDeflater::compress(const unsigned char* data, size_t n, const DeflateCode& code,
                             StreamBuffer& out) {
  if (n == 0) throw Error("RunDeflater: nothing to compress (an HDF5 chunk is never empty)");
  // Bound: 2 header bytes, < 1 KiB of block header, at most 14 bits per byte (a literal; a match costs less per
  // byte it covers), the end-of-block code, padding and 4 bytes of Adler-32 (+8: BitWriter stores whole words).
  const size_t bound = 2 + 1024 + n * DeflateCode::kMaxBits / 8 + 2 + 4 + 8;
  if (out.size() < bound) out.resize(bound);
  out[0] = 0x78;  // CM 8 (deflate), CINFO 7 (32 KiB window)
  out[1] = 0x01;  // FCHECK: 0x7801 % 31 == 0, no dictionary, FLEVEL 0
  BitWriter bits(out.data() + 2);
  for (const auto& [value, count] : code.header_) {
    bits.put(value, count);
    bits.flush();
  }
  const std::vector<uint8_t>& lengths = code.lengths_;
  const std::vector<uint16_t>& codes = code.codes_;
  const std::array<uint32_t, 256>& literal = code.literal_;
  for_each_stretch(
      data, n,
      [&](size_t b, size_t e) {
        // Codes are at most 14 bits: after a flush (< 8 bits left) four fit in the 64-bit buffer, one int32 value.
        for (; b + 4 <= e; b += 4) {
          const uint32_t w = literal[data[b]], x = literal[data[b + 1]], y = literal[data[b + 2]],
                         z = literal[data[b + 3]];
          bits.put(w & 0xFFFF, int(w >> 16));
          bits.put(x & 0xFFFF, int(x >> 16));
          bits.put(y & 0xFFFF, int(y >> 16));
          bits.put(z & 0xFFFF, int(z >> 16));
          bits.flush();
        }
        for (; b < e; ++b) {
          const uint32_t w = literal[data[b]];
          bits.put(w & 0xFFFF, int(w >> 16));
          bits.flush();
        }
      },
      [&](unsigned char c, size_t count) {
        bits.put(codes[c], lengths[c]);
        bits.flush();
        for_each_match(count, [&](size_t len) {
          const size_t s = kLengthIndex[len];
          // code, extra bits, then the distance code 0 (one 0 bit): at most 14 + 5 + 1 bits
          const uint64_t v = codes[257 + s] | (uint64_t(len - kLengthBase[s]) << lengths[257 + s]);
          bits.put(v, lengths[257 + s] + kLengthExtra[s] + 1);
          bits.flush();
        });
      });
  bits.put(codes[kEndOfBlock], lengths[kEndOfBlock]);
  unsigned char* end = bits.finish();
  const uint32_t adler = libdeflate_adler32(1, data, n);
  for (int shift = 24; shift >= 0; shift -= 8) *end++ = static_cast<unsigned char>(adler >> shift);
  return size_t(end - out.data());
}

}  // namespace lmforge::prep
