// defines: use_short_omp_spin(), which restarts the program with libgomp's spin-wait shortened (GOMP_SPINCOUNT)
//          unless the user chose a wait policy
#pragma once

namespace lmforge::kernels::cpu {

// libgomp's spin-wait before an idle OpenMP thread sleeps, in spins (libgomp counts ~100,000 per millisecond).
// Without OMP_WAIT_POLICY libgomp spins 300,000 (~3 ms) at every barrier and between parallel regions; a training
// step has hundreds of regions with serial code between them, so on a 2-core machine shared with other work each
// thread burned a core while it waited, or while the thread it waited for had lost its core (libgomp's spin was 30 %
// of the CPU samples of config A's step at load 10-14). 10,000 (~0.1 ms) still catches the back-to-back regions of
// one op sequence without a sleep and wake-up, and gives the core up soon after.
inline constexpr const char* kOmpSpinCount = "10000";

// Call first thing in main(), before any OpenMP construct: where neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set,
// sets GOMP_SPINCOUNT=kOmpSpinCount and executes the program again (same process, arguments and environment plus
// that variable), because libgomp reads its environment once, when it is loaded, before main(). Returns (and the
// program carries on with libgomp's default) where the user set either variable or the restart fails.
void use_short_omp_spin(char** argv);

}  // namespace lmforge::kernels::cpu
