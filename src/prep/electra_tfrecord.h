// defines: crc32c(), masked_crc32c(), append_tfrecord(), append_int64_example(), TfRecordFile and
//          read_tfrecord_file(), parse_int64_example(): the TFRecord files of ELECTRA's build_pretraining_dataset.py
//          (tf.io.TFRecordWriter of serialized tf.train.Example protos), written and read without TensorFlow.
//
// A record (tensorflow/core/lib/io/record_writer.cc):
//   uint64 LE length | uint32 LE masked_crc32c(the 8 length bytes) | payload | uint32 LE masked_crc32c(payload)
// CRC32C is Castagnoli's (reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF); the mask is
//   ((crc >> 15) | (crc << 17)) + 0xA282EAD8  (mod 2^32)
// No file header or footer; an empty file is a valid file of no records.
// The payload (tensorflow/core/example/example.proto, feature.proto):
//   Example { Features features = 1; }  Features { map<string, Feature> feature = 1; }
//   Feature { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//   Int64List { repeated int64 value = 1 [packed = true]; }
// A map is a repeated message of entries { string key = 1; Feature value = 2; }. Protobuf fixes no order of map
// entries: the writer emits keys in the order given (ELECTRA's run sorts nothing, so compare parsed values).
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmforge::prep {

uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

// Appends one framed record holding `payload` to `out`.
void append_tfrecord(std::string& out, std::string_view payload);

// Appends a serialized tf.train.Example whose features are int64 lists, in the order given, to `out`.
void append_int64_example(std::string& out,
                          std::span<const std::pair<std::string_view, std::span<const int64_t>>> features);

// One TFRecord file read back: every record's payload, CRCs checked.
struct TfRecordFile {
  std::vector<std::string> records;
};
// Error naming the file, the record number, its byte offset and what is wrong (truncated record, length or data
// CRC mismatch).
TfRecordFile read_tfrecord_file(const std::string& path);

// A serialized tf.train.Example whose features are all int64 lists: feature name -> values. Error (with `where`
// naming the record) on malformed protobuf or a feature of another kind.
std::map<std::string, std::vector<int64_t>> parse_int64_example(std::string_view payload, const std::string& where);

}  // namespace lmforge::prep
