// defines: crc32c() (slicing by 8), append_tfrecord(), append_int64_example(), read_tfrecord_file(),
//          parse_int64_example() (see electra_tfrecord.h for the formats)
#include "prep/electra_tfrecord.h"

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

#include "util/error.h"

namespace lmforge::prep {
namespace {

// tables[k][b]: the CRC of byte b followed by k zero bytes, so 8 input bytes are folded with 8 lookups.
struct Crc32cTables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Crc32cTables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
};
constexpr Crc32cTables kCrc;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// A protobuf reader over one message's bytes; every failure names `where`.
class ProtoReader {
 public:
  ProtoReader(std::string_view bytes, const std::string& where) : p_(bytes), where_(where) {}
  bool done() const { return p_.empty(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_.empty()) fail("truncated varint");
      const auto b = static_cast<uint8_t>(p_.front());
      p_.remove_prefix(1);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > p_.size()) fail("length-delimited field runs past its message");
    const std::string_view v = p_.substr(0, size_t(n));
    p_.remove_prefix(size_t(n));
    return v;
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case 0: varint(); return;
      case 1: take(8); return;
      case 2: bytes(); return;
      case 5: take(4); return;
      default: fail("unsupported wire type " + std::to_string(wire));
    }
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(where_ + ": malformed tf.train.Example: " + what); }

 private:
  void take(size_t n) {
    if (n > p_.size()) fail("truncated fixed-width field");
    p_.remove_prefix(n);
  }
  std::string_view p_;
  const std::string& where_;
};

std::vector<int64_t> parse_int64_list(std::string_view bytes, const std::string& where) {
  std::vector<int64_t> values;
  ProtoReader r(bytes, where);
  while (!r.done()) {
    const uint64_t tag = r.varint();
    if ((tag >> 3) != 1) {
      r.skip(uint32_t(tag & 7));
      continue;
    }
    if ((tag & 7) == 2) {  // packed
      ProtoReader packed(r.bytes(), where);
      while (!packed.done()) values.push_back(static_cast<int64_t>(packed.varint()));
    } else if ((tag & 7) == 0) {
      values.push_back(static_cast<int64_t>(r.varint()));
    } else {
      r.fail("Int64List.value with wire type " + std::to_string(tag & 7));
    }
  }
  return values;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = c ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    c = kCrc.t[7][lo & 0xFF] ^ kCrc.t[6][(lo >> 8) & 0xFF] ^ kCrc.t[5][(lo >> 16) & 0xFF] ^ kCrc.t[4][lo >> 24] ^
        kCrc.t[3][p[4]] ^ kCrc.t[2][p[5]] ^ kCrc.t[1][p[6]] ^ kCrc.t[0][p[7]];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ kCrc.t[0][(c ^ *p) & 0xFF];
  return ~c;
}

void append_tfrecord(std::string& out, std::string_view payload) {
  const size_t at = out.size();
  put_le(out, payload.size(), 8);
  put_le(out, masked_crc32c(out.data() + at, 8), 4);
  out.append(payload);
  put_le(out, masked_crc32c(payload.data(), payload.size()), 4);
}

void append_int64_example(std::string& out,
                          std::span<const std::pair<std::string_view, std::span<const int64_t>>> features) {
  // Sizes inside out: packed values -> Int64List -> Feature -> map entry -> Features -> Example.
  struct Sizes {
    size_t packed, list, feature, entry;
  };
  std::vector<Sizes> sizes;
  size_t features_size = 0;
  for (const auto& [key, values] : features) {
    Sizes s{};
    for (int64_t v : values) s.packed += varint_size(static_cast<uint64_t>(v));
    s.list = 1 + varint_size(s.packed) + s.packed;              // Int64List.value (1, packed)
    s.feature = 1 + varint_size(s.list) + s.list;               // Feature.int64_list (3)
    s.entry = 1 + varint_size(key.size()) + key.size() + 1 + varint_size(s.feature) + s.feature;  // key, value
    features_size += 1 + varint_size(s.entry) + s.entry;        // Features.feature (1)
    sizes.push_back(s);
  }
  out.push_back(0x0A);  // Example.features (1, length-delimited)
  put_varint(out, features_size);
  for (size_t i = 0; i < features.size(); ++i) {
    const auto& [key, values] = features[i];
    const Sizes& s = sizes[i];
    out.push_back(0x0A);  // Features.feature map entry
    put_varint(out, s.entry);
    out.push_back(0x0A);  // key
    put_varint(out, key.size());
    out.append(key);
    out.push_back(0x12);  // value: Feature
    put_varint(out, s.feature);
    out.push_back(0x1A);  // Feature.int64_list (3)
    put_varint(out, s.list);
    out.push_back(0x0A);  // Int64List.value, packed
    put_varint(out, s.packed);
    for (int64_t v : values) put_varint(out, static_cast<uint64_t>(v));  // int64: two's complement varint
  }
}

TfRecordFile read_tfrecord_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open (" + std::string(std::strerror(errno)) + ")");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": read error");
  TfRecordFile file;
  size_t at = 0;
  auto le = [&](size_t pos, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<uint8_t>(bytes[pos + size_t(i)])) << (8 * i);
    return v;
  };
  while (at < bytes.size()) {
    const std::string where = path + ": record " + std::to_string(file.records.size()) + " at byte " +
                              std::to_string(at);
    if (bytes.size() - at < 12) throw Error(where + ": truncated record header");
    const uint64_t length = le(at, 8);
    if (uint32_t(le(at + 8, 4)) != masked_crc32c(bytes.data() + at, 8))
      throw Error(where + ": length CRC mismatch (not a TFRecord file, or corrupt)");
    if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4)
      throw Error(where + ": truncated record (" + std::to_string(length) + " bytes of data announced)");
    const char* data = bytes.data() + at + 12;
    if (uint32_t(le(at + 12 + length, 4)) != masked_crc32c(data, length))
      throw Error(where + ": data CRC mismatch (corrupt record)");
    file.records.emplace_back(data, size_t(length));
    at += 12 + size_t(length) + 4;
  }
  return file;
}

std::map<std::string, std::vector<int64_t>> parse_int64_example(std::string_view payload, const std::string& where) {
  std::map<std::string, std::vector<int64_t>> out;
  ProtoReader example(payload, where);
  while (!example.done()) {
    const uint64_t tag = example.varint();
    if (tag != 0x0A) {
      example.skip(uint32_t(tag & 7));
      continue;
    }
    ProtoReader features(example.bytes(), where);
    while (!features.done()) {
      const uint64_t ftag = features.varint();
      if (ftag != 0x0A) {
        features.skip(uint32_t(ftag & 7));
        continue;
      }
      ProtoReader entry(features.bytes(), where);
      std::string key;
      std::vector<int64_t> values;
      while (!entry.done()) {
        const uint64_t etag = entry.varint();
        if (etag == 0x0A) {
          key = std::string(entry.bytes());
        } else if (etag == 0x12) {
          ProtoReader feature(entry.bytes(), where);
          while (!feature.done()) {
            const uint64_t t = feature.varint();
            if (t == 0x1A) {
              std::vector<int64_t> more = parse_int64_list(feature.bytes(), where);
              values.insert(values.end(), more.begin(), more.end());  // repeated message fields merge
            } else if (t == 0x0A || t == 0x12) {
              feature.fail("feature is a bytes or float list, not int64");
            } else {
              feature.skip(uint32_t(t & 7));
            }
          }
        } else {
          entry.skip(uint32_t(etag & 7));
        }
      }
      out[key] = std::move(values);  // a repeated key: the last entry wins, as protobuf's map parsing
    }
  }
  return out;
}

}  // namespace lmforge::prep
