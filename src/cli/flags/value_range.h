// defines: at_least(), greater_than(), in_range(): the one range check of every lmforge command's numeric flags,
//          with messages a user reads ("must be at least 1, got 0") instead of CLI11's Range text, which prints the
//          limits with std::to_string (a 309-digit number for "any positive double")
#pragma once
#include <cstdint>

#include <CLI/CLI.hpp>

namespace lmforge::cli {

// Whole numbers from `min` up ("must be at least 1, got 0"); at_least(0) is "must be 0 or more".
CLI::Validator at_least(int64_t min);

// Real numbers above `bound` ("must be greater than 0, got 0"): a positive learning-rate-like value.
CLI::Validator greater_than(double bound);

// Numbers from `lo` to `hi`, both included ("must be between 0 and 1, got 1.5").
CLI::Validator in_range(double lo, double hi);

}  // namespace lmforge::cli
