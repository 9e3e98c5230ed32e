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

// Allocations of at least this much start on a 2 MiB boundary and ask for transparent huge pages.
constexpr size_t kHugePage = size_t(2) << 20;

void protect(uintptr_t start, size_t bytes, int prot) {
  if (mprotect(reinterpret_cast<void*>(start), bytes, prot) != 0)
    throw Error(std::string("guarded device: mprotect failed: ") + std::strerror(errno));
}

}  // namespace

std::string GuardedBackend::info() const {
  return "guarded (test device: the CPU kernels over mappings that are PROT_NONE outside the backend's calls)";
}

// A large allocation (2 MiB or more: the word embedding, its gradient and optimizer state, the logits) is mapped on
// a 2 MiB boundary with MADV_HUGEPAGE, so that the kernel backs it with transparent huge pages where it can: every
// open()/close() rewrites the protection of each page-table entry of the region, and with 4 KiB pages that was half
// of a guarded training run's CPU time (mprotect's change_pte_range); a huge page is one entry for 512 of them. The
// region is still one whole mapping, PROT_NONE outside the backend's calls; without huge pages (THP off) it
// works as before, only slower.
void* GuardedBackend::alloc(size_t bytes) {
  const size_t len = bytes == 0 ? page_size() : (bytes + page_size() - 1) / page_size() * page_size();
  void* p = nullptr;
  if (len < kHugePage) {
    p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
  } else {
    // Map 2 MiB more than needed and unmap what lies before the first 2 MiB boundary and after the region.
    void* raw = mmap(nullptr, len + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t first = reinterpret_cast<uintptr_t>(raw), end = first + len + kHugePage;
    const uintptr_t start = (first + kHugePage - 1) / kHugePage * kHugePage;
    if (start > first) munmap(raw, start - first);
    if (end > start + len) munmap(reinterpret_cast<void*>(start + len), end - (start + len));
    p = reinterpret_cast<void*>(start);
    madvise(p, len, MADV_HUGEPAGE);  // advice only: its failure (no THP in this kernel) changes nothing else
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  regions_[reinterpret_cast<uintptr_t>(p)] = Region{len, 0};
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
