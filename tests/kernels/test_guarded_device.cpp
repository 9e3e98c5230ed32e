// defines: tests of the GUARDED test device (kernels/backend.h): its memory functions, ops on it, and that the host
//          cannot read or write its memory outside the backend's calls (a segmentation fault)
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_checks.h"
#include "kernels/ops.h"

namespace lmforge::kernels {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define LMFORGE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LMFORGE_TEST_ASAN 1
#endif
#endif

TEST(GuardedDevice, AllocatesByBytesAndMovesMemory) {
  Backend& be = backend_for(Device::GUARDED);
  EXPECT_STREQ(be.name(), "guarded");
  EXPECT_EQ(be.device(), Device::GUARDED);
  EXPECT_STREQ(device_name(Device::GUARDED), "guarded");
  expect_memory_functions(be, 3000);  // more than a page
  // An interior address: the copy opens the allocation that holds it.
  const size_t n = 3000;
  std::vector<float> host(n), back(1, -1.0f);
  for (size_t i = 0; i < n; i++) host[i] = (float)i;
  void* q = be.alloc(n * 4);
  be.copy_to_device(q, host.data(), n * 4);
  be.copy_to_host(back.data(), static_cast<float*>(q) + 1500, 4);
  EXPECT_EQ(back[0], 1500.0f);
  be.free(q);
}

TEST(GuardedDevice, OpsRunOnItsMemory) {
  Backend& be = backend_for(Device::GUARDED);
  Buffer a(be, DType::F32, 5), b(be, DType::F32, 5), out(be, DType::F32, 5);
  const std::vector<float> x{1, 2, 3, 4, 5}, y{10, 20, 30, 40, 50};
  be.copy_to_device(a.data(), x.data(), 20);
  be.copy_to_device(b.data(), y.data(), 20);
  EXPECT_EQ(a.view({5}).device, Device::GUARDED);
  add_forward(out.view({5}), a.view({5}), b.view({5}));
  std::vector<float> back(5);
  be.copy_to_host(back.data(), out.data(), 20);
  EXPECT_EQ(back, (std::vector<float>{11, 22, 33, 44, 55}));
  // The same memory labelled as host (CPU) memory is not the CPU's to touch; a host pointer labelled as guarded
  // is refused before any kernel runs.
  std::vector<float> host(5, 1.0f);
  EXPECT_THROW(add_forward(out.view({5}), make_view(host.data(), {5}, Device::GUARDED), b.view({5})), std::exception);
}

// The point of the device: outside the backend's calls its memory is inaccessible, so host code that reads a
// device pointer dies at the access.
TEST(GuardedDeviceDeathTest, HostAccessOutsideACallFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Backend& be = backend_for(Device::GUARDED);
  Buffer b(be, DType::F32, 16);
  b.zero();
  const volatile float* read = b.f32();
  volatile float* write = b.f32();
#ifdef LMFORGE_TEST_ASAN
  // AddressSanitizer reports the SEGV itself and exits.
  EXPECT_DEATH((void)read[0], "SEGV");
  EXPECT_DEATH(write[3] = 1.0f, "SEGV");
#else
  EXPECT_EXIT((void)read[0], ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT(write[3] = 1.0f, ::testing::KilledBySignal(SIGSEGV), "");
#endif
  // Through the backend the same memory reads fine.
  float value = -1.0f;
  be.copy_to_host(&value, b.data(), 4);
  EXPECT_EQ(value, 0.0f);
}

// Allocations of 2 MiB or more take another path (a 2 MiB-aligned mapping asking for huge pages): their first and
// last elements are as inaccessible outside the backend's calls, and whole through them.
TEST(GuardedDeviceDeathTest, HostAccessToALargeAllocationFaultsToo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Backend& be = backend_for(Device::GUARDED);
  const size_t n = (size_t(5) << 20) / 4 + 3;  // 5 MiB and 12 bytes: two whole huge pages and a partial one
  Buffer b(be, DType::F32, n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t(2) << 20), 0u);
  std::vector<float> host(n);
  for (size_t i = 0; i < n; i++) host[i] = (float)i;
  be.copy_to_device(b.data(), host.data(), n * 4);
  const volatile float* data = b.f32();
#ifdef LMFORGE_TEST_ASAN
  EXPECT_DEATH((void)data[0], "SEGV");
  EXPECT_DEATH((void)data[n - 1], "SEGV");
#else
  EXPECT_EXIT((void)data[0], ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT((void)data[n - 1], ::testing::KilledBySignal(SIGSEGV), "");
#endif
  std::vector<float> back(n, -1.0f);
  be.copy_to_host(back.data(), b.data(), n * 4);
  EXPECT_EQ(back, host);
}

}  // namespace
}  // namespace lmforge::kernels
