// defines: kLinearF16BlockElems, the block size of the CPU linear layer on f16 storage (kernels/cpu/linear_cpu.cpp)
#pragma once
#include <cstdint>

namespace lmforge::kernels::cpu {

// fp32 elements of the largest output or output-gradient block converted at once (128 MB): wider ones (the LM
// head's [N, vocab] logits) are done in blocks of output columns, so the scratch does not grow with the batch. Not
// smaller: every block is a GEMM and conversion passes ending in a barrier of the OpenMP team, and on a loaded
// machine each barrier can wait a scheduler time slice for a descheduled thread; with blocks of 4M elements the
// f16 LM head of config A (13 blocks) took 2x the fp32 one's CPU time at 2 threads, whole it took 1.1x. Tests size
// their cases from this constant to cross a block boundary.
inline constexpr int64_t kLinearF16BlockElems = int64_t(1) << 25;

}  // namespace lmforge::kernels::cpu
