// defines: expect_memory_functions() (the checks of a Backend's memory functions every device passes: aligned
//          allocation, host <-> device and device -> device copies, release_zeroed, fill_zero, free)
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace lmforge::kernels {

// n floats through every memory function of `be`.
inline void expect_memory_functions(Backend& be, size_t n) {
  void* p = be.alloc(n * 4);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::vector<float> host(n), back(n, -1.0f);
  for (size_t i = 0; i < n; i++) host[i] = (float)i;
  be.copy_to_device(p, host.data(), n * 4);
  be.copy_to_host(back.data(), p, n * 4);
  EXPECT_EQ(host, back);
  void* q = be.alloc(n * 4);
  be.copy_on_device(q, p, n * 4);
  be.copy_to_host(back.data(), q, n * 4);
  EXPECT_EQ(host, back);
  be.free(q);
  // release_zeroed of a range that starts and ends inside pages (and, for n over two pages' worth, holds whole
  // pages the CPU returns to the system): zeros there, the neighbours kept.
  if (n >= 4) {
    const size_t lo = 1, hi = n - 1;
    be.release_zeroed(static_cast<float*>(p) + lo, (hi - lo) * 4);
    be.copy_to_host(back.data(), p, n * 4);
    std::vector<float> want = host;
    for (size_t i = lo; i < hi; i++) want[i] = 0.0f;
    EXPECT_EQ(back, want);
  }
  be.fill_zero(p, n * 4);
  be.synchronize();
  be.copy_to_host(back.data(), p, n * 4);
  EXPECT_EQ(back, std::vector<float>(n, 0.0f));
  be.free(p);
}

}  // namespace lmforge::kernels
