// divergence_guard.cpp: see divergence_guard.hpp.
// defines: train::DivergenceGuard::judge
#include "divergence_guard.hpp"

#include <algorithm>
#include <cstdio>

namespace train {

std::string DivergenceGuard::judge(int step, double loss, double grad_norm) {
  char b[200];
  if (loss_spike_ > 0 && healthy_ > 0 && loss > loss_spike_ * best_loss_) {
    std::snprintf(b, sizeof b, "step %d: loss %.4g is above --guard-loss-spike %g x the best healthy loss %.4g", step,
                  loss, loss_spike_, best_loss_);
    return b;
  }
  constexpr int norm_warmup = 5;  // the first norms of a run are large and falling
  if (grad_spike_ > 0 && healthy_ >= norm_warmup && grad_norm > grad_spike_ * (norm_sum_ / healthy_)) {
    std::snprintf(b, sizeof b, "step %d: gradient norm %.4g is above --guard-grad-spike %g x its mean %.4g", step,
                  grad_norm, grad_spike_, norm_sum_ / healthy_);
    return b;
  }
  best_loss_ = healthy_ == 0 ? loss : std::min(best_loss_, loss);
  norm_sum_ += grad_norm;
  ++healthy_;
  return "";
}

}  // namespace train
