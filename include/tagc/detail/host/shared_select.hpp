#pragma once
// defines: tagc::detail::host::shared_select — the shared selection's
//          (stage/shared_selection.hpp) leader marks and position lists on the
//          host (exec::host), portable_shared_select's results bit for bit
//          (tests/test_paths.cpp).
//
// Why not the portable launches on a CPU: the radix select reads acc three times
// and the marking a fourth, and its histogram increments chain through a few
// counters (gradient magnitudes crowd a few bins); at 16 ranks the other ranks
// wait for the leader (docs/results.md, Scaling: the bed's exchange).
// The per-rank Reducer's host select already does this job in one pass: a
// sampled bracket, one marking pass that keeps everything above it and pools the
// ~1 % inside, the exact threshold among those (threshold_marker.hpp). The
// shared bitmap is that marker's index for one shard of 1-bit counters: index
// byte j holds entries 8 j .. 8 j + 7, bit b entry 8 j + b, which on a
// little-endian machine are bit b of 32-bit word w for position 32 w + b, the
// bitmap's own layout. A bitmap becomes a list as a reduced index becomes its
// support (support_list.hpp: popcounts per chunk, a scan, each chunk writes its
// positions), in parallel where the portable host path scans sequentially.
// What it saves: bench/bench_shared_select.cpp, figures in docs/results.md.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../core/bits.hpp"
#include "../../core/status.hpp"
#include "../../shard/layout.hpp"
#include "../select_kernels.hpp"
#include "../shared_kernels.hpp"
#include "support_list.hpp"
#include "threshold_marker.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

class shared_select {
  static_assert(std::endian::native == std::endian::little,
                "tagc: the host's shared selection writes the bitmap's 32-bit words as index bytes (little-endian)");

 public:
  // For buffers of `length` entries (bitmaps of (length + 31) / 32 words).
  template <class Exec>
  status initialize(std::size_t length, const Exec&) {
    n_ = length;
    words_ = (length + 31) / 32;
    marker_.initialize(bitmap_layout(length));
    hist_.assign(std::size_t(hist_copies) * hist_bins, 0u);
    list_.reserve(bitmap_bytes());
    return {};
  }
  std::size_t workspace_bytes() const {
    return marker_.workspace_bytes() + hist_.size() * sizeof(std::uint32_t) + list_.workspace_bytes();
  }
  // What initialize allocates, before it does (the reducers' workspace query).
  static std::size_t workspace_bytes_for(std::size_t length) {
    return threshold_marker::workspace_bytes_for(bitmap_layout(length)) +
           std::size_t(hist_copies) * hist_bins * sizeof(std::uint32_t) +
           support_list::workspace_bytes_for((length + 31) / 32 * sizeof(std::uint32_t));
  }

  // The leader: `words` marks |acc| > the (k+1)-th largest |acc| (every position
  // when k >= length, none but NaN when k = 0), that threshold into *threshold_out.
  void mark(const float* acc, std::size_t k, std::uint32_t* words, std::uint32_t* threshold_out) {
    if (k >= n_) {
      // Every position, zeros too (other ranks' values there are sent): no select.
      std::fill(words, words + words_, ~0u);
      if (n_ % 32) words[words_ - 1] = (1u << (n_ % 32)) - 1u;
      *threshold_out = 0u;
      return;
    }
    auto* bytes = reinterpret_cast<std::uint8_t*>(words);
    const auto target = k == 0 ? 0u : std::uint32_t(k + 1);
    *threshold_out = marker_.run(acc, target, inf_bits, bytes, hist_.data());
    // The marker writes (n + 7) / 8 bytes; the last word's bytes past them are the
    // positions beyond n, unmarked (as mark_word leaves them).
    std::fill(bytes + (n_ + 7) / 8, bytes + bitmap_bytes(), std::uint8_t(0));
  }

  // The bitmap `words` as k list slots: ascending positions, then no_position. At
  // most k of them: a damaged bitmap (more marks than k) cannot overrun the list;
  // its first k positions are listed, as the portable path lists them.
  void to_list(const std::uint32_t* words, std::uint32_t* list, std::size_t k) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(words);
    std::size_t m = list_.build(bytes, bitmap_bytes(), 1, n_, list, k);
    if (m > k) {  // nothing written: list the first k, one word at a time
      m = 0;
      for (std::size_t w = 0; w < words_ && m < k; ++w)
        for (std::uint32_t b = words[w]; b != 0u && m < k; b &= b - 1u)
          list[m++] = std::uint32_t(w * 32 + std::size_t(std::countr_zero(b)));
    }
    std::fill(list + m, list + k, no_position);
  }

 private:
  // The bitmap as the marker's index: one shard of n entries, one bit each.
  static layout bitmap_layout(std::size_t n) {
    layout l;
    l.length = n;
    l.shards = 1;
    l.shard_size = n;
    l.index_bits = 1;
    l.index_bytes = (n + 7) / 8;
    return l;
  }
  std::size_t bitmap_bytes() const { return words_ * sizeof(std::uint32_t); }

  std::size_t n_ = 0, words_ = 0;
  threshold_marker marker_;          // bracket select + bitmap marks
  std::vector<std::uint32_t> hist_;  // the exact select's histograms, for a bracket that misses
  support_list list_;                // a bitmap's positions, chunk by chunk
};

}  // namespace detail::host
TAGC_END_NAMESPACE
