// defines: kLinearF16BlockElems and kLinearWideBf16BlockElems, the block sizes of the CPU linear layer on f16
//          storage and of its backward on bf16 with widened products (kernels/cpu/linear_cpu.cpp)
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

// The bf16 backward with widened products (a CPU without AVX512-BF16/AMX) whose output gradient is too large to
// widen whole (more than kBf16WidenWholeElems: the LM head's [N, vocab] logit gradient) takes it in blocks of
// output columns of this many elements (4 MB of fp32, cache-sized): each block is widened once and used by both
// products, dinp's and dweight's, while it is in cache. Per product, the gradient was widened twice, and through
// memory: config A's head backward took 135 ms against fp32's 124, in blocks of 1M elements 124 (blocks of 256K:
// 133, of 4M: 130).
inline constexpr int64_t kLinearWideBf16BlockElems = int64_t(1) << 20;

}  // namespace lmforge::kernels::cpu
