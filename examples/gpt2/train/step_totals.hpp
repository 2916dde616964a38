// step_totals.hpp: what one training step sums over ranks, by name. Every rank fills its
// own figures, one all-reduce (of flatten()) sums them, and every rank reads the same
// totals back (unflatten): the norm, the loss, the decode statistics, the non-finite
// verdict (step_checks.hpp) and a stop request are then one agreed decision.
// defines: train::StepTotals
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace train {

struct StepTotals {
  double grad_sq = 0.0;  // sum of squares of the owned gradient shards: the global norm
  double loss = 0.0;     // summed micro-batch losses: the mean loss
  // Decode statistics over the compressed segments: support, sketch cells (support /
  // load per segment), entries peeling left unresolved, entries carried to a later step
  double support = 0.0, cells = 0.0, unresolved = 0.0, pending = 0.0;
  std::vector<double> unit_grad_sq;  // per unit: which unit's gradient is not finite
  std::vector<double> rank_loss;     // per rank, each rank fills its own: which rank's loss
  // per rank, each its own: gradient bytes sent to other nodes (a routed index loads the
  // owner of a hot shard: rank 0's figure alone is not the mean rank's)
  std::vector<double> rank_internode;
  double stop = 0.0;                 // > 0: SIGTERM/SIGINT reached some rank (stop_signal.hpp)

  StepTotals(size_t units, size_t ranks) : unit_grad_sq(units, 0.0), rank_loss(ranks, 0.0), rank_internode(ranks, 0.0) {}

  // The one place that knows the order of the all-reduced values.
  std::vector<double> flatten() const {
    std::vector<double> v = {grad_sq, loss, support, cells, unresolved, pending};
    v.insert(v.end(), unit_grad_sq.begin(), unit_grad_sq.end());
    v.insert(v.end(), rank_loss.begin(), rank_loss.end());
    v.insert(v.end(), rank_internode.begin(), rank_internode.end());
    v.push_back(stop);
    return v;
  }
  void unflatten(std::span<const double> v) {
    if (v.size() != 7 + unit_grad_sq.size() + rank_loss.size() + rank_internode.size())
      throw std::logic_error("StepTotals::unflatten: " + std::to_string(v.size()) + " values for " +
                             std::to_string(unit_grad_sq.size()) + " units and " + std::to_string(rank_loss.size()) +
                             " ranks");
    const double* p = v.data();
    for (double* x : {&grad_sq, &loss, &support, &cells, &unresolved, &pending}) *x = *p++;
    for (double& x : unit_grad_sq) x = *p++;
    for (double& x : rank_loss) x = *p++;
    for (double& x : rank_internode) x = *p++;
    stop = *p;
  }
};

}  // namespace train
