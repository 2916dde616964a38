// step_checks.hpp: the verdict on one training step's numbers, the same on every rank
// because it is computed from all-reduced values: a loss or a gradient that is not
// finite stops the run before the update (so nothing from that step is applied or
// saved), with one message naming the step and the unit.
// defines: train::nonfinite_message
#pragma once

#include <span>
#include <string>
#include <vector>

namespace train {

// rank_losses: each rank's summed micro-batch loss (index = rank); unit_sumsq: each
// unit's sum of squares over every rank's reduced gradient shard. Empty when all are
// finite, else e.g. "step 3: the gradient of unit mlp.0 is not finite after the
// reduce-scatter (sum of squares nan): the update is skipped and the run stops".
std::string nonfinite_message(int step, std::span<const double> rank_losses, std::span<const double> unit_sumsq,
                              const std::vector<std::string>& unit_names);

}  // namespace train
