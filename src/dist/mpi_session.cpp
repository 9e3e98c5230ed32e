// defines: MpiSession over Open MPI's C API
#include "dist/mpi_session.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>

#include "dist/mpi_check.h"
#include "util/error.h"

namespace lmforge::dist {

MpiSession::MpiSession() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed");
  // Errors come back as codes (then Error + abort by the caller) rather than killing the job without a reason.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiSession::processor_name() const {
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  return std::string(name, static_cast<size_t>(len));
}

void MpiSession::send(int dest, int tag, std::span<const int64_t> values) {
  mpi_check(MPI_Send(values.data(), static_cast<int>(values.size()), MPI_INT64_T, dest, tag, MPI_COMM_WORLD), "send");
}

bool MpiSession::poll(int& source, int& tag, std::vector<int64_t>& values) {
  int flag = 0;
  MPI_Status status;
  mpi_check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status), "probe");
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_INT64_T, &count);
  values.resize(static_cast<size_t>(count));
  source = status.MPI_SOURCE;
  tag = status.MPI_TAG;
  mpi_check(MPI_Recv(values.data(), count, MPI_INT64_T, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "receive");
  return true;
}

void MpiSession::broadcast(std::string& bytes, int root) {
  int64_t n = static_cast<int64_t>(bytes.size());
  mpi_check(MPI_Bcast(&n, 1, MPI_INT64_T, root, MPI_COMM_WORLD), "broadcast");
  bytes.resize(static_cast<size_t>(n));
  // MPI counts are int: send large strings in pieces.
  for (int64_t off = 0; off < n;) {
    const int chunk = static_cast<int>(std::min<int64_t>(n - off, 1 << 30));
    mpi_check(MPI_Bcast(bytes.data() + off, chunk, MPI_CHAR, root, MPI_COMM_WORLD), "broadcast");
    off += chunk;
  }
}

void MpiSession::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

}  // namespace lmforge::dist
