// defines: the host-side steps of one ELECTRA step (masking, Gumbel sampling, fake data) from given uniform draws
#include "model/electra_masking.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <omp.h>
#include <string>

#include "util/error.h"

namespace lmforge::model {

int electra_max_predictions(double mask_prob, int seq_length) {
  return (int)((mask_prob + 0.005) * seq_length);  // Python's int(): truncation of a positive double
}

int electra_num_to_predict(int tokens, double mask_prob, int N) {
  // TF: tf.cast(num_tokens, tf.float32) * mask_prob (a float32 product), then tf.round (half to even).
  const float product = (float)tokens * (float)mask_prob;
  const int rounded = (int)std::nearbyint(product);  // the default rounding mode rounds half to even
  return std::max(1, std::min(N, rounded));
}

namespace {

void check_unit(double u, const char* what, int64_t i) {
  if (!(u >= 0.0 && u < 1.0))
    throw Error(std::string("ELECTRA masking: ") + what + "[" + std::to_string(i) + "] = " + std::to_string(u) +
                " is not a uniform draw in [0, 1)");
}

}  // namespace

ElectraMasked electra_mask(const int32_t* ids, const int32_t* input_mask, int B, int L, int N, double mask_prob,
                           const ElectraTokens& tokens, const double* pos_u, const double* keep_u) {
  ElectraMasked m;
  m.B = B, m.L = L, m.N = N;
  m.masked_ids.assign(ids, ids + (size_t)B * L);
  m.positions.assign((size_t)B * N, 0);
  m.labels.assign((size_t)B * N, 0);
  m.weights.assign((size_t)B * N, 0.0f);
  m.num.assign(B, 0);
  std::vector<int> candidates;
  for (int b = 0; b < B; b++) {
    const int32_t* row = ids + (size_t)b * L;
    const int32_t* real = input_mask + (size_t)b * L;
    candidates.clear();
    int count = 0;  // #tokens counts [CLS] and [SEP]
    for (int p = 0; p < L; p++) {
      if (real[p] == 0) continue;
      count++;
      if (row[p] != tokens.cls && row[p] != tokens.sep && row[p] != tokens.mask) candidates.push_back(p);
    }
    if (candidates.empty())
      throw Error("ELECTRA masking: row " + std::to_string(b) + " has no token to mask (only [CLS]/[SEP]/[MASK] or "
                  "padding)");
    const int num = electra_num_to_predict(count, mask_prob, N);
    m.num[b] = num;
    // tf.random.categorical over the normalised candidate mask: one position per slot, with replacement; the
    // inverse CDF of the uniform distribution over the C candidates is candidate ⌊u·C⌋.
    const double C = (double)candidates.size();
    for (int j = 0; j < N; j++) {
      const size_t s = (size_t)b * N + j;
      check_unit(pos_u[s], "pos_u", (int64_t)s);
      check_unit(keep_u[s], "keep_u", (int64_t)s);
      if (j >= num) continue;  // slots >= num: position 0, label 0, weight 0
      const int p = candidates[std::min((size_t)(pos_u[s] * C), candidates.size() - 1)];
      m.positions[s] = p;
      m.labels[s] = row[p];
      m.weights[s] = 1.0f;
      // scatter_update of [MASK] at the positions whose slot draws < 0.85 (the others go to position 0, which
      // scatter_update ignores): every update is [MASK], so a duplicated position is masked if any slot says so
      // (⌊c·[MASK] / c⌋ = [MASK]). Position 0 is [CLS], never a candidate.
      if (keep_u[s] < 0.85 && p != 0) m.masked_ids[(size_t)b * L + p] = tokens.mask;
    }
  }
  return m;
}

namespace {

// The reference's noise g(u) = −log(−log(u + 1e-9) + 1e-9), in double; nondecreasing in u.
inline double gumbel_noise(double u) { return -std::log(-std::log(u + 1e-9) + 1e-9); }

// How far below the needed noise a skipped draw's noise must lie: far above the rounding of g (a few ulps of values
// up to ~21) and of the sums z/T + g, so a skipped draw's x is below the row's best however those round.
constexpr double kSkipMargin = 1e-6;

// The largest uniform that certainly cannot win: every u < the result has g(u) < t − kSkipMargin/2, t = the noise a
// draw needs to beat the row's best with the row's largest scaled logit. From the inverse
// u = exp(−(exp(−t') − 1e-9)) − 1e-9 at t' = t − kSkipMargin, then checked through g itself, so what is skipped
// rests only on g's monotonicity, not on the inverse's accuracy. −1 (skip nothing) where t is not finite, the
// inverse leaves (0, 1) or the check fails.
double losing_uniform(double t) {
  if (!std::isfinite(t)) return -1.0;
  const double u = std::exp(-(std::exp(-(t - kSkipMargin)) - 1e-9)) - 1e-9;
  if (!(u > 0.0 && u < 1.0) || !(gumbel_noise(u) < t - 0.5 * kSkipMargin)) return -1.0;
  return u;
}

}  // namespace

std::vector<int32_t> electra_gumbel_sample(const float* logits, int64_t M, int64_t V, double temperature,
                                           const std::function<void(int64_t m, double* u)>& gumbel_row) {
  std::vector<int32_t> out((size_t)M);
  // One row of uniforms per thread, allocated here (an allocation failing inside the parallel region could not
  // throw out of it).
  const int threads = M > 1 ? std::max(1, omp_get_max_threads()) : 1;
  std::vector<double> rows((size_t)threads * (size_t)V);
  // Rows are independent: each thread takes whole rows, so the result is the same on any team.
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads) if (threads > 1)
  for (int64_t m = 0; m < M; m++) {
    const float* z = logits + m * V;
    double* u = rows.data() + (size_t)omp_get_thread_num() * (size_t)V;
    gumbel_row(m, u);
    // softmax is monotone, so argmax(softmax(z/T + g)) = argmax(z/T + g), the first maximum winning. A draw can win
    // only if z_v/T + g(u_v) > best, which needs g(u_v) > best − max_v z_v/T: draws below losing_uniform() of that
    // are skipped without their two logarithms (nearly all of a row once a good best is found: with V 30522 and
    // logits near each other the winner's noise is ~log V ≈ 10, so draws below ~1 − 5e-5 cannot win). The result
    // is the argmax over every draw, as computed before.
    double zmax = -INFINITY;
    for (int64_t v = 0; v < V; v++) zmax = std::max(zmax, (double)z[v] / temperature);
    double best = -INFINITY, skip_below = -1.0;
    int64_t arg = 0;
    for (int64_t v = 0; v < V; v++) {
      if (u[v] < skip_below) continue;
      const double x = (double)z[v] / temperature + gumbel_noise(u[v]);
      if (x > best) {
        best = x, arg = v;
        skip_below = losing_uniform(best - zmax);
      }
    }
    out[(size_t)m] = (int32_t)arg;
  }
  return out;
}

ElectraFake electra_fake_data(const int32_t* ids, int B, int L, int N, const int32_t* positions,
                              const int32_t* sampled) {
  ElectraFake f;
  f.ids.assign(ids, ids + (size_t)B * L);
  f.labels.assign((size_t)B * L, 0);
  for (int b = 0; b < B; b++) {
    // scatter_update: per position the sum of its updates and their count (position 0 ignored), then ⌊sum/count⌋.
    std::map<int, std::pair<int64_t, int64_t>> updates;
    for (int j = 0; j < N; j++) {
      const int p = positions[(size_t)b * N + j];
      if (p <= 0) continue;
      auto& [sum, count] = updates[p];
      sum += sampled[(size_t)b * N + j];
      count++;
    }
    for (const auto& [p, sc] : updates) {
      const size_t i = (size_t)b * L + p;
      f.ids[i] = (int32_t)(sc.first / sc.second);  // non-negative ids: integer division is the floor
      if (f.ids[i] != ids[i]) f.labels[i] = 1, f.replaced++;
    }
  }
  return f;
}

}  // namespace lmforge::model
