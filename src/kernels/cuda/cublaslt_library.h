// defines: cublaslt_soname(), open_cublaslt(), require_cublaslt(): cuBLASLt loaded with dlopen when the CUDA backend
//          first needs it, not at process start. Host code only, C++17, without CUDA headers (the tests call it).
//
// Why: libcublasLt is ~500 MB with thousands of relocations and static constructors; linked into the executable it
// was loaded at every start — a third of `lmforge prep`'s CPU time on a small input and most of `lmforge --help`'s
// (bench/data/RESULTS.md). The backend's files call cuBLASLt's functions by their own names as before:
// cublaslt_library.cpp defines those entry points, each forwarding to the loaded library.
#pragma once
#include <string>

namespace lmforge::kernels::cuda {

// "libcublasLt.so.<N>": the cuBLASLt of the toolkit lmforge was built with (N = its CUBLAS_VER_MAJOR).
const char* cublaslt_soname();

// Opens `library` (a soname searched as dlopen searches — LD_LIBRARY_PATH, the executable's run path, ld.so's cache
// — or a path) and resolves every cuBLASLt function lmforge calls in it. The library stays loaded. lmforge::Error
// naming the library, dlopen's or dlsym's reason and what to do, when it cannot.
void open_cublaslt(const std::string& library);

// cuBLASLt for the process, opened on the first call (thread-safe): cublaslt_soname(), or where that is not found
// on the search path, the same file beside the CUDA runtime the process loaded (a toolkit keeps them together).
// lmforge::Error from open_cublaslt() when neither loads; every later call reports the same error. The CUDA backend
// calls it once a GPU is found, before its first cuBLASLt call.
void require_cublaslt();

}  // namespace lmforge::kernels::cuda
