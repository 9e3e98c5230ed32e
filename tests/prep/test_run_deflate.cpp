// RunDeflater (the deflate of prep's NVIDIA HDF5 chunks): every stream inflates to its input with zlib itself
// (CPython's zlib module, the inflate HDF5 and h5py use, which refuses incomplete codes) and with libdeflate, for
// runs at every length around the word and match limits, with a code fitted to the data and with one shared code
// fitted to other data; huffman_lengths() keeps its limit and a complete code.
#include <gtest/gtest.h>
#include <libdeflate.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "prep/run_deflate.h"
#include "test_util.h"

namespace {

using lmforge::testing::run_command;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;
namespace prep = lmforge::prep;

using Bytes = std::vector<unsigned char>;

std::vector<std::pair<std::string, Bytes>> cases() {
  std::vector<std::pair<std::string, Bytes>> out;
  std::mt19937 rng(7);
  out.push_back({"one_byte", {42}});
  Bytes random(100000);
  for (auto& b : random) b = static_cast<unsigned char>(rng());
  out.push_back({"random", random});
  // Runs of zeros of every length from 1 to 530 between literals (words split at every offset; 258/259/260/261 at
  // the match limit), then of another byte.
  Bytes runs;
  for (size_t len = 1; len <= 530; ++len) {
    runs.push_back(static_cast<unsigned char>(len | 1));
    runs.insert(runs.end(), len, 0);
  }
  for (size_t len = 1; len <= 40; ++len) runs.insert(runs.end(), len, static_cast<unsigned char>(200 + len % 3));
  out.push_back({"runs", runs});
  out.push_back({"zeros", Bytes(262144, 0)});
  out.push_back({"ones_then_zero", [] {
                   Bytes b(1000, 1);
                   b.push_back(0);
                   return b;
                 }()});
  // Rows as input_ids holds them: little-endian int32 token ids below 30,522, then zero padding.
  Bytes ids;
  for (int row = 0; row < 300; ++row) {
    const size_t n = 5 + rng() % 124;
    for (size_t j = 0; j < 128; ++j) {
      const uint32_t id = j < n ? uint32_t(rng() % 30522) : 0;
      for (int k = 0; k < 4; ++k) ids.push_back(static_cast<unsigned char>(id >> (8 * k)));
    }
  }
  out.push_back({"token_rows", ids});
  // A skewed alphabet: Fibonacci counts make an unlimited Huffman code deeper than deflate's 15 bits.
  Bytes skewed;
  uint64_t a = 1, b = 1;
  for (int s = 0; s < 22; ++s) {
    for (uint64_t k = 0; k < a; ++k) skewed.push_back(static_cast<unsigned char>(s * 11));
    const uint64_t c = a + b;
    a = b;
    b = c;
  }
  std::shuffle(skewed.begin(), skewed.end(), rng);
  out.push_back({"skewed", skewed});
  return out;
}

TEST(RunDeflate, StreamsInflateToTheirInputWithZlibAndLibdeflate) {
  TempDir dir;
  prep::RunDeflater deflater;
  prep::StreamBuffer stream;
  std::string names;
  auto* inflater = libdeflate_alloc_decompressor();
  // Each case also with a code fitted to other data (DeflateCode::covering, as the HDF5 writer shares one code
  // among a dataset's chunks): it must still code every byte and run length.
  const Bytes sample = {1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};
  const prep::DeflateCode shared = prep::DeflateCode::covering(sample.data(), sample.size());
  std::vector<std::pair<std::string, Bytes>> all;
  for (const auto& c : cases()) {
    all.push_back(c);
    all.push_back({c.first + "_shared_code", c.second});
  }
  for (const auto& [name, data] : all) {
    const bool use_shared = name.ends_with("_shared_code");
    const size_t size = use_shared ? deflater.compress(data.data(), data.size(), shared, stream)
                                   : deflater.compress(data.data(), data.size(), stream);
    Bytes back(data.size());
    size_t got = 0;
    EXPECT_EQ(libdeflate_zlib_decompress(inflater, stream.data(), size, back.data(), back.size(), &got),
              LIBDEFLATE_SUCCESS)
        << name;
    EXPECT_EQ(got, data.size()) << name;
    EXPECT_TRUE(back == data) << name;
    write_file(dir.file(name + ".raw"), std::string(data.begin(), data.end()));
    write_file(dir.file(name + ".z"), std::string(stream.begin(), stream.begin() + long(size)));
    names += " " + name;
  }
  libdeflate_free_decompressor(inflater);
  const auto r = run_command("cd " + dir.path() +
                             " && /usr/bin/python3 -c \"import sys, zlib\n"
                             "for n in sys.argv[1:]:\n"
                             "    assert zlib.decompress(open(n + '.z', 'rb').read()) == open(n + '.raw', 'rb').read(), n\n"
                             "print('ok')\"" + names);
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(RunDeflate, RunsAndSkewedBytesCompress) {
  prep::RunDeflater deflater;
  prep::StreamBuffer stream;
  for (const auto& [name, data] : cases()) {
    const size_t size = deflater.compress(data.data(), data.size(), stream);
    if (name == "zeros") {
      EXPECT_LT(size, 1200u) << "262144 zeros: one literal and 1,017 matches";
    } else if (name == "token_rows") {
      EXPECT_LT(size, data.size() * 2 / 5) << name;  // uniform ids: ~15 bits of 32, and the padding
    } else if (name == "random") {
      EXPECT_LT(size, data.size() + 1200) << name;  // 8-bit codes and the block header
    }
  }
}

TEST(RunDeflate, HuffmanLengthsStayWithinTheLimitAndFormACompleteCode) {
  std::vector<uint32_t> fib(30);
  fib[0] = fib[1] = 1;
  for (size_t i = 2; i < fib.size(); ++i) fib[i] = fib[i - 1] + fib[i - 2];
  for (int limit : {7, 15}) {
    std::vector<uint32_t> freq = fib;
    if (limit == 7) freq.resize(19);
    const std::vector<uint8_t> lengths = prep::huffman_lengths(freq, limit);
    double kraft = 0;
    for (size_t s = 0; s < freq.size(); ++s) {
      EXPECT_GE(lengths[s], 1) << s;
      EXPECT_LE(lengths[s], limit) << s;
      kraft += std::ldexp(1.0, -lengths[s]);
    }
    EXPECT_DOUBLE_EQ(kraft, 1.0) << "limit " << limit;
  }
  // One used symbol: a second gets a length too (zlib's inflate refuses a one-code literal/length alphabet).
  std::vector<uint32_t> one(19, 0);
  one[5] = 10;
  const std::vector<uint8_t> lengths = prep::huffman_lengths(one, 7);
  EXPECT_EQ(lengths[5], 1);
  EXPECT_EQ(std::count(lengths.begin(), lengths.end(), 1), 2);
}

}  // namespace
