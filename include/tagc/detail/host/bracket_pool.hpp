#pragma once
// defines: tagc::detail::host::bracket_pool — the entries a marking pass finds
//          in the sampled bracket (sample_bracket.hpp), ((|x| bits << 32) |
//          position), in segments the chunks grab as they go, and the exact
//          threshold selected among them.
//
// The bracket holds ~1 % of the entries at 16M (~4 % at 40K). A chunk appends
// to its own segment (no atomics per entry: one per segment grabbed); a pass that
// finds more than the pool holds overflows (the marker then falls back to the
// exact radix select). The pool doubles as that select's candidate buffer.

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "../../core/bits.hpp"
#include "../../core/config.hpp"
#include "sample_bracket.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

class bracket_pool {
 public:
  // Sizes the pool for buffers of `length` entries.
  void initialize(std::size_t length) {
    const std::size_t pool = length / 32 + 2048;  // as many bytes as the old n / 16 candidates
    segment_ = std::max<std::size_t>(16, pool / 256);
    seg_fill_.assign(pool / segment_, 0u);
    pool_.assign(seg_fill_.size() * segment_, 0ull);
  }
  std::size_t workspace_bytes() const {
    return pool_.size() * sizeof(std::uint64_t) + seg_fill_.size() * sizeof(std::uint32_t);
  }
  // What initialize allocates, before it does (the reducers' workspace query).
  static std::size_t workspace_bytes_for(std::size_t length) {
    const std::size_t pool = length / 32 + 2048, segment = std::max<std::size_t>(16, pool / 256);
    const std::size_t segments = pool / segment;
    return segments * segment * sizeof(std::uint64_t) + segments * sizeof(std::uint32_t);
  }
  // Before a pass fills it: every segment free again.
  void reset() { next_seg_ = 0; }

  // The exact select's candidate buffer (host_select), room for candidates() entries.
  std::uint32_t* candidate_buffer() { return reinterpret_cast<std::uint32_t*>(pool_.data()); }
  std::size_t candidates() const { return 2 * pool_.size(); }

  // A chunk's bracket entries, appended to pool segments it grabs (rare: ~1 % of
  // the entries; kept out of line so the marking loop keeps its registers).
  struct writer {
    bracket_pool* self;
    std::uint64_t* seg = nullptr;
    std::size_t fill = 0, seg_id = 0;
    bool overflow = false;
    __attribute__((noinline)) void add(unsigned in, std::size_t first, const float* acc) {
      for (unsigned m = in; m; m &= m - 1) {
        const std::size_t p = first + std::size_t(__builtin_ctz(m));
        if (fill == self->segment_ || !seg) {
          if (seg) self->seg_fill_[seg_id] = std::uint32_t(fill);
          seg = overflow ? nullptr : self->grab_segment();
          if (!seg) {
            overflow = true;
            continue;
          }
          seg_id = std::size_t(seg - self->pool_.data()) / self->segment_;
          fill = 0;
        }
        seg[fill++] = (std::uint64_t(abs_bits(acc[p])) << 32) | std::uint64_t(p);
      }
    }
    void close() {
      if (seg) self->seg_fill_[seg_id] = std::uint32_t(fill);
    }
  };

  // The `rank`-th largest |acc| bits among the bracket's entries (rank <= the
  // entries in the pool). A histogram of their bits above lo (the bracket spans
  // few float patterns) names the bin holding it; only that bin's entries are
  // ordered, in `scratch` (room for `scratch_size`). A bin too full for it falls
  // back to ordering the whole pool.
  std::uint32_t select_in_pool(std::size_t rank, bracket_bounds br, std::uint32_t* scratch, std::size_t scratch_size) {
    constexpr int bins = 2048;
    const std::size_t segs = std::min(next_seg_, seg_fill_.size());
    const auto range = std::uint32_t(std::int64_t(br.hi) - std::int64_t(br.lo_m1));  // >= 1
    const int width = std::bit_width(range - 1u);
    const int shift = width > 11 ? width - 11 : 0;
    const auto bin_of = [&](std::uint64_t entry) {
      return (std::uint32_t(entry >> 32) - std::uint32_t(br.lo_m1) - 1u) >> shift;
    };
    std::array<std::uint32_t, bins> hist{};
    for_each_pooled([&](std::uint64_t entry) { ++hist[bin_of(entry)]; });
    std::size_t above = 0;
    int bin = bins - 1;
    for (; bin > 0 && above + hist[std::size_t(bin)] < rank; --bin) above += hist[std::size_t(bin)];
    const std::size_t in_bin = hist[std::size_t(bin)], r = rank - above;  // r: rank within the bin, 1-based
    if (in_bin <= scratch_size) {
      std::uint32_t* u = scratch;
      std::size_t m = 0;
      for_each_pooled([&](std::uint64_t entry) {
        if (bin_of(entry) == std::uint32_t(bin)) u[m++] = std::uint32_t(entry >> 32);
      });
      std::nth_element(u, u + (r - 1), u + m, std::greater<std::uint32_t>());
      return u[r - 1];
    }
    // Partly filled segments are padded with zeros: below every entry, so the rank holds.
    for (std::size_t k = 0; k < segs; ++k)
      std::fill(pool_.data() + k * segment_ + seg_fill_[k], pool_.data() + (k + 1) * segment_, 0ull);
    std::uint64_t* p = pool_.data();
    std::nth_element(p, p + (rank - 1), p + segs * segment_, std::greater<std::uint64_t>());
    // The entries moved between segments: every slot is an entry or a zero now (patch() reads them all).
    std::fill(seg_fill_.begin(), seg_fill_.begin() + std::ptrdiff_t(segs), std::uint32_t(segment_));
    return std::uint32_t(p[rank - 1] >> 32);
  }

  // f(entry) for every entry in the pool's used segments ((u << 32) | position).
  template <class F>
  void for_each_pooled(F f) const {
    const std::size_t segs = std::min(next_seg_, seg_fill_.size());
    for (std::size_t k = 0; k < segs; ++k) {
      const std::uint64_t* seg = pool_.data() + k * segment_;
      for (std::uint32_t i = 0; i < seg_fill_[k]; ++i) f(seg[i]);
    }
  }

 private:
  // Pool segments: runs of bracket entries ((u << 32) | position), one chunk's each.
  std::uint64_t* grab_segment() {
    std::size_t seg;
#pragma omp atomic capture
    seg = next_seg_++;
    if (seg >= seg_fill_.size()) return nullptr;
    seg_fill_[seg] = 0;
    return pool_.data() + seg * segment_;
  }

  std::size_t segment_ = 0;
  std::vector<std::uint64_t> pool_;      // bracket entries, segment by segment
  std::vector<std::uint32_t> seg_fill_;  // entries in each segment
  std::size_t next_seg_ = 0;
};

}  // namespace detail::host
TAGC_END_NAMESPACE
