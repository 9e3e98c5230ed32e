# LMFORGE_CUDA: the CUDA backend of the kernels (src/kernels/cuda/). On by default when a CUDA compiler is found:
# CMAKE_CUDA_COMPILER or CUDACXX when given, else /usr/local/cuda/bin/nvcc (NVIDIA's toolkit, 12.x/13.x), else
# Debian 12's /usr/bin/nvcc (nvidia-cuda-toolkit 11.8, from non-free: LMFORGE_CUDA=1 bash scripts/install-deps.sh).
#
# Both toolkits build the same sources: .cu files are C++17 (nvcc 11.8 has no C++20; the rest of lmforge stays
# C++20), code for sm_80 (A100) and sm_90 (H100) — sm_90a instead of sm_90 where the compiler has it (12.0+), so
# arch-specific Hopper instructions can be used behind __CUDA_ARCH_FEAT_SM90_ALL — and every nvcc and host-compiler
# warning in a CUDA file is an error, so CI (no GPU) still checks all device code with the compiler.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  if(EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  elseif(EXISTS /usr/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/bin/nvcc)
  endif()
endif()

# The compiler's version, before CMake's own check: nvcc 11.8 refuses Debian 12's g++ 12 as host compiler
# ("unsupported GNU version"), so that toolkit is given clang++-14 (which it supports) unless a host compiler is set.
set(lmforge_cuda_version "")
if(CMAKE_CUDA_COMPILER)
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --version OUTPUT_VARIABLE nvcc_out ERROR_QUIET RESULT_VARIABLE nvcc_rc)
  if(nvcc_rc EQUAL 0 AND nvcc_out MATCHES "release ([0-9]+)\\.([0-9]+)")
    set(lmforge_cuda_version "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  endif()
endif()
if(lmforge_cuda_version AND lmforge_cuda_version VERSION_LESS 12.0 AND NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
  find_program(LMFORGE_CLANG14 clang++-14)
  if(LMFORGE_CLANG14)
    set(CMAKE_CUDA_HOST_COMPILER ${LMFORGE_CLANG14} CACHE FILEPATH "Host compiler of nvcc < 12 (g++ 12 unsupported)")
  endif()
endif()

include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(lmforge_cuda_default ON)
else()
  set(lmforge_cuda_default OFF)
endif()
option(LMFORGE_CUDA "Build the CUDA backend (src/kernels/cuda/); on when a CUDA compiler is found" ${lmforge_cuda_default})
# Warnings in CUDA files are errors (CI compiles every .cu, so no device code escapes the compiler's checks); the
# GPU check (scripts/device-check.sh) turns this off, since a newer host compiler's new warning there must not cost
# a lent machine's run.
option(LMFORGE_CUDA_WERROR "Treat nvcc and host-compiler warnings in CUDA files as errors" ON)

if(LMFORGE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "LMFORGE_CUDA=ON but no CUDA compiler was found (neither /usr/local/cuda/bin/nvcc nor "
                        "/usr/bin/nvcc). Install Debian's toolkit with `LMFORGE_CUDA=1 bash scripts/install-deps.sh`, "
                        "point CMAKE_CUDA_COMPILER at an nvcc, or configure with -DLMFORGE_CUDA=OFF.")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # "80" is sm_80 code plus compute_80 PTX (newer GPUs JIT it); "90a" is H100 code with Hopper's arch-specific
    # instructions, which only 12.0+ has.
    if(lmforge_cuda_version AND lmforge_cuda_version VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA_ARCHITECTURES 80 90a)
    else()
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  # libcudart.so beside libcublasLt.so: small binaries that use the toolkit of the machine they run on.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  if(CCACHE_PROGRAM)
    set(CMAKE_CUDA_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "lmforge: CUDA backend with nvcc ${CMAKE_CUDA_COMPILER_VERSION} for sm ${CMAKE_CUDA_ARCHITECTURES}")
else()
  message(STATUS "lmforge: no CUDA backend (LMFORGE_CUDA=OFF or no CUDA compiler found)")
endif()

# The kernels library's devices: the CPU backend (kernels/cpu/, kernels/guarded/) unless LMFORGE_KERNELS_ONLY, the
# CUDA backend (kernels/cuda/) with LMFORGE_CUDA. The registrations and backend_for() (kernels/dispatch.cpp,
# kernels/backend.cpp) see which through LMFORGE_KERNELS_CPU / LMFORGE_KERNELS_CUDA.
function(lmforge_kernels_devices)
  if(NOT LMFORGE_KERNELS_ONLY)
    target_compile_definitions(lmforge_kernels PRIVATE LMFORGE_KERNELS_CPU=1)
  endif()
  if(LMFORGE_CUDA)
    target_compile_definitions(lmforge_kernels PRIVATE LMFORGE_KERNELS_CUDA=1)
    # cuBLASLt is not linked: the backend loads it with dlopen when a GPU is found (kernels/cuda/cublaslt_library.h),
    # so a command that never uses --device cuda does not load its ~500 MB at start.
    target_link_libraries(lmforge_kernels PUBLIC CUDA::cudart ${CMAKE_DL_LIBS})
    # Never --use_fast_math: it changes expf, division and sqrt and flushes denormals (the op cases compare against
    # the CPU and a double-precision reference). -lineinfo lets compute-sanitizer name source lines.
    target_compile_options(lmforge_kernels PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra;-lineinfo>")
    if(LMFORGE_CUDA_WERROR)
      target_compile_options(lmforge_kernels PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings;-Xcompiler=-Werror>")
    endif()
  endif()
endfunction()
