// defines: add_device_flag
#include "cli/device_flag.h"

#include <string>

#include "kernels/backend.h"

namespace lmforge::cli {

void add_device_flag(CLI::App* cmd, kernels::Device& device) {
  std::string names;
  for (size_t d = 0; d < kernels::kDeviceCount; d++)
    if (kernels::built_with(kernels::Device(d)))
      names += std::string(names.empty() ? "" : ", ") + device_name(kernels::Device(d));
  auto parse = [&device, names](const std::string& value) {
    for (size_t d = 0; d < kernels::kDeviceCount; d++)
      if (value == kernels::device_name(kernels::Device(d)) && kernels::built_with(kernels::Device(d))) {
        device = kernels::Device(d);
        return;
      }
    if (value == "cuda")
      throw CLI::ValidationError("--device", "cuda: this build has no CUDA backend (devices: " + names + ")");
    throw CLI::ValidationError("--device", value + ": no such device in this build (devices: " + names + ")");
  };
  cmd->add_option_function<std::string>("--device", parse,
                                        "Where the model computes: cpu (OpenMP + OpenBLAS/oneDNN), or guarded (the "
                                        "CPU's kernels over memory the process can touch only inside the backend's "
                                        "own calls: a test device that faults on host access to device memory), or "
                                        "cuda (an NVIDIA GPU; with several processes on a node each takes the GPU of "
                                        "its local rank (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or "
                                        "SLURM_LOCALID) modulo the visible GPUs, and data-, tensor- and "
                                        "pipeline-parallel traffic goes through the MPI/Gloo communicators staged "
                                        "through host memory; builds with a CUDA compiler). This build's devices: " +
                                            names)
      ->default_str("cpu");
}

}  // namespace lmforge::cli
