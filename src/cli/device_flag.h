// defines: add_device_flag() (--device cpu|guarded of `lmforge train` and `lmforge generate`)
#pragma once
#include <CLI/CLI.hpp>

#include "kernels/tensor.h"

namespace lmforge::cli {

// --device NAME into `device`: a device of this build (kernels::device_name: cpu, guarded). `cuda` is refused saying
// that this build has no CUDA backend; any other name lists the devices. The command then takes its backend once,
// kernels::backend_for(device), and passes it down.
void add_device_flag(CLI::App* cmd, kernels::Device& device);

}  // namespace lmforge::cli
