// defines: the tests that cuBLASLt is loaded only by the CUDA backend (kernels/cuda/cublaslt_library.h): a process
//          that never takes the CUDA backend has no cuBLASLt mapped — before, the library was linked and loaded at
//          every start, a third of a small `lmforge prep`'s CPU time — also after the dispatch table registered
//          every CUDA kernel; a cuBLASLt that cannot be opened is an error naming the library and the fix; with a
//          GPU the backend loads it. Test names contain "Cuda"; only the last needs a device (skipped without one).
#include <gtest/gtest.h>
#include <link.h>

#include <cstring>
#include <string>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "util/error.h"
#if LMFORGE_TEST_CUDA
#include "kernels/cuda/cublaslt_library.h"
#endif

namespace lmforge::kernels {
namespace {

// Whether a shared object whose file name starts with `stem` is mapped into this process.
bool library_loaded(const char* stem) {
  struct Search {
    const char* stem;
    bool found = false;
  } search{stem};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const char* name = info->dlpi_name ? info->dlpi_name : "";
        const char* slash = std::strrchr(name, '/');
        const char* file = slash ? slash + 1 : name;
        if (std::strncmp(file, s->stem, std::strlen(s->stem)) == 0) s->found = true;
        return 0;
      },
      &search);
  return search.found;
}

// First in the file: gtest runs a file's tests in order, and the tests below load the library.
TEST(CudaLibraries, CublasLtIsNotLoadedAtStartNorByTheDispatchTable) {
  EXPECT_FALSE(library_loaded("libcublasLt.so")) << "cuBLASLt was loaded before anything asked for the CUDA backend";
  // Builds the dispatch table: every backend of the build registers its kernels (the CUDA ones too).
  (void)op_supported(Op::LINEAR, Device::CUDA, DType::F32);
  (void)op_supported(Op::LINEAR, Device::CPU, DType::F32);
  EXPECT_FALSE(library_loaded("libcublasLt.so")) << "registering the kernels loaded cuBLASLt";
}

#if LMFORGE_TEST_CUDA
TEST(CudaLibraries, ACublasLtThatCannotBeOpenedIsAnErrorNamingItAndTheFix) {
  const std::string missing = std::string(cuda::cublaslt_soname()) + ".0-not-installed";
  try {
    cuda::open_cublaslt(missing);
    FAIL() << "opening " << missing << " did not fail";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(missing), std::string::npos) << what;
    EXPECT_NE(what.find("--device cuda"), std::string::npos) << what;
    EXPECT_NE(what.find("LD_LIBRARY_PATH"), std::string::npos) << what;
  }
  // A library without cuBLASLt's functions (the C library) is refused naming the first function it lacks.
  try {
    cuda::open_cublaslt("libc.so.6");
    FAIL() << "libc.so.6 was taken for cuBLASLt";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("it has no cublasLtCreate"), std::string::npos) << e.what();
  }
}

// The toolkit this build was made with has its cuBLASLt, with every function lmforge calls.
TEST(CudaLibraries, TheToolkitsCublasLtOpensWithEveryEntryPoint) {
  EXPECT_EQ(std::string(cuda::cublaslt_soname()).rfind("libcublasLt.so.", 0), 0u) << cuda::cublaslt_soname();
  EXPECT_NO_THROW(cuda::require_cublaslt());
  EXPECT_TRUE(library_loaded("libcublasLt.so"));
}
#endif

// With a GPU, taking the backend loads cuBLASLt; without one the backend's reason is unchanged (no library named).
TEST(CudaLibraries, TheCudaBackendLoadsCublasLtWhenADeviceIsFound) {
  if (!built_with(Device::CUDA)) GTEST_SKIP() << "this build has no CUDA backend";
  try {
    backend_for(Device::CUDA);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("cuBLASLt"), std::string::npos) << e.what();
    GTEST_SKIP() << "no usable CUDA device: " << e.what();
  }
  EXPECT_TRUE(library_loaded("libcublasLt.so"));
}

}  // namespace
}  // namespace lmforge::kernels
