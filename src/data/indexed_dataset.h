// defines: Megatron's mmap indexed dataset (.bin/.idx, "MMIDIDX" version 1):
//   DType, dtype_for_vocab_size(), IndexedDatasetWriter (streaming, temp name + rename), IndexedDataset (reader)
// Layout: ../shared/docs/megatron-data-format.md §2 and §4 (merging).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace lmforge::data {

// Megatron's dtype codes (M23/HEAD table). Token data only ever uses UInt16 and Int32.
enum class DType : uint8_t {
  UInt8 = 1, Int8 = 2, Int16 = 3, Int32 = 4, Int64 = 5, Float64 = 6, Float32 = 7, UInt16 = 8
};
size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// uint16 when the unpadded vocabulary is below 65500 (strict, not 65536), else int32 — as Megatron chooses.
DType dtype_for_vocab_size(size_t vocab_size);

// Writes <prefix>.bin and <prefix>.idx. Data goes to "<prefix>.bin.tmp-<pid>" (and .idx likewise) and both are
// renamed to their final names only by finish(); a writer destroyed without finish() removes its temporaries,
// and a killed process leaves only temporaries, never a dataset under the final name.
// Memory: 12 bytes per sequence and 8 per document are kept until finish() (Megatron keeps the same lists).
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(std::string prefix, DType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // One sequence (a document in document mode, a sentence in sentence mode); ids must fit the dtype.
  void add_sequence(std::span<const int32_t> ids);
  // Closes the current document (it may hold 0 sequences: Megatron writes empty documents as a repeated index).
  void end_document();
  // Appends a whole dataset (as Megatron's merge tool does); dtypes must match, else Error.
  void append_dataset(const std::string& other_prefix);
  // Writes the .idx, flushes and fsyncs, renames .bin then .idx into place. Sequences added after the last
  // end_document() are an Error (the dataset would be unreadable: Megatron requires doc_idx[-1] == S).
  void finish();

  uint64_t sequences() const;
  uint64_t documents() const;
  uint64_t tokens() const;
  DType dtype() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Read-only view of a dataset through mmap. open() validates magic, version, dtype code, that the .idx size is
// exactly 34 + 12·S + 8·D, that pointers follow from lengths, that the document index is non-decreasing from 0
// to S, and that the .bin size equals itemsize·Σlen; any violation is an Error naming the file and the field.
// An .idx starting with the legacy fairseq magic "TNTIDX\0\0" (old Megatron / Megatron-DeepSpeed lazy/cached) is
// read too, validated the same way (format doc §2); append_dataset() of it converts it to MMIDIDX.
// Moves a finished dataset's temporaries to their final names so that, after a kill at any moment, the names hold
// the older dataset whole or the new one whole once the next writer or reader has run recover_interrupted_publish()
// (only "none" when there was no older dataset): as checkpoint saves do with their directories, the older .idx and
// .bin are first renamed aside to "<final>.old-<host>-<pid>", then the new .bin and .idx are renamed in, then the
// older pair is removed; each step is durable before the next. The temporaries are removed (and the older pair put
// back) on failure. Errors name the path.
void publish_dataset(const std::string& bin_tmp, const std::string& idx_tmp, const std::string& bin_final,
                     const std::string& idx_final);
// Puts right what a publish_dataset() over <prefix>.bin/.idx killed midway left ("<prefix>.{bin,idx}.old-<host>-
// <pid>" of a process of this host that is gone): when both final names hold a dataset the new one was complete and
// the older pair is removed; otherwise the older pair is renamed back (replacing a new .bin left alone). Returns
// true when it changed anything. Failures (a read-only mount, another process doing the same) are ignored: the
// names are then left as they are. publish_dataset() calls it first; IndexedDataset::open() calls it only when
// <prefix>.bin or .idx is missing (one directory listing per open would cost readers of many small datasets).
bool recover_interrupted_publish(const std::string& prefix);

class IndexedDataset {
 public:
  static std::unique_ptr<IndexedDataset> open(const std::string& prefix);
  virtual ~IndexedDataset() = default;

  virtual DType dtype() const = 0;
  virtual uint64_t sequence_count() const = 0;
  virtual uint64_t document_count() const = 0;           // document index entries − 1
  virtual int32_t sequence_length(uint64_t i) const = 0;
  virtual int64_t sequence_pointer(uint64_t i) const = 0; // byte offset in .bin
  virtual int64_t document_index(uint64_t j) const = 0;   // j in [0, document_count()]
  virtual uint64_t token_count() const = 0;
  virtual uint64_t bin_bytes() const = 0;  // size of <prefix>.bin
  virtual uint64_t idx_bytes() const = 0;  // size of <prefix>.idx
  // Tokens of sequence i, tokens [offset, offset+count) of it (count −1: to the end), widened to int32.
  virtual void read_sequence(uint64_t i, std::vector<int32_t>& out, int64_t offset = 0, int64_t count = -1) const = 0;
  virtual const std::string& prefix() const = 0;
};

}  // namespace lmforge::data
