// defines: the Philox lanes cases on the portable path: this file is compiled without AVX2/AVX-512
//          (tests/CMakeLists.txt), so the lanes without intrinsics are tested on machines that have them
#if defined(__AVX2__)
#error "test_philox_lanes_portable.cpp must be compiled without AVX2 (tests/CMakeLists.txt)"
#endif
#define PHILOX_SUITE PhiloxLanesPortable
#include "philox_lanes_cases.h"
