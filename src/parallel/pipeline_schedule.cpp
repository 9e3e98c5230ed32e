// defines: PipelineSchedule (1F1B, each micro-batch's activations in its own slot; the tied-gradient sum between
//          stages)
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::parallel {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

PipelineSchedule::PipelineSchedule(dist::Communicator& pipeline, StagePasses& stage)
    : pipe_(pipeline), stage_(stage) {}

std::vector<double> PipelineSchedule::run(const StepPlan& plan, MicroBatchPasses& passes, GradBuckets& buckets) {
  if (&passes != &stage_) throw std::logic_error("PipelineSchedule: run with the stage it was made for");
  const auto t0 = Clock::now();
  const int64_t m = local_micro_batches(plan.global_micro_batches, buckets);
  const int s = pipe_.rank(), P = pipe_.size();
  std::vector<double> sums(stage_.num_losses(), 0.0);
  training_ = plan.training;
  // Warm-up: enough forwards to fill the pipeline below this stage (all of them when only forwarding).
  const int64_t warmup = plan.training ? std::min<int64_t>(P - s - 1, m) : m;
  int64_t forwarded = 0, backwarded = 0;
  for (; forwarded < warmup; forwarded++) forward(plan, forwarded, buckets, sums);
  // Steady state: one forward, then the backward of the oldest micro-batch in flight.
  for (; forwarded < m; forwarded++) {
    forward(plan, forwarded, buckets, sums);
    backwarded++;
    backward(plan, buckets, backwarded == m);
  }
  // Cool-down: the backwards of the warm-up's micro-batches.
  if (plan.training)
    while (backwarded < m) {
      backwarded++;
      backward(plan, buckets, backwarded == m);
    }
  reap_sends(true);
  if (plan.training) sum_shared_gradients();
  // Only the last stage computed losses; x + 0 is exact, so every stage returns the last stage's sums.
  pipe_.all_reduce_sum(sums.data(), sums.size());
  if (plan.training) {
    timing_.steps++;
    timing_.wall_ms += ms_since(t0);
  }
  return sums;
}

void PipelineSchedule::forward(const StepPlan& plan, int64_t k, const GradBuckets& buckets,
                               std::vector<double>& sums) {
  InFlight e;
  e.k = k;
  if (!spare_.empty()) {
    e.slot = spare_.back();
    spare_.pop_back();
  } else {
    e.slot = slots_++;
  }
  stage_.load(e.slot, global_micro_batch(k, buckets));  // the global index: one process's samples and dropout masks
  const size_t n_in = stage_.input_elements(e.slot), n_out = stage_.output_elements(e.slot);
  const int s = pipe_.rank();
  if (!stage_.first_stage()) {
    input_.resize(n_in);
    pipe_.recv(input_.data(), n_in * sizeof(float), s - 1);
  }
  const auto t0 = Clock::now();
  const std::vector<double> losses = stage_.forward_stage(e.slot, input_.data());
  if (plan.training) timing_.busy_ms += ms_since(t0), timing_.forwards++;
  for (size_t i = 0; i < losses.size() && i < sums.size(); i++) sums[i] += losses[i];
  if (!stage_.last_stage()) send(stage_.stage_output(), n_out, s + 1);
  if (!plan.training) {
    spare_.push_back(e.slot);
    return;
  }
  in_flight_.push_back(e);
  timing_.peak_in_flight = std::max(timing_.peak_in_flight, in_flight_.size());
}

void PipelineSchedule::backward(const StepPlan& plan, GradBuckets& buckets, bool last) {
  if (in_flight_.empty()) throw std::logic_error("PipelineSchedule: a backward without a forward in flight");
  const InFlight e = in_flight_.front();
  in_flight_.pop_front();
  const size_t n_in = stage_.input_elements(e.slot), n_out = stage_.output_elements(e.slot);
  const int s = pipe_.rank();
  if (!stage_.last_stage()) {
    grad_.resize(n_out);
    pipe_.recv(grad_.data(), n_out * sizeof(float), s + 1);
  }
  // The last backward of the step lets the data-parallel reduction start inside it, unless tied tensors must first
  // be summed with another stage.
  if (last && stage_.shared_tensors().empty()) buckets.arm_overlap();
  const auto t0 = Clock::now();
  // The last stage scales the loss (--fp16's loss scale; the others receive scaled gradients); the 1/M comes with
  // the reduction, as SequentialSchedule.
  stage_.backward_stage(e.slot, grad_.data(), plan.loss_scale);
  timing_.busy_ms += ms_since(t0);
  timing_.backwards++;
  if (!stage_.first_stage()) send(stage_.input_grad(), n_in, s - 1);
  spare_.push_back(e.slot);
}

void PipelineSchedule::send(const kernels::Tensor& data, size_t n, int dest) {
  if (data.dtype != kernels::DType::F32 || (size_t)data.numel() != n || !data.contiguous())
    throw std::logic_error("PipelineSchedule: a stage message is not " + std::to_string(n) + " contiguous fp32 values: " +
                           data.describe());
  reap_sends(false);
  Sending out;
  if (!free_buffers_.empty()) {
    out.data = std::move(free_buffers_.back());
    free_buffers_.pop_back();
  }
  // Staged in host memory through the device's copy (the stage overwrites its output with the next forward, and
  // the transport reads host memory).
  out.data.resize(n);
  kernels::backend_for(data.device).copy_to_host(out.data.data(), data.data, n * sizeof(float));
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

// Which stages hold each of this stage's shared tensors (every stage takes part: the holder matrix is summed over
// the pipeline, as map_stage_tensors does).
void PipelineSchedule::find_shared() {
  shared_found_ = true;
  const int P = pipe_.size(), s = pipe_.rank();
  const param::ParamTable whole = stage_.whole_table();
  std::vector<double> holders(whole.size() * (size_t)P, 0.0);
  const std::vector<std::string> names = stage_.shared_tensors();
  for (const std::string& name : names) holders[whole.index_of(name) * (size_t)P + (size_t)s] = 1.0;
  pipe_.all_reduce_sum(holders.data(), holders.size());
  for (size_t j = 0; j < whole.size(); j++) {  // the whole model's order: the same on every stage
    if (holders[j * (size_t)P + (size_t)s] == 0.0) continue;
    Shared t;
    const param::Parameter& p = stage_.table().find(whole[j].name);
    t.offset = p.offset;
    t.numel = p.numel;
    for (int h = 0; h < P; h++)
      if (holders[j * (size_t)P + (size_t)h] > 0.0) t.holders.push_back(h);
    if (t.holders.size() < 2)
      throw std::logic_error("PipelineSchedule: tensor " + whole[j].name + " is shared by one stage only");
    shared_.push_back(std::move(t));
  }
}

// Megatron's embedding groups: each stage holding a shared table accumulated part of its gradient (GPT: the lookup
// on the first stage, the LM head on the last; T5: also the decoder's lookup on the split stage). All end with
// (g_h0 + g_h1) + g_h2 ...: the sum travels up the holders in stage order and the last sends it back to the others.
void PipelineSchedule::sum_shared_gradients() {
  if (pipe_.size() == 1) return;
  if (!shared_found_) find_shared();
  const int s = pipe_.rank();
  const kernels::Tensor grads = stage_.grads();
  kernels::Buffer other;  // the partial sum from the stage below, on the gradients' device
  for (const Shared& t : shared_) {
    const kernels::Tensor g = grads.slice0((int64_t)t.offset, (int64_t)t.numel);
    const auto at = std::find(t.holders.begin(), t.holders.end(), s);
    const bool lowest = at == t.holders.begin(), highest = at + 1 == t.holders.end();
    if (!lowest) {
      other.resize(kernels::backend_for(g.device), kernels::DType::F32, t.numel);
      const kernels::Tensor o = other.view({(int64_t)t.numel});
      pipe_.recv(o, *(at - 1));
      kernels::add_forward(g, o, g);  // g = other + g
    }
    if (!highest) {
      pipe_.send(g, *(at + 1));
      pipe_.recv(g, t.holders.back());
    } else {
      for (auto h = t.holders.begin(); h + 1 != t.holders.end(); ++h) pipe_.send(g, *h);
    }
  }
}

}  // namespace lmforge::parallel
