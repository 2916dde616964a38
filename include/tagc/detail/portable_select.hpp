#pragma once
// defines: tagc::detail::portable_select<Residual, Exec> — the threshold select
//          and this rank's index marks as bulk launches of the single-source
//          functors (detail/select_kernels.hpp, detail/index_kernels.hpp): what a
//          GPU runs, and exec::host_portable on a CPU.
//
// A three-pass radix select over the |g + residual| bit patterns: pass 0 (begin)
// counts NaN/Inf and the top digits before the agreement check; select() finishes
// the search with the threshold in the space's memory (no host round trip per
// pass); mark() writes the counters of the entries above it.

#include <cstddef>
#include <cstdint>

#include <thrust/fill.h>

#include "../core/bits.hpp"
#include "../core/status.hpp"
#include "../shard/layout.hpp"
#include "index_kernels.hpp"
#include "launch.hpp"
#include "compress_handoff.hpp"
#include "select_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

template <class Residual, class Exec>
class portable_select {
 public:
  status initialize(const layout& l, Exec exec) {
    launch_ = {exec};
    lay_ = l;
    marks_bytes_ = l.index_bytes * std::size_t(l.shards);
    hist_.assign(std::size_t(hist_copies) * hist_bins, 0u);
    return {};
  }
  std::size_t workspace_bytes() const { return buffer_bytes(hist_); }
  // What initialize allocates, before it does (the reducers' workspace query).
  static std::size_t workspace_bytes_for(const layout&) {
    return std::size_t(hist_copies) * hist_bins * sizeof(std::uint32_t);
  }

  // Pass 0: the histogram of the top digit (NaN/Inf land in its last bins: their
  // count goes to st->nonfinite), and the top bin when the fp16 scale needs it. The
  // histogram starts clean every call: a call refused after pass 0 leaves counts
  // behind, which would skew the next call's threshold and fp16 scale. The search's
  // rank is not needed yet (the host implementation marks early with it).
  void begin(const select_inputs<Residual>& in, select_state* st, bool sizes_ok, bool want_top_bin, std::uint32_t,
             std::uint8_t*) {
    thrust::fill(launch_.exec.policy(), hist_.begin(), hist_.end(), 0u);
    if (!sizes_ok) return;
    launch_(lay_.length, histogram_pass<Residual>{in.grad, in.residual, raw(hist_), st, 0});
    if (want_top_bin) launch_(1, find_top_bin{raw(hist_), st});
  }

  // The `target`-th largest |acc| (1-based) as the threshold; target 0: `fixed` is.
  void select(const select_inputs<Residual>& in, select_state* st, std::uint32_t target, std::uint32_t fixed,
              std::uint8_t*) {
    if (target == 0) {
      launch_(1, fix_threshold{st, fixed});
      return;
    }
    launch_(1, start_select{st, target});
    for (int pass = 0; pass < select_passes; ++pass) {
      if (pass > 0) launch_(lay_.length, histogram_pass<Residual>{in.grad, in.residual, raw(hist_), st, pass});
      launch_(1, select_digit{raw(hist_), st, pass});
    }
  }

  // This rank's marks [shards][index_bytes] (counter 1 where |acc| is above the
  // threshold), the kept entries counted into *kept.
  void mark(const select_inputs<Residual>& in, const select_state* st, std::uint8_t* marks, unsigned long long* kept) {
    launch_(marks_bytes_, build_index<Residual>{in.grad, in.residual, st, marks, kept, lay_});
  }

  // Nothing is listed here: the later stages read g + residual where they need it.
  kept_entries kept() const { return {}; }

 private:
  launcher<Exec> launch_{};
  layout lay_{};
  std::size_t marks_bytes_ = 0;
  typename Exec::template vector<std::uint32_t> hist_;  // [hist_copies][hist_bins] radix-select histograms
};

}  // namespace detail
TAGC_END_NAMESPACE
