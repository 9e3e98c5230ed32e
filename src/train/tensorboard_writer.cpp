// defines: TensorBoardWriter, crc32c — TensorBoard event files without TensorFlow or protobuf
#include "train/tensorboard_writer.h"

#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "util/error.h"

namespace lmforge::train {

namespace {

std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    t[i] = c;
  }
  return t;
}

double now_seconds() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return double(tv.tv_sec) + double(tv.tv_usec) * 1e-6;
}

// ---- protobuf wire format, just what Event needs ----
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(uint8_t(v));
}
void put_fixed(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }  // little-endian host
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_varint(out, uint64_t(field) << 3 | 2);
  put_varint(out, bytes.size());
  out += bytes;
}
// Fields in number order, as protobuf serialisers emit them; step 0 is omitted (proto3 default), as TensorFlow does.
std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_varint(e, 1 << 3 | 1);
  put_fixed(e, &wall_time, 8);
  if (step != 0) {
    put_varint(e, 2 << 3 | 0);
    put_varint(e, uint64_t(step));  // int64 varint: negative steps take 10 bytes, as protobuf encodes them
  }
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = make_crc_table();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xffffffffU;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffU;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8U;
}

TensorBoardWriter::TensorBoardWriter(const std::string& log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) throw Error(log_dir + ": cannot create the TensorBoard directory (" + ec.message() + ")");
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  // PyTorch's naming; pid and a counter keep two writers in one second (or one process) apart.
  static std::atomic<int> counter{0};
  char name[512];
  std::snprintf(name, sizeof(name), "events.out.tfevents.%010lld.%s.%d.%d", static_cast<long long>(std::time(nullptr)),
                host, int(getpid()), counter++);
  path_ = (std::filesystem::path(log_dir) / name).string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw Error(path_ + ": cannot create the TensorBoard event file (" + std::strerror(errno) + ")");
  std::string e = event_header(now_seconds(), 0);
  put_bytes(e, 3, "brain.Event:2");
  write_event(e);
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write_event(const std::string& event) {
  const uint64_t len = event.size();
  const uint32_t len_crc = masked_crc32c(&len, 8);
  const uint32_t data_crc = masked_crc32c(event.data(), event.size());
  bool ok = std::fwrite(&len, 8, 1, file_) == 1 && std::fwrite(&len_crc, 4, 1, file_) == 1 &&
            std::fwrite(event.data(), 1, event.size(), file_) == event.size() &&
            std::fwrite(&data_crc, 4, 1, file_) == 1;
  if (!ok) throw Error(path_ + ": write failed (" + std::strerror(errno) + ")");
}

void TensorBoardWriter::add_scalars(const std::vector<std::pair<std::string, double>>& values, int64_t step) {
  const double wall = now_seconds();
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    put_bytes(v, 1, tag);
    const float f = float(value);
    put_varint(v, 2 << 3 | 5);
    put_fixed(v, &f, 4);
    put_bytes(summary, 1, v);
  }
  std::string e = event_header(wall, step);
  put_bytes(e, 5, summary);
  write_event(e);
  if (wall - last_flush_ > 5.0) flush();
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalars({{tag, value}}, step);
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0) throw Error(path_ + ": flush failed (" + std::strerror(errno) + ")");
  last_flush_ = now_seconds();
}

}  // namespace lmforge::train
