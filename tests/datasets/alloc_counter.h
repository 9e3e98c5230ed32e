// defines: allocation_count() — replaces the global operator new of the test program that includes it (include it
//   from one translation unit only), so a test can show that a loop allocates nothing once its buffers have grown
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

// GCC 12 flags free() in a replaced operator delete as a mismatch after inlining std::allocator; malloc and free do
// pair here.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

inline std::atomic<int64_t>& allocation_counter() {
  static std::atomic<int64_t> count{0};
  return count;
}
inline int64_t allocation_count() { return allocation_counter().load(); }

void* operator new(size_t n) {
  allocation_counter().fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { ::operator delete(p); }
