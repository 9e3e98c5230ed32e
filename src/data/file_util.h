// defines: small POSIX file helpers shared by the data module: UniqueFd, MappedFile, write_all(), fsync_path(),
//          os_error() — each failure is an lmforge::Error naming the path and the OS reason
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lmforge::data {

// "<path>: <what>: <strerror(errno)>", read from errno at the call.
std::string os_error(const std::string& path, const std::string& what);

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() { int fd = fd_; fd_ = -1; return fd; }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

UniqueFd open_read(const std::string& path);
// Creates or truncates `path` for writing (mode 0644).
UniqueFd open_write_truncate(const std::string& path);
// Writes all of [data, data+size) or throws naming `path`.
void write_all(int fd, const void* data, size_t size, const std::string& path);
// Reads up to `size` bytes (retrying on EINTR); returns the count, 0 at end of file.
size_t read_some(int fd, void* data, size_t size, const std::string& path);
// fsync of the directory holding `path`, so a rename into it survives a crash.
void fsync_parent_dir(const std::string& path);

// A whole file mapped read-only. A 0-byte file maps to data() == nullptr, size() == 0.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace lmforge::data
