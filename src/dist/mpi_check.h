// defines: mpi_check(): an MPI return code to an Error naming the operation (internal to src/dist: the MPI
//          session and the MPI communicator; no header outside src/dist includes <mpi.h>)
#pragma once
#include <mpi.h>

#include <cstddef>
#include <string>

#include "util/error.h"

namespace lmforge::dist {

// Throws Error("MPI <what> failed: <MPI's error string>") unless rc is MPI_SUCCESS. Useful only where errors
// come back as codes (MPI_ERRORS_RETURN, which both set on their communicators).
inline void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string("MPI ") + what + " failed: " + std::string(text, static_cast<size_t>(len)));
}

}  // namespace lmforge::dist
