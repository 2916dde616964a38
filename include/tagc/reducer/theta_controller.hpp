#pragma once
// defines: tagc::theta_controller — a reducer's sparsity theta: the value a run sets
//          (initialize, set_sparsity, a loaded state), the sparsity schedule's ramp
//          towards it over the first calls, and adaptive theta, which steers it by the
//          sketch loads every rank published after the previous call.
//
// Adaptive theta's feedback (the largest decode load and the unresolved entries, agreed
// across ranks by the agreement check) is kept here too: it is part of what a resumed run
// needs to take the same theta at its next call (the state codec saves it).

#include <algorithm>
#include <cstdint>
#include <string>

#include "../core/status.hpp"
#include "../policy/sparsity_schedule.hpp"
#include "../reducer_arguments.hpp"

TAGC_BEGIN_NAMESPACE

class theta_controller {
 public:
  // Adaptive theta's inputs, as the previous call left them.
  struct feedback {
    std::int64_t load_ppm = 0;    // the largest decode load of the last call, in parts per million
    std::int64_t unresolved = 0;  // entries the owners could not resolve in the last call
  };

  // The theta a reducer starts from: the arguments' own, or `fallback` (the paper's
  // pairing for the reducer's sketch ratio) when they leave it unset (< 0).
  static double configured(const reducer_arguments& a, double fallback) { return a.sparsity >= 0.0 ? a.sparsity : fallback; }
  // The schedule, checked against the theta it ramps towards.
  static status can_implement(const reducer_arguments& a, double fallback) {
    return check_sparsity_schedule(a.schedule, configured(a, fallback));
  }
  static status check(double theta) {
    if (!(theta >= 0.0 && theta <= 1.0))
      return {errc::invalid_argument, "sparsity " + std::to_string(theta) + " outside [0, 1]"};
    return {};
  }

  void initialize(const reducer_arguments& a, double fallback) {
    schedule_ = a.schedule;
    adapt_ = a.adapt;
    theta_ = configured(a, fallback);
    if (adapt_.enabled) theta_ = std::clamp(theta_, adapt_.min_sparsity, adapt_.max_sparsity);
    target_ = theta_;  // the ramp's end (adaptive steers a factor around it)
    feedback_ = {};
  }

  // The theta set (by initialize, set_sparsity, adaptive theta or a loaded state).
  double sparsity() const { return theta_; }
  void set(double theta) { theta_ = theta; }
  // Theta of call `step` (0-based): sparsity() on the schedule's ramp.
  double at(std::uint64_t step) const { return scheduled_sparsity(schedule_, target_, theta_, step); }
  bool adaptive() const { return adapt_.enabled; }

  // Density d = 1 - theta scales the union load roughly linearly: aim the largest
  // load at the target, at most halving or doubling d per step, and cut harder
  // while anything went unresolved.
  void adapt(double max_load, std::int64_t unresolved) {
    if (max_load <= 0.0) return;  // nothing measured yet
    double d = 1.0 - theta_;
    double f = std::clamp(adapt_.target_load / max_load, 0.5, 2.0);
    if (unresolved > 0) f = std::min(f, 0.7);
    d = std::max(d * f, 1e-7);
    theta_ = std::clamp(1.0 - d, adapt_.min_sparsity, adapt_.max_sparsity);
  }

  const feedback& last() const { return feedback_; }
  void record(const feedback& f) { feedback_ = f; }

 private:
  sparsity_schedule schedule_{};
  adaptive_sparsity adapt_{};
  double theta_ = 0.0, target_ = 0.0;
  feedback feedback_{};
};

TAGC_END_NAMESPACE
