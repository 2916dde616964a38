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
// Host paths: pass 0 writes acc = g + residual (no histogram); select() brackets
// the threshold from a sample of acc and marks this rank's index in the same pass
// (detail/host/select_marks.hpp); the index stage then only lists the kept entries.

#include <cmath>
#include <cstdint>
#include <string>

#include <thrust/fill.h>

#include "../core/status.hpp"
#include "../detail/host/select_marks.hpp"
#include "../detail/host_compress.hpp"
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
  static constexpr bool host_paths = detail::uses_host_paths<Exec>;

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
    if constexpr (host_paths) marker_.initialize(p.lay);
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(hist_) + detail::buffer_bytes(state_) + detail::buffer_bytes(counters_) +
           marker_.workspace_bytes();
  }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    std::size_t b = std::size_t(detail::hist_copies) * detail::hist_bins * sizeof(std::uint32_t) +
                    sizeof(detail::select_state) + n_counters * sizeof(unsigned long long);
    if constexpr (host_paths) b += detail::host::threshold_marker::workspace_bytes_for(p.lay);
    return b;
  }

  detail::select_state* state() { return detail::raw(state_); }
  unsigned long long* counters() { return detail::raw(counters_); }

  // Reset the state and counters; pass 0 (NaN/Inf count, histogram) when the
  // sizes are right; the top bin when fp16 needs it.
  // The histogram starts clean every call: a call refused after its first pass (the
  // agreement check, or a failed collective) leaves counts behind, which would skew the
  // next call's threshold and fp16 scale (NaN/Inf bins).
  // Host paths: pass 0 also writes acc = g + residual (`acc`), which the later
  // stages read instead of recomputing it.
  // Host paths: with the call's theta known already (`theta_early` >= 0: no
  // adaptive theta), pass 0 also marks the index (`index`) against a sampled
  // bracket, and select() only finishes the search. The marking passes stage the
  // kept entries into `kept` (the index stage's list), which it then only filters.
  void begin(const float* g, const Residual* r, float* acc, bool sizes_ok, bool want_top_bin,
             double theta_early = -1.0, std::uint8_t* index = nullptr, detail::host::kept_stage kept = {}) {
    if constexpr (host_paths) {
      launch_(1, detail::init_select{state(), counters(), n_counters, 0u, 0u});
      marker_.stage_kept(kept);
      fused_target_ = 0;
      if (!sizes_ok) return;
      const std::uint32_t target = index && theta_early >= 0.0 ? search_target(theta_early) : 0u;
      const bool fused = marker_.fusable(target);
      const detail::host_pass0 p0 =
          fused ? marker_.begin_fused(g, r, acc, target, index, want_top_bin) : detail::host_accumulate(g, r, acc, n_);
      if (fused) fused_target_ = target;
      state()->nonfinite = p0.nonfinite;
      if (want_top_bin) state()->top_bin = p0.top_bin;
      return;
    }
    (void)acc;
    (void)kept;
    thrust::fill(launch_.exec.policy(), hist_.begin(), hist_.end(), 0u);
    launch_(1, detail::init_select{state(), counters(), n_counters, 0u, 0u});
    if (!sizes_ok) return;
    launch_(n_, detail::histogram_pass<Residual>{g, r, detail::raw(hist_), state(), 0});
    if (want_top_bin) launch_(1, detail::find_top_bin{detail::raw(hist_), state()});
  }

  // Host paths: what select() marked (kept counts, the kept list).
  detail::host::threshold_marker* marker() { return host_paths ? &marker_ : nullptr; }

  status read_state(detail::select_state& h) const { return launch_.exec.copy_to_host(detail::raw(state_), &h, 1); }
  status read_counters(unsigned long long* c) const {
    return launch_.exec.copy_to_host(detail::raw(counters_), c, n_counters);
  }

  // Threshold for theta: the (k+1)-th largest |acc|, k = most entries that may be kept.
  // Host paths: also marks this rank's index [shards][index_bytes] (`index`) in the
  // same pass; marker() then lists the kept entries for the index stage.
  void select(const float* g, const Residual* r, const float* acc, double theta, std::uint8_t* index,
              detail::host::kept_stage kept = {}) {
    const std::size_t k = kept_at_most(theta, n_);
    const std::uint32_t fixed = k == 0 ? inf_bits : 0u;  // keep nothing / every nonzero
    if constexpr (host_paths) {
      marker_.stage_kept(kept);
      const std::uint32_t target = search_target(theta);
      const std::uint32_t t = target != 0 && target == fused_target_
                                  ? marker_.finish(acc, target, index, detail::raw(hist_))
                                  : marker_.run(acc, target, fixed, index, detail::raw(hist_));
      state()->prefix = t;
      state()->remaining = 0;
      state()->threshold = t;
      return;
    }
    (void)index;
    (void)kept;
    if (k == 0 || k >= n_) {
      launch_(1, detail::fix_threshold{state(), fixed});
      return;
    }
    (void)acc;
    launch_(1, detail::start_select{state(), std::uint32_t(k + 1)});
    for (int pass = 0; pass < detail::select_passes; ++pass) {
      if (pass > 0) launch_(n_, detail::histogram_pass<Residual>{g, r, detail::raw(hist_), state(), pass});
      launch_(1, detail::select_digit{detail::raw(hist_), state(), pass});
    }
  }

  // The rank the threshold search looks for, k + 1, or 0 when theta needs no search.
  std::uint32_t search_target(double theta) const {
    const std::size_t k = kept_at_most(theta, n_);
    return k != 0 && k < n_ ? std::uint32_t(k + 1) : 0u;
  }

  // k = floor((1 - theta) n), for theta in [0, 1] (anything else is clamped
  // there, NaN keeps nothing: the conversion never sees a value out of range).
  static std::size_t kept_at_most(double theta, std::size_t n) {
    if (!(theta >= 0.0)) theta = theta < 0.0 ? 0.0 : 1.0;
    if (theta > 1.0) theta = 1.0;
    const double k = std::floor((1.0 - theta) * double(n));
    return k <= 0.0 ? 0 : k >= double(n) ? n : static_cast<std::size_t>(k);
  }

 private:
  detail::launcher<Exec> launch_{};
  std::size_t n_ = 0;
  vector<std::uint32_t> hist_;  // radix-select histograms
  vector<detail::select_state> state_;
  vector<unsigned long long> counters_;
  detail::host::threshold_marker marker_;  // host paths: bracket select + index marks
  std::uint32_t fused_target_ = 0;         // host paths: the search pass 0 marked for (0: none)
};

}  // namespace stage
TAGC_END_NAMESPACE
