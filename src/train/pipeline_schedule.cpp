// defines: PipelineSchedule (1F1B with stashed inputs and recomputation; the tied-gradient sum between stages)
#include "train/pipeline_schedule.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace lmforge::train {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

PipelineSchedule::PipelineSchedule(dist::Communicator& pipeline, PipelineStage& stage)
    : pipe_(pipeline), stage_(stage) {}

layers::ForwardStep PipelineSchedule::step_of(const StepPlan& plan, int64_t k, const DataParallel& dp) const {
  layers::ForwardStep step;
  step.training = plan.training;
  step.seed = plan.seed;
  step.iteration = (uint64_t)plan.iteration;
  step.micro_batch = (uint64_t)(k * dp.size() + dp.rank());  // the global index: one process's dropout masks
  return step;
}

std::vector<double> PipelineSchedule::run(const StepPlan& plan, Model& model, Task& task, DataParallel& dp) {
  const auto t0 = Clock::now();
  const int64_t m = dp.local_micro_batches(plan.global_micro_batches);
  const int s = pipe_.rank(), P = pipe_.size();
  std::vector<double> sums(task.loss_names().size(), 0.0);
  held_ = -1;
  training_ = plan.training;
  // Warm-up: enough forwards to fill the pipeline below this stage (all of them when only forwarding).
  const int64_t warmup = plan.training ? std::min<int64_t>(P - s - 1, m) : m;
  int64_t forwarded = 0, backwarded = 0;
  for (; forwarded < warmup; forwarded++) forward(plan, forwarded, task, dp, sums);
  // Steady state: one forward, then the backward of the oldest micro-batch in flight.
  for (; forwarded < m; forwarded++) {
    forward(plan, forwarded, task, dp, sums);
    backwarded++;
    backward(plan, dp, backwarded == m);
  }
  // Cool-down: the backwards of the warm-up's micro-batches.
  if (plan.training)
    while (backwarded < m) {
      backwarded++;
      backward(plan, dp, backwarded == m);
    }
  reap_sends(true);
  if (plan.training) sum_shared_gradients(model);
  // Only the last stage computed losses; x + 0 is exact, so every stage returns the last stage's sums.
  pipe_.all_reduce_sum(sums.data(), sums.size());
  if (plan.training) {
    timing_.steps++;
    timing_.wall_ms += ms_since(t0);
  }
  return sums;
}

void PipelineSchedule::forward(const StepPlan& plan, int64_t k, Task& task, DataParallel& dp,
                               std::vector<double>& sums) {
  InFlight e;
  if (!spare_.empty()) {
    e = std::move(spare_.back());
    spare_.pop_back();
  }
  e.k = k;
  task.fill(plan.split, dp.micro_batch_first_sample(plan.first_sample, k, plan.micro_batch), plan.micro_batch,
            e.batch);
  const size_t n = stage_.activation_elements(e.batch);
  const int s = pipe_.rank();
  if (!stage_.first_stage()) {
    e.input.resize(n);
    pipe_.recv(e.input.data(), n * sizeof(float), s - 1);
  }
  const auto t0 = Clock::now();
  const std::vector<double> losses = stage_.forward_stage(e.batch, e.input.data(), step_of(plan, k, dp));
  if (plan.training) timing_.busy_ms += ms_since(t0), timing_.forwards++;
  held_ = k;
  for (size_t i = 0; i < losses.size() && i < sums.size(); i++) sums[i] += losses[i];
  if (!stage_.last_stage()) send(stage_.stage_output(), n, s + 1);
  if (!plan.training) {
    spare_.push_back(std::move(e));
    return;
  }
  stash_bytes_ += e.input.size() * sizeof(float);
  timing_.peak_stash_bytes = std::max(timing_.peak_stash_bytes, stash_bytes_);
  in_flight_.push_back(std::move(e));
}

void PipelineSchedule::backward(const StepPlan& plan, DataParallel& dp, bool last) {
  if (in_flight_.empty()) throw std::logic_error("PipelineSchedule: a backward without a forward in flight");
  InFlight e = std::move(in_flight_.front());
  in_flight_.pop_front();
  const size_t n = stage_.activation_elements(e.batch);
  const int s = pipe_.rank();
  if (held_ != e.k) {
    // The layers hold a later micro-batch: run this one's forward again (while the next stage is still busy with
    // the backward whose gradient we wait for next).
    const auto t0 = Clock::now();
    stage_.forward_stage(e.batch, e.input.data(), step_of(plan, e.k, dp));
    const double ms = ms_since(t0);
    timing_.busy_ms += ms;
    timing_.recompute_ms += ms;
    timing_.recomputed++;
  }
  if (!stage_.last_stage()) {
    grad_.resize(n);
    pipe_.recv(grad_.data(), n * sizeof(float), s + 1);
  }
  // The last backward of the step lets the data-parallel reduction start inside it, unless tied tensors must first
  // be summed with another stage.
  if (last && stage_.shared_tensors().empty()) dp.arm_overlap();
  const auto t0 = Clock::now();
  stage_.backward_stage(grad_.data(), 1.0f);  // the 1/M comes with the reduction, as SequentialSchedule
  timing_.busy_ms += ms_since(t0);
  timing_.backwards++;
  held_ = -1;
  if (!stage_.first_stage()) send(stage_.input_grad(), n, s - 1);
  stash_bytes_ -= e.input.size() * sizeof(float);
  spare_.push_back(std::move(e));
}

void PipelineSchedule::send(const float* data, size_t n, int dest) {
  reap_sends(false);
  Sending out;
  if (!free_buffers_.empty()) {
    out.data = std::move(free_buffers_.back());
    free_buffers_.pop_back();
  }
  out.data.assign(data, data + n);  // the stage overwrites its output with the next forward
  out.handle = pipe_.isend(out.data.data(), n * sizeof(float), dest);
  if (training_) timing_.sent_bytes += n * sizeof(float);
  sending_.push_back(std::move(out));
}

void PipelineSchedule::reap_sends(bool wait) {
  for (auto it = sending_.begin(); it != sending_.end();) {
    if (wait) pipe_.wait_send(it->handle);
    if (wait || pipe_.send_done(it->handle)) {
      free_buffers_.push_back(std::move(it->data));
      it = sending_.erase(it);
    } else {
      ++it;
    }
  }
}

// Megatron's embedding group: the first and the last stage each accumulated part of the tied table's gradient (the
// lookup on the first, the LM head on the last); both end with first + last, summed in that order.
void PipelineSchedule::sum_shared_gradients(Model& model) {
  const int P = pipe_.size(), s = pipe_.rank();
  if (P == 1 || !(stage_.first_stage() || stage_.last_stage())) return;
  const int peer = stage_.first_stage() ? P - 1 : 0;
  std::vector<float> other;
  for (const std::string& name : stage_.shared_tensors()) {
    const param::Parameter& p = model.table().find(name);
    float* g = model.grads() + p.offset;
    other.resize(p.numel);
    const size_t bytes = p.numel * sizeof(float);
    if (s == 0) {
      pipe_.send(g, bytes, peer);
      pipe_.recv(other.data(), bytes, peer);
      for (size_t i = 0; i < p.numel; i++) g[i] = g[i] + other[i];
    } else {
      pipe_.recv(other.data(), bytes, peer);
      pipe_.send(g, bytes, peer);
      for (size_t i = 0; i < p.numel; i++) g[i] = other[i] + g[i];
    }
  }
}

}  // namespace lmforge::train
