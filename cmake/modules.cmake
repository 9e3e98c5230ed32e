# One static library per concern folder under src/ (lmforge_<folder>), so that a folder builds, links and
# tests on its own and the dependency graph between concerns is written down in one place (src/CMakeLists.txt).
function(lmforge_module name)
  cmake_parse_arguments(M "" "" "DEPS" ${ARGN})
  # A module may keep per-device code in subfolders (kernels/cpu/), so sources are collected recursively.
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp")
  list(FILTER sources EXCLUDE REGEX ".*/main\\.cpp$")
  # Device subfolders build with their device: cuda/ (its .cpp and .cu files) only with LMFORGE_CUDA; the CPU's
  # cpu/ and guarded/ not in a kernels-only build (cmake/cuda.cmake).
  if(LMFORGE_CUDA)
    file(GLOB_RECURSE cuda_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/${name}/cuda/*.cu")
    # Each .cu is its own translation unit (nvcc compiles them in parallel; file-private names may repeat).
    set_source_files_properties(${cuda_sources} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    list(APPEND sources ${cuda_sources})
  else()
    list(FILTER sources EXCLUDE REGEX ".*/cuda/[^/]*$")
  endif()
  if(LMFORGE_KERNELS_ONLY)
    list(FILTER sources EXCLUDE REGEX ".*/kernels/(cpu|guarded)/.*")
  endif()
  if(sources)
    add_library(lmforge_${name} STATIC ${sources})
    # Unity batches (a few files compiled as one) parse the shared headers once per batch, not once per file:
    # a clean build of the libraries took 3x less CPU time. Names private to a file must differ across a module.
    set_target_properties(lmforge_${name} PROPERTIES UNITY_BUILD ${LMFORGE_UNITY_BUILD})
    target_include_directories(lmforge_${name} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}")
    target_link_libraries(lmforge_${name} PUBLIC ${M_DEPS})
  else()
    add_library(lmforge_${name} INTERFACE)
    target_include_directories(lmforge_${name} INTERFACE "${CMAKE_CURRENT_SOURCE_DIR}")
    target_link_libraries(lmforge_${name} INTERFACE ${M_DEPS})
  endif()
endfunction()

# Every tests/<folder>/test_*.cpp becomes one GoogleTest executable linked to the given libraries, labelled with
# the folder. RUN_LMFORGE names the tests (file stems) that run the lmforge executable (every test of cli/ does);
# RUN_LMFORGE_LABEL gives those another label (`ctest -L <folder>` still selects them when the label starts with
# the folder's name), which CI's sanitizer pass uses to leave the slowest out.
function(lmforge_tests folder)
  cmake_parse_arguments(T "" "RUN_LMFORGE_LABEL" "LIBS;RUN_LMFORGE" ${ARGN})
  file(GLOB tests CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/${folder}/test_*.cpp")
  foreach(src ${tests})
    get_filename_component(stem ${src} NAME_WE)
    set(target ${folder}_${stem})
    add_executable(${target} ${src})
    target_link_libraries(${target} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
    target_include_directories(${target} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
    # The test's own code (GoogleTest's macro-heavy bodies, small references) compiles at LMFORGE_TEST_OPT in
    # optimised builds: at -O3 it took ~40 % more compile time, about half of a clean build's, for nothing the
    # tests need; the libraries under test keep the build's optimisation (the later -O wins). Debug stays -O0.
    target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:${LMFORGE_TEST_OPT}>)
    if(TARGET lmforge_test_pch)  # GoogleTest's and the standard library's headers, parsed once (tests/CMakeLists.txt)
      target_precompile_headers(${target} REUSE_FROM lmforge_test_pch)
      # the PCH's flags everywhere (GCC refuses it where -fopenmp's _REENTRANT/_OPENMP differ)
      target_link_libraries(${target} PRIVATE OpenMP::OpenMP_CXX)
    endif()
    target_compile_definitions(${target} PRIVATE
      LMFORGE_SHARED_DIR="${LMFORGE_SHARED_DIR}"
      LMFORGE_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
      LMFORGE_BINARY_DIR="${CMAKE_BINARY_DIR}")
    set(labels ${folder})
    if(folder STREQUAL "cli" OR stem IN_LIST T_RUN_LMFORGE)  # tests that run the executable itself
      add_dependencies(${target} lmforge)
      target_compile_definitions(${target} PRIVATE LMFORGE_EXE="$<TARGET_FILE:lmforge>")
      if(T_RUN_LMFORGE_LABEL AND stem IN_LIST T_RUN_LMFORGE)  # one label only: gtest_discover_tests flattens a list
        set(labels ${T_RUN_LMFORGE_LABEL})
      endif()
    endif()
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${labels}")
    # "<executable> <label>" for build/test-executables.txt (tests/CMakeLists.txt): scripts/sanitize.sh builds
    # only the executables whose tests it runs.
    set_property(GLOBAL APPEND PROPERTY LMFORGE_TEST_EXECUTABLES "${target} ${labels}")
  endforeach()
endfunction()
