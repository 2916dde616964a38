#pragma once
// defines: tagc::stage::ThresholdSelect<Residual, Exec> — the threshold stage:
//          theta -> the exact (k+1)-th largest |g + residual|, this rank's index
//          marks (one counter per element, policy/index.hpp) of the entries above
//          it, the NaN/Inf count and the top histogram bin the agreement check
//          publishes, and the call's counters. What it found goes to the later
//          stages as one hand-off, selection() (plan.hpp).
//
// A call runs begin() (pass 0, before the agreement check: the NaN/Inf count and
// max |acc| for the fp16 scale), select() once every rank agreed, then mark().
// The execution space's own implementation does the work (detail/compress_dispatch.hpp):
// the radix select's launches (the threshold never leaves the space's memory), or
// on the host acc written once, a sampled bracket and the marks in the same pass,
// and the kept entries listed.

#include <cmath>
#include <cstdint>
#include <string>

#include "../core/bits.hpp"
#include "../core/status.hpp"
#include "../detail/launch.hpp"
#include "../detail/compress_dispatch.hpp"
#include "../detail/select_kernels.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class Residual, class Exec>
class ThresholdSelect {
 public:
  static constexpr std::size_t n_counters = 3;  // kept, deferred, retransmitted

  static status can_implement(const reducer_arguments& a) {
    if (a.sparsity > 1.0 || (a.sparsity >= 0.0 && std::isnan(a.sparsity)))
      return {errc::invalid_argument, "sparsity " + std::to_string(a.sparsity) + " outside [0, 1]"};
    return {};
  }

  status initialize(const reducer_plan& p, Exec exec) {
    launch_ = {exec};
    n_ = p.lay.length;
    state_.resize(1);
    counters_.assign(n_counters, 0ull);
    marks_.assign(p.lay.index_bytes * std::size_t(p.shards), 0);
    return impl_.initialize(p.lay, exec);
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(state_) + detail::buffer_bytes(counters_) + detail::buffer_bytes(marks_) +
           impl_.workspace_bytes();
  }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    return sizeof(detail::select_state) + n_counters * sizeof(unsigned long long) +
           p.lay.index_bytes * std::size_t(p.shards) + detail::select_impl_t<Residual, Exec>::workspace_bytes_for(p.lay);
  }

  // Reset the state and counters; pass 0 (NaN/Inf count, and the top bin when
  // fp16 needs it) when the sizes are right. `theta_early` >= 0: the call's theta
  // is known before the agreement check (no adaptive theta), so the host marks
  // the index in pass 0 already and select() only finishes the search.
  void begin(const detail::select_inputs<Residual>& in, bool sizes_ok, bool want_top_bin, double theta_early = -1.0) {
    in_ = in;
    launch_(1, detail::init_select{state(), counters(), n_counters, 0u, 0u});
    impl_.begin(in_, state(), sizes_ok, want_top_bin, theta_early >= 0.0 ? search_target(theta_early) : 0u,
                detail::raw(marks_));
  }

  // Threshold for theta: the (k+1)-th largest |acc|, k = most entries that may be
  // kept (k = 0 keeps nothing, k = n every nonzero).
  void select(double theta) {
    const std::uint32_t fixed = kept_at_most(theta, n_) == 0 ? inf_bits : 0u;
    impl_.select(in_, state(), search_target(theta), fixed, detail::raw(marks_));
  }

  // This rank's marks of the entries above the threshold, counted (counters()[0]).
  void mark() { impl_.mark(in_, state(), detail::raw(marks_), counters() + 0); }

  // What the later stages read: the threshold, the counters, the marks and (host) the kept entries.
  selection handoff() { return {state(), counters(), detail::raw(marks_), impl_.kept()}; }

  // This rank's marks, [shards][index_bytes] (in the space's memory): tests compare paths with them.
  const std::uint8_t* marks() const { return detail::raw(marks_); }
  std::size_t marks_bytes() const { return marks_.size(); }

  status read_state(detail::select_state& h) const { return launch_.exec.copy_to_host(detail::raw(state_), &h, 1); }
  status read_counters(unsigned long long* c) const {
    return launch_.exec.copy_to_host(detail::raw(counters_), c, n_counters);
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
  detail::select_state* state() { return detail::raw(state_); }
  unsigned long long* counters() { return detail::raw(counters_); }

  detail::launcher<Exec> launch_{};
  std::size_t n_ = 0;
  typename Exec::template vector<detail::select_state> state_;
  typename Exec::template vector<unsigned long long> counters_;
  typename Exec::template vector<std::uint8_t> marks_;  // [shards][index_bytes] this rank's marks
  detail::select_impl_t<Residual, Exec> impl_{};
  detail::select_inputs<Residual> in_{};  // this call's (set by begin())
};

}  // namespace stage
TAGC_END_NAMESPACE
