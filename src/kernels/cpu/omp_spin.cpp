// defines: use_short_omp_spin() (omp_spin.h)
#include "kernels/cpu/omp_spin.h"

#include <unistd.h>

#include <cstdlib>

namespace lmforge::kernels::cpu {

void use_short_omp_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  // Set first: the new image sees it (and does not restart again), and so do child processes (launched ranks).
  if (::setenv("GOMP_SPINCOUNT", kOmpSpinCount, 0) != 0) return;
  // The executable's own path, not /proc/self/exe: the new image's name (/proc/<pid>/comm, what ps, top and pkill
  // show, and what tests and launchers look ranks up by) is the basename of the path executed, which would be "exe".
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = '\0';
  ::execv(self, argv);  // returns only on failure: carry on with the spin libgomp already has
}

}  // namespace lmforge::kernels::cpu
