// defines: lmforge::parallel::balanced_counts() and BalancedSchedule (whole micro-batches per data-parallel rank in
//          proportion to measured speed: --balance-data-parallel)
#pragma once
#include <cstdint>
#include <ostream>
#include <vector>

#include "dist/communicator.h"
#include "parallel/microbatch_schedule.h"

namespace lmforge::parallel {

// How many of a global batch's M micro-batches each of D ranks runs, given each rank's measured seconds per
// micro-batch: every rank gets one, then each further micro-batch goes to the rank that would finish it first,
// argmin_r (c_r + 1)·t_r (ties: the lower rank). This minimises the step's makespan max_r c_r·t_r over whole
// micro-batches, and for large M makes c_r ∝ 1/t_r, i.e. proportional to throughput. Needs M ≥ D; t_r > 0.
std::vector<int64_t> balanced_counts(const std::vector<double>& seconds_per_micro_batch, int64_t micro_batches);

// --balance-data-parallel: data parallelism over ranks of unequal speed. Rank r runs the CONTIGUOUS global
// micro-batches [s_r, s_r + c_r) with s_r = c_0 + … + c_{r−1} (in place of SequentialSchedule's k·D + r), so the
// union over ranks is still exactly the global batch the flags define, each micro-batch reads the same samples
// and draws the same dropout masks (keyed by its global index), and the update stays the mean over the global
// batch (the data-parallel reduction divides by M, not by a rank's count). Only the grouping of the gradient sum
// changes (fp32 summation order) — and the wall time.
//
// Measurement: each training step times this rank's forward and backward passes (the gradient exchange started in
// the last backward runs in the background and is not waited for here). Every `interval` steps all ranks sum
// their window's (seconds, micro-batches) with one all-reduce over the data-parallel group, so every rank derives
// the same t_r and the same new counts (balanced_counts). The new counts are taken only if they shorten the
// predicted step by more than 5% (so timing noise does not make them flip back and forth); each change is logged.
// Counts start even (M/D each) and after a resume start even again (they do not affect the losses).
class BalancedSchedule final : public MicroBatchSchedule {
 public:
  BalancedSchedule(dist::Communicator& data_parallel, int64_t micro_batches, int64_t interval, std::ostream& log);
  std::vector<double> run(const StepPlan& plan, MicroBatchPasses& passes, GradBuckets& buckets) override;
  const std::vector<int64_t>& counts() const { return counts_; }

 private:
  void rebalance(int64_t iteration);  // collective

  dist::Communicator& comm_;
  int64_t interval_;
  std::ostream& log_;
  std::vector<int64_t> counts_;  // micro-batches per rank
  double window_seconds_ = 0.0;  // this rank's compute time since the last rebalance
  int64_t window_micro_batches_ = 0, window_steps_ = 0;
};

}  // namespace lmforge::parallel
