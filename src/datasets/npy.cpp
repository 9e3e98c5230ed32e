// defines: .npy v1.0 writer/reader matching numpy 1.24 byte for byte, and MD5 (RFC 1321) for cache names
#include "datasets/npy.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace lmforge::datasets {

size_t npy_itemsize(const std::string& descr) {
  if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '|')) {
    const char kind = descr[1];
    const int bytes = descr[2] - '0';
    if ((kind == 'i' || kind == 'u') && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8)) return size_t(bytes);
  }
  throw Error("npy: unsupported dtype descr '" + descr + "'");
}

std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  // repr(tuple): "(n,)" for one axis, "(a, b)" for more, "()" for none.
  std::string shape_repr = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) shape_repr += ", ";
    shape_repr += std::to_string(shape[i]);
  }
  if (shape.size() == 1) shape_repr += ",";
  shape_repr += ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_repr + ", }";
  // numpy ≥ 1.23 leaves room for the first axis to grow to 21 digits so the header can be rewritten in place.
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    if (digits < 21) dict += std::string(21 - digits, ' ');
  }
  const size_t hlen = dict.size() + 1;  // + '\n'
  const size_t prefix = 6 + 2 + 2;       // magic, version, uint16 length
  const size_t pad = 64 - ((prefix + hlen) % 64);
  const size_t total_len = hlen + pad;
  if (total_len > 65535) throw Error("npy: header too long for format 1.0");
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(total_len & 0xff);
  out += char((total_len >> 8) & 0xff);
  out += dict;
  out += std::string(pad, ' ');
  out += '\n';
  return out;
}

void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data) {
  size_t count = 1;
  for (int64_t d : shape) count *= size_t(d);
  const size_t bytes = count * npy_itemsize(descr);
  const std::string header = npy_header(descr, shape);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(tmp + ": cannot create (" + std::strerror(errno) + ")");
    f.write(header.data(), std::streamsize(header.size()));
    if (bytes) f.write(static_cast<const char*>(data), std::streamsize(bytes));
    f.flush();
    if (!f) {
      f.close();
      std::remove(tmp.c_str());
      throw Error(tmp + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename " + tmp + " into place: " + ec.message());
  }
}

namespace {

// Value of 'key' in the header dict, up to the next top-level ", '" or "}" (enough for what np.save writes).
std::string dict_value(const std::string& dict, const std::string& key, const std::string& path) {
  const std::string k = "'" + key + "':";
  const size_t at = dict.find(k);
  if (at == std::string::npos) throw Error(path + ": npy header has no '" + key + "'");
  size_t i = at + k.size();
  while (i < dict.size() && dict[i] == ' ') ++i;
  size_t j = i;
  int depth = 0;
  for (; j < dict.size(); ++j) {
    const char c = dict[j];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string v = dict.substr(i, j - i);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open (" + std::strerror(errno) + ")");
  char pre[10];
  f.read(pre, 8);
  if (!f || std::memcmp(pre, "\x93NUMPY", 6) != 0) throw Error(path + ": not a .npy file (bad magic)");
  const int major = uint8_t(pre[6]);
  size_t hlen;
  if (major == 1) {
    uint8_t b[2];
    f.read(reinterpret_cast<char*>(b), 2);
    hlen = size_t(b[0]) | (size_t(b[1]) << 8);
  } else if (major == 2 || major == 3) {
    uint8_t b[4];
    f.read(reinterpret_cast<char*>(b), 4);
    hlen = size_t(b[0]) | (size_t(b[1]) << 8) | (size_t(b[2]) << 16) | (size_t(b[3]) << 24);
  } else {
    throw Error(path + ": unsupported .npy version " + std::to_string(major));
  }
  std::string dict(hlen, '\0');
  f.read(dict.data(), std::streamsize(hlen));
  if (!f) throw Error(path + ": truncated .npy header");
  NpyArray a;
  std::string descr = dict_value(dict, "descr", path);
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'') throw Error(path + ": bad descr " + descr);
  a.descr = descr.substr(1, descr.size() - 2);
  if (a.descr.size() == 3 && a.descr[0] == '|') a.descr[0] = '<';
  if (a.descr.size() == 3 && a.descr[0] == '>') throw Error(path + ": big-endian arrays are not supported");
  size_t item = 0;
  try {
    item = npy_itemsize(a.descr);
  } catch (const Error& e) {  // the cache file that holds it, not just the dtype
    throw Error(path + ": " + e.what() + " (an index cache written by another tool? delete it to rebuild)");
  }
  if (dict_value(dict, "fortran_order", path) != "False") throw Error(path + ": Fortran-order arrays are not supported");
  const std::string shape = dict_value(dict, "shape", path);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') throw Error(path + ": bad shape " + shape);
  size_t count = 1;
  for (size_t i = 1; i + 1 < shape.size();) {
    while (i + 1 < shape.size() && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i + 1 >= shape.size()) break;
    size_t j = i;
    while (j + 1 < shape.size() && shape[j] >= '0' && shape[j] <= '9') ++j;
    if (j == i) throw Error(path + ": bad shape " + shape);
    const int64_t d = std::stoll(shape.substr(i, j - i));
    a.shape.push_back(d);
    count *= size_t(d);
    i = j;
  }
  a.data.resize(count * item);
  f.read(reinterpret_cast<char*>(a.data.data()), std::streamsize(a.data.size()));
  if (size_t(f.gcount()) != a.data.size())
    throw Error(path + ": holds " + std::to_string(f.gcount()) + " data bytes, shape " + shape + " needs " +
                std::to_string(a.data.size()));
  if (f.peek() != EOF) throw Error(path + ": trailing bytes after the array of shape " + shape);
  return a;
}

// ---- MD5 (RFC 1321) ----

namespace {

inline uint32_t rotl(uint32_t x, int c) { return (x << c) | (x >> (32 - c)); }

void md5_block(uint32_t h[4], const uint8_t* p) {
  static const uint32_t K[64] = {
      0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
      0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
      0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
      0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
      0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
      0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
      0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
      0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
  static const int R[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9,  14, 20, 5, 9,
                            14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                            4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
  uint32_t m[16];
  for (int i = 0; i < 16; ++i)
    m[i] = uint32_t(p[4 * i]) | (uint32_t(p[4 * i + 1]) << 8) | (uint32_t(p[4 * i + 2]) << 16) |
           (uint32_t(p[4 * i + 3]) << 24);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
  for (int i = 0; i < 64; ++i) {
    uint32_t f;
    int g;
    if (i < 16) {
      f = (b & c) | (~b & d);
      g = i;
    } else if (i < 32) {
      f = (d & b) | (~d & c);
      g = (5 * i + 1) % 16;
    } else if (i < 48) {
      f = b ^ c ^ d;
      g = (3 * i + 5) % 16;
    } else {
      f = c ^ (b | ~d);
      g = (7 * i) % 16;
    }
    const uint32_t t = d;
    d = c;
    c = b;
    b = b + rotl(a + f + K[i] + m[g], R[i]);
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
}

}  // namespace

std::string md5_hex(const std::string& bytes) {
  uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  std::string msg = bytes;
  const uint64_t bits = uint64_t(bytes.size()) * 8;
  msg += char(0x80);
  while (msg.size() % 64 != 56) msg += char(0);
  for (int i = 0; i < 8; ++i) msg += char((bits >> (8 * i)) & 0xff);
  for (size_t i = 0; i < msg.size(); i += 64) md5_block(h, reinterpret_cast<const uint8_t*>(msg.data() + i));
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 4; ++k) {
      const uint8_t byte = uint8_t(h[i] >> (8 * k));
      out += hex[byte >> 4];
      out += hex[byte & 15];
    }
  return out;
}

}  // namespace lmforge::datasets
