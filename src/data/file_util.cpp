// defines: the POSIX helpers of file_util.h
#include "data/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace lmforge::data {

std::string os_error(const std::string& path, const std::string& what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

UniqueFd open_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(os_error(path, "cannot open"));
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": is a directory, expected a file");
  }
  return UniqueFd(fd);
}

UniqueFd open_write_truncate(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(os_error(path, "cannot create"));
  return UniqueFd(fd);
}

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(os_error(path, "write failed"));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

size_t read_some(int fd, void* data, size_t size, const std::string& path) {
  for (;;) {
    ssize_t n = ::read(fd, data, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) throw Error(os_error(path, "read failed"));
  }
}

void fsync_parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems refuse directory opens; the data itself is already synced
  ::fsync(fd);
  ::close(fd);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  UniqueFd fd = open_read(path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw Error(os_error(path, "cannot stat"));
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) throw Error(os_error(path, "cannot mmap"));
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace lmforge::data
