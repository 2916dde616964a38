// divergence_guard.hpp: the rule under which a step is unhealthy — a run that goes bad
// slowly (a learning rate far too high: parameters finite but absurd, the loss climbing)
// must not keep saving and prune its good steps. A step is unhealthy when
//   - its loss exceeds --guard-loss-spike (2) x the best healthy loss so far, or
//   - its gradient norm exceeds --guard-grad-spike (100) x the mean of the healthy
//     steps' norms (after 5 of them), or
//   - (at a save, checkpoint_store.cpp) a parameter exceeds --guard-param-max (1e3).
// Non-finite values stop the run before this (step_checks.hpp). The loss and the norm
// are the same on every rank (all-reduced), so every rank reaches the same verdict
// without another collective. An unhealthy step is not saved; with --guard-rewind N the
// run reloads the last healthy checkpoint instead of going on (at most N times).
// Reference values start empty on every run (a resumed run re-learns them).
// defines: train::DivergenceGuard
#pragma once

#include "args.hpp"

#include <string>

namespace train {

class DivergenceGuard {
 public:
  explicit DivergenceGuard(const Args& a) : loss_spike_(a.guard_loss_spike), grad_spike_(a.guard_grad_spike) {}
  // "" if the step is healthy (and then it updates the references), else why not.
  std::string judge(int step, double loss, double grad_norm);

 private:
  double loss_spike_, grad_spike_;
  double best_loss_ = 0.0;
  double norm_sum_ = 0.0;
  int healthy_ = 0;
};

}  // namespace train
