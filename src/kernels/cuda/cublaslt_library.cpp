// defines: cublaslt_soname(), open_cublaslt(), require_cublaslt(), and the cuBLASLt entry points the CUDA backend
//          calls (cublasLtCreate ... cublasLtMatmul), each forwarding to libcublasLt loaded on first use
//
// The definitions below repeat cuBLASLt's own declarations (cublasLt.h is included first, so a signature that
// drifted from the toolkit's would not compile). They are hidden, so no executable exports them: one linked with
// -rdynamic would otherwise put them before the library's own functions in the library's internal calls.
#include "kernels/cuda/cublaslt_library.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <string>

#include "util/error.h"

namespace lmforge::kernels::cuda {
namespace {

// Every cuBLASLt function lmforge calls (linear_cuda.cu, backend_cuda.cpp).
#define LMFORGE_CUBLASLT_FUNCTIONS(X)     \
  X(cublasLtCreate)                       \
  X(cublasLtGetVersion)                   \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)

struct CublasLtApi {
#define LMFORGE_CUBLASLT_POINTER(name) decltype(&::name) name = nullptr;
  LMFORGE_CUBLASLT_FUNCTIONS(LMFORGE_CUBLASLT_POINTER)
#undef LMFORGE_CUBLASLT_POINTER
};

std::string cublaslt_not_loaded(const std::string& library, const std::string& reason) {
  return "CUDA backend: cannot load cuBLASLt (" + library + "), which --device cuda needs for its matrix products: " +
         reason + ". Install the CUDA " + std::to_string(CUBLAS_VER_MAJOR) + " toolkit's cuBLAS, or put the " +
         "directory that holds " + cublaslt_soname() + " on LD_LIBRARY_PATH";
}

CublasLtApi open_cublaslt_api(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw Error(cublaslt_not_loaded(library, reason ? reason : "dlopen failed"));
  }
  CublasLtApi api;
#define LMFORGE_CUBLASLT_RESOLVE(name)                                                                     \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));                                    \
  if (api.name == nullptr) {                                                                               \
    dlclose(handle);                                                                                       \
    throw Error(cublaslt_not_loaded(library, "it has no " #name " (a cuBLASLt older than the toolkit lmforge " \
                                             "was built with?)"));                                         \
  }
  LMFORGE_CUBLASLT_FUNCTIONS(LMFORGE_CUBLASLT_RESOLVE)
#undef LMFORGE_CUBLASLT_RESOLVE
  return api;
}

// The soname as dlopen searches it, else the same file beside the loaded CUDA runtime.
CublasLtApi open_process_cublaslt() {
  try {
    return open_cublaslt_api(cublaslt_soname());
  } catch (const Error& first) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&cudaRuntimeGetVersion), &info) == 0 || info.dli_fname == nullptr)
      throw;
    const std::string runtime = info.dli_fname;
    const size_t slash = runtime.rfind('/');
    if (slash == std::string::npos) throw;
    try {
      return open_cublaslt_api(runtime.substr(0, slash + 1) + cublaslt_soname());
    } catch (const Error&) {
      throw first;  // the search path's reason: the usual fix is there
    }
  }
}

const CublasLtApi& cublaslt_api() {
  // Loaded once for the process; an initialiser that throws leaves it unloaded, so the next call tries again.
  static const CublasLtApi loaded = open_process_cublaslt();
  return loaded;
}

}  // namespace

const char* cublaslt_soname() {
#define LMFORGE_STRINGIFY2(x) #x
#define LMFORGE_STRINGIFY(x) LMFORGE_STRINGIFY2(x)
  return "libcublasLt.so." LMFORGE_STRINGIFY(CUBLAS_VER_MAJOR);
#undef LMFORGE_STRINGIFY
#undef LMFORGE_STRINGIFY2
}

void open_cublaslt(const std::string& library) { open_cublaslt_api(library); }

void require_cublaslt() { cublaslt_api(); }

}  // namespace lmforge::kernels::cuda

// cuBLASLt's entry points as cublasLt.h declares them, forwarding to the loaded library; not exported (above).
#define LMFORGE_HIDDEN __attribute__((visibility("hidden")))
using lmforge::kernels::cuda::cublaslt_api;

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) {
  return cublaslt_api().cublasLtCreate(lightHandle);
}

LMFORGE_HIDDEN
size_t CUBLASWINAPI cublasLtGetVersion(void) { return cublaslt_api().cublasLtGetVersion(); }

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  return cublaslt_api().cublasLtMatmulDescCreate(matmulDesc, computeType, scaleType);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return cublaslt_api().cublasLtMatmulDescDestroy(matmulDesc);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                           size_t sizeInBytes) {
  return cublaslt_api().cublasLtMatmulDescSetAttribute(matmulDesc, attr, buf, sizeInBytes);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
  return cublaslt_api().cublasLtMatrixLayoutCreate(matLayout, type, rows, cols, ld);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return cublaslt_api().cublasLtMatrixLayoutDestroy(matLayout);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return cublaslt_api().cublasLtMatmulPreferenceCreate(pref);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return cublaslt_api().cublasLtMatmulPreferenceDestroy(pref);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void* buf, size_t sizeInBytes) {
  return cublaslt_api().cublasLtMatmulPreferenceSetAttribute(pref, attr, buf, sizeInBytes);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                                           cublasLtMatmulDesc_t operationDesc,
                                                           cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                           cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                           cublasLtMatmulPreference_t preference,
                                                           int requestedAlgoCount,
                                                           cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                           int* returnAlgoCount) {
  return cublaslt_api().cublasLtMatmulAlgoGetHeuristic(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc,
                                                       preference, requestedAlgoCount, heuristicResultsArray,
                                                       returnAlgoCount);
}

LMFORGE_HIDDEN
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                           const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                           const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                                           const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                                           cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                                           void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  return cublaslt_api().cublasLtMatmul(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D,
                                       Ddesc, algo, workspace, workspaceSizeInBytes, stream);
}

#undef LMFORGE_HIDDEN
