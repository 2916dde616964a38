#pragma once
// defines: tagc::schedule_shape, tagc::sparsity_schedule, tagc::check_sparsity_schedule,
//          tagc::scheduled_sparsity — a warm-up of theta (the sparsity) from a denser
//          start to the reducer's target over its first calls.
//
// Why: error feedback at theta = 98.75 % holds back almost all of each step's gradient,
// and the delay costs most in the first steps, when the weights move fastest (DGC,
// Lin et al. 2018, warm up the sparsity exponentially: 75 %, 93.75 %, ... ; PowerSGD's
// start_powerSGD_iter sends dense first). The schedule works on the density d = 1 - theta:
//
//   exponential (DGC):  d(s) = d0 * (dT / d0)^(s / W)      geometric: each step the same factor
//   linear:             d(s) = d0 + (dT - d0) * s / W       (theta linear in s as well)
//
// for calls s = 0 .. W-1 (s = the reducer's successful calls so far, Reducer::steps(), which
// save_state keeps: a resumed run continues the ramp exactly); from s = W on, theta is the
// target itself. The function is pure (no state, no clock): every rank computes the same
// theta from the same s.
//
// With adaptive theta the reducer's own theta (the "base", steered by the sketch loads)
// moves away from the configured target; the schedule then scales the base's density by
// the ramp's factor: d = d(s) * (1 - base) / dT. Adaptive's update d_base *= f is therefore
// a factor relative to the schedule, and the factor lives in the saved theta itself (no
// extra state). Without adaptive, base == target and the factor is exactly 1.
//
// Bytes: a sketch sends the same cells whatever theta is (only how many entries it can
// resolve changes: a start much denser than the sketch's capacity leaves entries unresolved
// for the residual), a packed exchange sends the union of the kept entries, so a dense
// start costs packed values bytes during the warm-up and nothing after it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../core/status.hpp"

TAGC_BEGIN_NAMESPACE

enum class schedule_shape { exponential, linear };

struct sparsity_schedule {
  std::uint64_t warmup_steps = 0;  // W; 0: no schedule (theta is the target from the first call)
  double start = 0.75;             // theta of the first call (0: dense); DGC's first warm-up epoch
  schedule_shape shape = schedule_shape::exponential;
  bool enabled() const { return warmup_steps > 0; }
  friend bool operator==(const sparsity_schedule&, const sparsity_schedule&) = default;
};

// `target` is the reducer's configured theta (after defaults). A disabled schedule is
// always accepted, whatever its other fields hold.
inline status check_sparsity_schedule(const sparsity_schedule& s, double target) {
  if (!s.enabled()) return {};
  if (s.shape != schedule_shape::exponential && s.shape != schedule_shape::linear)
    return {errc::invalid_argument, "sparsity schedule shape " + std::to_string(int(s.shape)) +
                                        " is neither exponential nor linear"};
  if (!(s.start >= 0.0 && s.start < 1.0))
    return {errc::invalid_argument, "sparsity schedule start " + std::to_string(s.start) + " outside [0, 1)"};
  if (!(target < 1.0))
    return {errc::invalid_argument, "a sparsity schedule needs a target below 1 (it ramps the density 1 - theta, "
                                    "and the target's is 0); target is " + std::to_string(target)};
  if (s.start > target)
    return {errc::invalid_argument, "sparsity schedule start " + std::to_string(s.start) +
                                        " is above the target " + std::to_string(target) +
                                        " (a warm-up starts denser, i.e. lower)"};
  return {};
}

// Theta of call `step` (0-based). `base` is the reducer's current theta (== target unless
// adaptive theta or set_sparsity moved it). Exact: from step W on it returns `base` itself,
// and without adaptive the ramp's density is not rescaled.
inline double scheduled_sparsity(const sparsity_schedule& s, double target, double base, std::uint64_t step) {
  if (!s.enabled() || step >= s.warmup_steps) return base;
  const double x = double(step) / double(s.warmup_steps);
  const double d0 = 1.0 - s.start, dT = 1.0 - target;
  double d = s.shape == schedule_shape::linear ? d0 + (dT - d0) * x : d0 * std::pow(dT / d0, x);
  if (base != target) d *= (1.0 - base) / dT;  // adaptive: keep its factor relative to the ramp
  return std::clamp(1.0 - d, 0.0, 1.0);
}

TAGC_END_NAMESPACE
