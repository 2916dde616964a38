// step_checks.cpp: see step_checks.hpp.
// defines: train::nonfinite_message
#include "step_checks.hpp"

#include <cmath>
#include <cstdio>

namespace train {

namespace {
std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}
}  // namespace

std::string nonfinite_message(int step, std::span<const double> rank_losses, std::span<const double> unit_sumsq,
                              const std::vector<std::string>& unit_names) {
  const std::string tail = ": the update is skipped, nothing of this step is saved, and the run stops";
  std::string ranks, value;
  for (size_t r = 0; r < rank_losses.size(); ++r)
    if (!std::isfinite(rank_losses[r])) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      if (value.empty()) value = num(rank_losses[r]);
    }
  // The loss first: a non-finite loss makes every gradient non-finite.
  if (!ranks.empty())
    return "step " + std::to_string(step) + ": the loss is not finite on rank(s) " + ranks + " (" + value + ")" + tail;
  std::string units;
  for (size_t u = 0; u < unit_sumsq.size(); ++u)
    if (!std::isfinite(unit_sumsq[u])) {
      units += (units.empty() ? "" : ", ") + (u < unit_names.size() ? unit_names[u] : std::to_string(u));
      if (value.empty()) value = num(unit_sumsq[u]);
    }
  if (!units.empty())
    return "step " + std::to_string(step) + ": the gradient of unit(s) " + units +
           " is not finite after the reduce-scatter (sum of squares " + value + "; the global norm with it)" + tail;
  return {};
}

}  // namespace train
