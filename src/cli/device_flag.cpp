// defines: add_device_flag
#include "cli/device_flag.h"

#include <string>

namespace lmforge::cli {

void add_device_flag(CLI::App* cmd, kernels::Device& device) {
  std::string names;
  for (size_t d = 0; d < kernels::kDeviceCount; d++) names += std::string(d ? ", " : "") + device_name(kernels::Device(d));
  auto parse = [&device, names](const std::string& value) {
    for (size_t d = 0; d < kernels::kDeviceCount; d++)
      if (value == kernels::device_name(kernels::Device(d))) {
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
                                        "own calls: a test device that faults on host access to device memory)")
      ->default_str("cpu");
}

}  // namespace lmforge::cli
