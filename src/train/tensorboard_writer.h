// defines: TensorBoardWriter (scalar event files TensorBoard reads: TFRecord framing + hand-encoded Event protos),
//   crc32c(), masked_crc32c()
// Format: a file "events.out.tfevents.<unix time>.<hostname>.<pid>.<n>" holding TFRecords
//   [u64 length][u32 masked crc32c(length bytes)][data][u32 masked crc32c(data)], little-endian;
//   the first record is Event{wall_time, file_version: "brain.Event:2"}, then one Event per add_scalar:
//   Event{wall_time (1, double), step (2, int64), summary (5) → Summary{value (1) → Value{tag (1), simple_value (2, float)}}}.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace lmforge::train {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecord uses.
uint32_t crc32c(const void* data, size_t size);
// TFRecord's masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

class TensorBoardWriter {
 public:
  // Creates log_dir if needed and a new event file in it; Error when either cannot be created.
  explicit TensorBoardWriter(const std::string& log_dir);
  ~TensorBoardWriter();  // flushes and closes
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One scalar at a training step; stored as float32 (TensorBoard's simple_value). The file is flushed when more than
  // a few seconds have passed since the last flush, so a live TensorBoard sees progress.
  void add_scalar(const std::string& tag, double value, int64_t step);
  // Several scalars of one step in one Event.
  void add_scalars(const std::vector<std::pair<std::string, double>>& values, int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
  double last_flush_ = 0;
};

}  // namespace lmforge::train
