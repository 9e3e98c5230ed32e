// defines: tests of the safetensors writer/reader against an independent Python implementation (safetensors_reference.py)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "util/error.h"

namespace lmforge::checkpoint {
namespace {

namespace fs = std::filesystem;

const std::string kScript = std::string(LMFORGE_SOURCE_DIR) + "/tests/checkpoint/safetensors_reference.py";

std::string test_dir(const std::string& name) {
  const fs::path d = fs::path(LMFORGE_BINARY_DIR) / "test-data" / ("safetensors_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string percent_encode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '~') {
      out.push_back(ch);
    } else {
      out += '%';
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

TEST(Safetensors, ReadsFileWrittenByIndependentWriter) {
  const std::string dir = test_dir("read");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + kScript + " write " + dir).c_str()), 0);
  SafetensorsFile file(dir + "/ref.safetensors");
  std::ifstream manifest(dir + "/manifest.txt");
  std::string line;
  size_t count = 0;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::string k, name, dtype;
    in >> k >> name >> dtype;
    name = percent_decode(name);
    std::vector<int64_t> shape;
    for (int64_t d; in >> d;) shape.push_back(d);
    SCOPED_TRACE(name);
    const TensorInfo& t = file.at(name);
    EXPECT_EQ(dtype_name(t.dtype), dtype);
    EXPECT_EQ(t.shape, shape);
    const std::string raw = read_file(dir + "/" + k + ".raw");
    const auto bytes = file.bytes(t);
    ASSERT_EQ(bytes.size(), raw.size());
    EXPECT_TRUE(raw.empty() || std::memcmp(bytes.data(), raw.data(), raw.size()) == 0);  // no memcmp on null
    if (fs::exists(dir + "/" + k + ".f32")) {
      const std::string want = read_file(dir + "/" + k + ".f32");
      std::vector<float> got(t.numel());
      file.read_f32(t, shape, got.data());
      ASSERT_EQ(want.size(), got.size() * 4);
      EXPECT_TRUE(want.empty() || std::memcmp(got.data(), want.data(), want.size()) == 0) << "converted values differ";
    }
    ++count;
  }
  EXPECT_EQ(count, 9u);
  EXPECT_EQ(file.tensors().size(), count);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "line\nbreak \"quote\" \xc3\xbc");
}

TEST(Safetensors, WrittenFileMatchesReferenceLayoutByteForByte) {
  const std::string dir = test_dir("write");
  std::vector<float> a(6 * 5), b(7);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.37f - 4.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1.0f / static_cast<float>(i + 1);
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x0001, 0x7bff};
  const std::vector<int64_t> ints = {-5, 1ll << 40, 7};
  const float scalar = 2.5f;
  std::vector<TensorRef> tensors = {
      {"transformer.h.1.mlp.c_fc.weight", DType::kF32, {6, 5}, a.data()},
      {"transformer.h.0.ln_1.bias", DType::kF32, {7}, b.data()},
      {"weird \"name\"\\\t\xc3\xa9", DType::kF16, {2, 2}, h.data()},
      {"step", DType::kI64, {3}, ints.data()},
      {"scalar", DType::kF32, {}, &scalar},
      {"nothing", DType::kF32, {0}, nullptr},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"iteration", "100"}, {"q\"k", "v\x01"}};
  write_safetensors(dir + "/ours.safetensors", tensors, metadata, /*sync=*/true);
  // Hand the same tensors to the independent checker as raw bytes.
  std::ofstream manifest(dir + "/manifest.txt");
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorRef& t = tensors[k];
    size_t n = dtype_size(t.dtype);
    for (const int64_t d : t.shape) n *= static_cast<size_t>(d);
    write_file(dir + "/" + std::to_string(k) + ".raw", std::string(static_cast<const char*>(t.data), n));
    manifest << k << ' ' << percent_encode(t.name) << ' ' << dtype_name(t.dtype);
    for (const int64_t d : t.shape) manifest << ' ' << d;
    manifest << '\n';
  }
  manifest.close();
  std::ofstream meta(dir + "/metadata.txt");
  for (const auto& [key, value] : metadata) meta << percent_encode(key) << ' ' << percent_encode(value) << '\n';
  meta.close();
  EXPECT_EQ(std::system(("/usr/bin/python3 " + kScript + " check " + dir + "/ours.safetensors " + dir).c_str()), 0);
  // And our own reader agrees.
  SafetensorsFile file(dir + "/ours.safetensors");
  std::vector<float> got(a.size());
  file.read_f32("transformer.h.1.mlp.c_fc.weight", std::vector<int64_t>{6, 5}, got.data());
  EXPECT_EQ(got, a);
  EXPECT_EQ(file.metadata(), metadata);
}

// Tensor by tensor, in reverse order: the same bytes as the one-call writer (which the reference checks above);
// a tensor never written is an error naming it.
TEST(Safetensors, StreamingWriterInAnyOrderWritesTheSameFile) {
  const std::string dir = test_dir("stream");
  std::vector<float> a(12), b(5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) - 3.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.25f * static_cast<float>(i);
  const std::vector<TensorRef> tensors = {{"z.weight", DType::kF32, {3, 4}, a.data()},
                                          {"a.bias", DType::kF32, {5}, b.data()}};
  write_safetensors(dir + "/whole.safetensors", tensors, {{"k", "v"}});
  {
    SafetensorsWriter writer(dir + "/stream.safetensors", tensors, {{"k", "v"}});
    writer.write(1, b.data());
    writer.write(0, a.data());
    writer.close(/*sync=*/true);
  }
  EXPECT_EQ(read_file(dir + "/stream.safetensors"), read_file(dir + "/whole.safetensors"));
  SafetensorsWriter partial(dir + "/partial.safetensors", tensors);
  partial.write(0, a.data());
  try {
    partial.close(false);
    ADD_FAILURE() << "a file with an unwritten tensor was closed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.bias"), std::string::npos) << e.what();
  }
}

// Builds a file from a header text and a data section, for the corruption cases.
std::string make_file(const std::string& header, const std::string& data, int64_t length_delta = 0) {
  std::string out(8, '\0');
  const uint64_t n = header.size() + static_cast<uint64_t>(length_delta);
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

void expect_error(const std::string& path, const std::string& bytes, const std::string& needle) {
  write_file(path, bytes);
  try {
    SafetensorsFile f(path);
    ADD_FAILURE() << "no error for " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in: " << msg;
  }
}

TEST(Safetensors, RejectsCorruptFilesWithClearErrors) {
  const std::string dir = test_dir("corrupt");
  const std::string p = dir + "/bad.safetensors";
  const std::string data8(8, '\x01');
  const std::string one = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_error(p, "abc", "shorter than the 8-byte header length");
  expect_error(p, make_file(one, data8, 1000), "truncated");
  expect_error(p, make_file(one, data8.substr(0, 5)), "truncated: tensor 'a'");
  expect_error(p, make_file(one, data8 + "xx"), "2 bytes after the last tensor");
  expect_error(p, make_file("[1,2]   ", ""), "does not start with '{'");
  expect_error(p, make_file(R"({"a":{"dtype":"F32",)", data8), "not valid JSON");
  expect_error(p, make_file(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", data8), "unknown dtype 'F31'");
  expect_error(p, make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8), "tensor 'a'");
  expect_error(p, make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8), "non-negative");
  expect_error(p,
               make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         data8),
               "overlap");
  expect_error(p,
               make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         data8 + "1234"),
               "leave a gap");
  expect_error(p,
               make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         data8),
               "twice");
  expect_error(p, make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data8), "end before");
  expect_error(p, make_file(R"({"__metadata__":{"k":1}})", ""), "not a string");
  EXPECT_THROW(SafetensorsFile(dir + "/missing.safetensors"), Error);
}

TEST(Safetensors, ShapeMismatchAndMissingTensorNameTheFileAndTensor) {
  const std::string dir = test_dir("mismatch");
  const std::vector<float> v(6, 1.0f);
  write_safetensors(dir + "/m.safetensors", {{"w", DType::kF32, {2, 3}, v.data()}});
  SafetensorsFile f(dir + "/m.safetensors");
  std::vector<float> out(6);
  try {
    f.read_f32("w", std::vector<int64_t>{3, 2}, out.data());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.safetensors: tensor 'w' has shape [2, 3], expected [3, 2]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(f.at("nope"), Error);
  EXPECT_THROW(write_safetensors(dir + "/d.safetensors",
                                 {{"w", DType::kF32, {1}, v.data()}, {"w", DType::kF16, {1}, v.data()}}),
               Error);
}

}  // namespace
}  // namespace lmforge::checkpoint
