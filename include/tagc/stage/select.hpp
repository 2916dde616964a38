#pragma once
// defines: tagc::stage::ThresholdSelect<Residual, Exec> — the threshold stage:
//          theta -> the exact (k+1)-th largest |g + residual| (radix select,
//          detail/select_kernels.hpp), plus the NaN/Inf count and the top
//          histogram bin the agreement check publishes, and the call's counters.
//
// begin() runs pass 0 before the agreement check (its histogram counts the
// non-finite entries and gives max |acc| for the fp16 scale); select() finishes
// the search once every rank agreed. The threshold never leaves the execution
// space's memory (no host round trip per pass).

#include <cmath>
#include <cstdint>
#include <string>

#include <thrust/fill.h>

#include "../core/status.hpp"
#include "../detail/launch.hpp"
#include "../detail/select_kernels.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class Residual, class Exec>
class ThresholdSelect {
 public:
  template <class T> using vector = typename Exec::template vector<T>;
  static constexpr std::size_t n_counters = 3;  // kept, deferred, retransmitted

  static status can_implement(const reducer_arguments& a) {
    if (a.sparsity > 1.0 || (a.sparsity >= 0.0 && std::isnan(a.sparsity)))
      return {errc::invalid_argument, "sparsity " + std::to_string(a.sparsity) + " outside [0, 1]"};
    return {};
  }

  status initialize(const reducer_plan& p, Exec exec) {
    launch_ = {exec};
    n_ = p.lay.length;
    hist_.assign(std::size_t(detail::hist_copies) * detail::hist_bins, 0u);
    state_.resize(1);
    counters_.assign(n_counters, 0ull);
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(hist_) + detail::buffer_bytes(state_) + detail::buffer_bytes(counters_);
  }

  detail::select_state* state() { return detail::raw(state_); }
  unsigned long long* counters() { return detail::raw(counters_); }

  // Reset the state and counters; pass 0 (NaN/Inf count, histogram) when the
  // sizes are right; the top bin when fp16 needs it.
  // The histogram starts clean every call: a call refused after its first pass (the
  // agreement check, or a failed collective) leaves counts behind, which would skew the
  // next call's threshold and fp16 scale (NaN/Inf bins).
  void begin(const float* g, const Residual* r, bool sizes_ok, bool want_top_bin) {
    thrust::fill(launch_.exec.policy(), hist_.begin(), hist_.end(), 0u);
    launch_(1, detail::init_select{state(), counters(), n_counters, 0u, 0u});
    if (!sizes_ok) return;
    launch_(n_, detail::histogram_pass<Residual>{g, r, detail::raw(hist_), state(), 0});
    if (want_top_bin) launch_(1, detail::find_top_bin{detail::raw(hist_), state()});
  }

  status read_state(detail::select_state& h) const { return launch_.exec.copy_to_host(detail::raw(state_), &h, 1); }
  status read_counters(unsigned long long* c) const {
    return launch_.exec.copy_to_host(detail::raw(counters_), c, n_counters);
  }

  // Threshold for theta: the (k+1)-th largest |acc|, k = most entries that may be kept.
  void select(const float* g, const Residual* r, double theta) {
    const std::size_t k = kept_at_most(theta, n_);
    if (k == 0 || k >= n_) {
      launch_(1, detail::fix_threshold{state(), k == 0 ? inf_bits : 0u});  // keep nothing / every nonzero
      return;
    }
    launch_(1, detail::start_select{state(), std::uint32_t(k + 1)});
    for (int pass = 0; pass < detail::select_passes; ++pass) {
      if (pass > 0) launch_(n_, detail::histogram_pass<Residual>{g, r, detail::raw(hist_), state(), pass});
      launch_(1, detail::select_digit{detail::raw(hist_), state(), pass});
    }
  }

  // k = floor((1 - theta) n).
  static std::size_t kept_at_most(double theta, std::size_t n) {
    return static_cast<std::size_t>(std::floor((1.0 - theta) * double(n)));
  }

 private:
  detail::launcher<Exec> launch_{};
  std::size_t n_ = 0;
  vector<std::uint32_t> hist_;  // radix-select histograms
  vector<detail::select_state> state_;
  vector<unsigned long long> counters_;
};

}  // namespace stage
TAGC_END_NAMESPACE
