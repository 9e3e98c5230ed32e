// defines: the Philox lanes cases on the CPU's own path (AVX2 intrinsics where the build has AVX2)
#define PHILOX_SUITE PhiloxLanes
#include "philox_lanes_cases.h"
