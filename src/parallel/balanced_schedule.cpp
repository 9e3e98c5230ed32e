// defines: balanced_counts, BalancedSchedule
#include "parallel/balanced_schedule.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <sstream>
#include <string>

#include "util/error.h"

namespace lmforge::parallel {

std::vector<int64_t> balanced_counts(const std::vector<double>& seconds_per_micro_batch, int64_t micro_batches) {
  const size_t ranks = seconds_per_micro_batch.size();
  if (ranks == 0 || micro_batches < (int64_t)ranks)
    throw Error("balanced data parallelism needs at least one micro-batch per rank (" +
                std::to_string(micro_batches) + " micro-batches, " + std::to_string(ranks) + " ranks)");
  std::vector<int64_t> counts(ranks, 1);
  for (int64_t given = (int64_t)ranks; given < micro_batches; given++) {
    size_t best = 0;
    for (size_t r = 1; r < ranks; r++)
      if ((double)(counts[r] + 1) * seconds_per_micro_batch[r] <
          (double)(counts[best] + 1) * seconds_per_micro_batch[best])
        best = r;
    counts[best]++;
  }
  return counts;
}

BalancedSchedule::BalancedSchedule(dist::Communicator& data_parallel, int64_t micro_batches, int64_t interval,
                                   std::ostream& log)
    : comm_(data_parallel), interval_(interval), log_(log) {
  if (interval <= 0) throw Error("--balance-interval must be positive");
  const int64_t ranks = comm_.size();
  if (micro_batches % ranks != 0 || micro_batches < ranks)
    throw Error("balanced data parallelism starts from an even split: the global batch's micro-batches (" +
                std::to_string(micro_batches) + ") must be a multiple of the data-parallel ranks (" +
                std::to_string(ranks) + ")");
  counts_.assign((size_t)ranks, micro_batches / ranks);
}

void BalancedSchedule::rebalance(int64_t iteration) {
  const size_t ranks = counts_.size();
  // Slots 2r and 2r+1: rank r's window seconds and micro-batches (zero elsewhere), summed over ranks.
  std::vector<double> window(2 * ranks, 0.0);
  window[2 * (size_t)comm_.rank()] = window_seconds_;
  window[2 * (size_t)comm_.rank() + 1] = (double)window_micro_batches_;
  comm_.all_reduce_sum(window.data(), window.size());
  window_seconds_ = 0.0;
  window_micro_batches_ = 0;
  window_steps_ = 0;
  std::vector<double> per_micro_batch(ranks);
  for (size_t r = 0; r < ranks; r++) {
    if (window[2 * r + 1] <= 0.0 || window[2 * r] <= 0.0) return;  // nothing measured (cannot happen: c_r ≥ 1)
    per_micro_batch[r] = window[2 * r] / window[2 * r + 1];
  }
  int64_t total = 0;
  for (int64_t c : counts_) total += c;
  const std::vector<int64_t> proposed = balanced_counts(per_micro_batch, total);
  auto makespan = [&](const std::vector<int64_t>& c) {
    double worst = 0.0;
    for (size_t r = 0; r < ranks; r++) worst = std::max(worst, (double)c[r] * per_micro_batch[r]);
    return worst;
  };
  const double before = makespan(counts_), after = makespan(proposed);
  if (proposed == counts_ || !(after < 0.95 * before)) return;
  // (an ostringstream: GCC 12 warns falsely (-Wrestrict) on `" " + std::to_string(...)`)
  std::ostringstream line;
  line << "data-parallel balance after iteration " << iteration << ": micro-batches per rank";
  for (size_t r = 0; r < ranks; r++) line << " " << counts_[r];
  line << " ->";
  for (size_t r = 0; r < ranks; r++) line << " " << proposed[r];
  line << std::fixed << std::setprecision(1) << " (measured ms per micro-batch:";
  for (size_t r = 0; r < ranks; r++) line << " " << per_micro_batch[r] * 1000.0;
  line << "; predicted compute per step " << before * 1000.0 << " -> " << after * 1000.0 << " ms)\n";
  log_ << line.str();
  log_.flush();
  counts_ = proposed;
}

std::vector<double> BalancedSchedule::run(const StepPlan& plan, MicroBatchPasses& passes, GradBuckets& buckets) {
  if (plan.training && window_steps_ >= interval_) rebalance(plan.iteration);
  const int rank = comm_.rank();
  int64_t first = 0;  // this rank's first global micro-batch
  for (int r = 0; r < rank; r++) first += counts_[(size_t)r];
  const int64_t local = counts_[(size_t)rank];
  std::vector<double> sums;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < local; k++) {
    passes.load(0, first + k);
    const std::vector<double> losses = passes.forward(0);
    if (sums.empty()) sums.assign(losses.size(), 0.0);
    for (size_t i = 0; i < losses.size(); i++) sums[i] += losses[i];
    if (!plan.training) continue;
    if (k + 1 == local) buckets.arm_overlap();
    passes.backward(plan.loss_scale);
  }
  if (plan.training) {
    window_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    window_micro_batches_ += local;
    window_steps_++;
  }
  return sums;
}

}  // namespace lmforge::parallel
