# GoogleTest for a kernels-only build (LMFORGE_KERNELS_ONLY) on a machine that may not have it installed: the
# system's package when present, else compiled from a source tree (Debian's /usr/src/googletest, which
# scripts/device-check.sh carries to the GPU machine) named by LMFORGE_GTEST_SOURCE_DIR.
set(LMFORGE_GTEST_SOURCE_DIR "" CACHE PATH "GoogleTest sources, used when no installed GoogleTest is found")
find_package(GTest QUIET)
if(NOT GTest_FOUND)
  if(NOT LMFORGE_GTEST_SOURCE_DIR OR NOT EXISTS "${LMFORGE_GTEST_SOURCE_DIR}/CMakeLists.txt")
    message(FATAL_ERROR "GoogleTest not found: install it (Debian libgtest-dev) or set LMFORGE_GTEST_SOURCE_DIR to "
                        "its sources (a copy of /usr/src/googletest), or configure with -DLMFORGE_TESTS=OFF")
  endif()
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory("${LMFORGE_GTEST_SOURCE_DIR}" "${CMAKE_BINARY_DIR}/googletest" EXCLUDE_FROM_ALL)
  add_library(GTest::gtest ALIAS gtest)
  add_library(GTest::gtest_main ALIAS gtest_main)
endif()
include(GoogleTest)
