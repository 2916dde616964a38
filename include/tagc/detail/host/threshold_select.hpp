#pragma once
// defines: tagc::detail::host::threshold_select<Residual> — the threshold select
//          and this rank's index marks on the host (exec::host), the portable
//          select's results bit for bit (tests/test_paths.cpp):
//   begin   pass 0 writes acc = g + residual once (the later stages read it
//           instead of recomputing it), counts NaN/Inf and max |acc|; with the
//           call's theta known already (no adaptive theta), the same pass marks
//           the index against a sampled bracket (threshold_marker.hpp)
//   select  finishes the search (the exact threshold among the bracket's
//           entries) or, theta known only now, brackets and marks over acc
//   mark    lists the kept entries (positions and acc values, ascending) from
//           what the marking passes staged, for the sketch and the residual
//           commit (at most length / 4 of them: theta >= 0.75; else not listed)

#include <cstddef>
#include <cstdint>

#include "../../core/status.hpp"
#include "../../exec/host.hpp"
#include "../../shard/layout.hpp"
#include "../host_compress.hpp"
#include "../launch.hpp"
#include "../compress_handoff.hpp"
#include "../select_kernels.hpp"
#include "threshold_marker.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

template <class Residual>
class threshold_select {
 public:
  template <class T> using vector = exec::host::vector<T>;
  static std::size_t kept_capacity(std::size_t n) { return n / 4 + 1; }

  template <class Exec>
  status initialize(const layout& l, const Exec&) {
    n_ = l.length;
    hist_.assign(std::size_t(hist_copies) * hist_bins, 0u);
    marker_.initialize(l);
    kept_.assign(kept_capacity(l.length), 0u);
    kept_values_.assign(kept_.size(), 0.0f);
    return {};
  }
  // What initialize allocates, before it does (the reducers' workspace query).
  static std::size_t workspace_bytes_for(const layout& l) {
    return std::size_t(hist_copies) * hist_bins * sizeof(std::uint32_t) + threshold_marker::workspace_bytes_for(l) +
           kept_capacity(l.length) * (sizeof(std::uint32_t) + sizeof(float));
  }
  std::size_t workspace_bytes() const {
    return buffer_bytes(hist_) + marker_.workspace_bytes() + buffer_bytes(kept_) + buffer_bytes(kept_values_);
  }

  // Pass 0 (acc, NaN/Inf, top bin into *st); with `target` != 0 (the search's rank,
  // known before the agreement check) also the marking pass into `marks`. Nothing
  // here is visible state: acc and the marks are workspace, so a call refused by
  // the check leaves everything as it was.
  void begin(const select_inputs<Residual>& in, select_state* st, bool sizes_ok, bool want_top_bin,
             std::uint32_t target, std::uint8_t* marks) {
    marker_.stage_kept(stage());
    fused_target_ = 0;
    acc_ = in.acc;
    if (!sizes_ok) return;
    const bool fused = marker_.fusable(target);
    const host_pass0 p0 = fused ? marker_.begin_fused(in.grad, in.residual, in.acc, target, marks, want_top_bin)
                                : host_accumulate(in.grad, in.residual, in.acc, n_);
    if (fused) fused_target_ = target;
    st->nonfinite = p0.nonfinite;
    if (want_top_bin) st->top_bin = p0.top_bin;
  }

  // The threshold (the `target`-th largest |acc|; target 0: `fixed`) into *st,
  // `marks` completed against it.
  void select(const select_inputs<Residual>& in, select_state* st, std::uint32_t target, std::uint32_t fixed,
              std::uint8_t* marks) {
    marker_.stage_kept(stage());
    const std::uint32_t t = target != 0 && target == fused_target_
                                ? marker_.finish(in.acc, target, marks, raw(hist_))
                                : marker_.run(in.acc, target, fixed, marks, raw(hist_));
    st->prefix = t;
    st->remaining = 0;
    st->threshold = t;
  }

  // The kept count into *kept, and the kept entries listed (from the stage, or
  // from the marks when a chunk's entries did not fit its region).
  void mark(const select_inputs<Residual>& in, const select_state*, std::uint8_t* marks, unsigned long long* kept) {
    *kept = marker_.kept();
    listed_ = marker_.list(marks, raw(kept_), kept_.size(), in.acc, raw(kept_values_));
    kept_count_ = listed_ ? std::size_t(*kept) : 0;
  }

  kept_entries kept() const { return {acc_, raw(kept_), raw(kept_values_), kept_count_, listed_}; }

 private:
  // Where the marking passes stage what they find: the kept list, in regions per chunk.
  kept_stage stage() { return {raw(kept_), raw(kept_values_), kept_.size()}; }

  std::size_t n_ = 0;
  vector<std::uint32_t> hist_;  // the exact select's histograms, for a bracket that misses
  threshold_marker marker_;     // bracket select + index marks
  vector<std::uint32_t> kept_;  // kept positions, ascending
  vector<float> kept_values_;   // acc at the kept positions
  std::size_t kept_count_ = 0;
  bool listed_ = false;
  const float* acc_ = nullptr;       // this call's acc (the residual stage's buffer)
  std::uint32_t fused_target_ = 0;   // the search pass 0 marked for (0: none)
};

}  // namespace detail::host
TAGC_END_NAMESPACE
