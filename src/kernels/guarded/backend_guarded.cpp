// defines: GuardedBackend (page-protected mappings, opened around its own calls), Opened, guarded_backend()
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "kernels/guarded/guarded.h"
#include "util/error.h"

namespace lmforge::kernels::guarded {
namespace {

size_t page_size() {
  static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

void protect(uintptr_t start, size_t bytes, int prot) {
  if (mprotect(reinterpret_cast<void*>(start), bytes, prot) != 0)
    throw Error(std::string("guarded device: mprotect failed: ") + std::strerror(errno));
}

}  // namespace

std::string GuardedBackend::info() const {
  return "guarded (test device: the CPU kernels over mappings that are PROT_NONE outside the backend's calls)";
}

void* GuardedBackend::alloc(size_t bytes) {
  const size_t len = (bytes + page_size() - 1) / page_size() * page_size();
  void* p = mmap(nullptr, len == 0 ? page_size() : len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const std::lock_guard<std::mutex> lock(mutex_);
  regions_[reinterpret_cast<uintptr_t>(p)] = Region{len == 0 ? page_size() : len, 0};
  return p;
}

void GuardedBackend::free(void* p) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = regions_.find(reinterpret_cast<uintptr_t>(p));
  if (it == regions_.end()) throw Error("guarded device: free() of an address it did not allocate");
  munmap(p, it->second.bytes);
  regions_.erase(it);
}

std::pair<uintptr_t, GuardedBackend::Region*> GuardedBackend::region_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = regions_.upper_bound(a);
  if (it == regions_.begin() || a >= std::prev(it)->first + std::prev(it)->second.bytes)
    throw Error("guarded device: an operand's data is not device memory of this backend (a host pointer on a "
                "guarded tensor?)");
  --it;
  return {it->first, &it->second};
}

// Every address is looked up before any region changes, so a bad one leaves nothing opened.
void GuardedBackend::open(const std::vector<const void*>& addresses) {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<uintptr_t, Region*>> regions;
  for (const void* p : addresses)
    if (p != nullptr) regions.push_back(region_of(p));
  for (auto& [start, r] : regions)
    if (r->opened++ == 0) protect(start, r->bytes, PROT_READ | PROT_WRITE);
}

void GuardedBackend::close(const std::vector<const void*>& addresses) {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const void* p : addresses) {
    if (p == nullptr) continue;
    auto [start, r] = region_of(p);
    if (--r->opened == 0) protect(start, r->bytes, PROT_NONE);
  }
}

void GuardedBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  const Opened o(*this, {dst});
  std::memcpy(dst, src, bytes);
}

void GuardedBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  const Opened o(*this, {src});
  std::memcpy(dst, src, bytes);
}

void GuardedBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  const Opened o(*this, {dst, src});
  std::memcpy(dst, src, bytes);
}

void GuardedBackend::fill_zero(void* p, size_t bytes) {
  const Opened o(*this, {p});
  std::memset(p, 0, bytes);
}

Opened::Opened(GuardedBackend& backend, std::initializer_list<const void*> addresses)
    : backend_(backend), addresses_(addresses) {
  backend_.open(addresses_);
}

Opened::Opened(GuardedBackend& backend, std::vector<const void*> addresses)
    : backend_(backend), addresses_(std::move(addresses)) {
  backend_.open(addresses_);
}

Opened::~Opened() { backend_.close(addresses_); }

GuardedBackend& guarded_backend() {
  static GuardedBackend backend;
  return backend;
}

}  // namespace lmforge::kernels::guarded
