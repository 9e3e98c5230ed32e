// defines: use_short_omp_spin() (omp_spin.h)
#include "kernels/cpu/omp_spin.h"

#include <unistd.h>

#include <cstdlib>

namespace lmforge::kernels::cpu {

void use_short_omp_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  // Set first: the new image sees it (and does not restart again), and so do child processes (launched ranks).
  if (::setenv("GOMP_SPINCOUNT", kOmpSpinCount, 0) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only on failure: carry on with the spin libgomp already has
}

}  // namespace lmforge::kernels::cpu
