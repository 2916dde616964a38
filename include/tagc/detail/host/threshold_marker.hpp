#pragma once
// defines: tagc::detail::host::threshold_marker — the host's threshold select and
//          index marking in one pass over acc: a sampled bracket [lo, hi] around
//          the threshold, one pass that marks every entry above hi and collects
//          the few in the bracket, the exact threshold selected among those, the
//          bracket's entries above it marked; the kept list (positions and acc
//          values, ascending) staged by the same pass and filtered at the threshold.
//
// Same results as the radix select + build_index (the portable path), bit for bit:
// the threshold is the exact (k+1)-th largest |acc| bit pattern. What changed is
// the shape (why, on a CPU):
//  - the radix select's histograms cost a scattered increment per element, and
//    gradient magnitudes crowd a few bins, so the increments chain through the
//    same counters (store-to-load latency, ~5 cycles an element). A sample of 64K
//    entries brackets the threshold instead: everything above hi is kept whatever
//    the exact threshold is, everything below lo is not, and only the ~1 % in the
//    bracket need the threshold;
//  - the pass that counts above hi also writes the index (8 entries at a time,
//    SSE2 compares + movemask), so acc is read once after pass 0, not twice;
//  - the same pass stages every entry above lo (position and value, packed 8 at
//    a time by a lane table) into the kept list (threshold_select.hpp's), one
//    region per chunk; the threshold then filters it in place. Listing the kept entries from
//    the index afterwards read acc at each kept position: one cache miss per kept
//    entry (~3.5 ms of 16M entries at 10x), now a pass over the staged entries;
//  - a bracket that misses (the sample was unlucky, or a crowded bin) costs a
//    fallback: the exact radix select over acc (host_select) and a marking pass.
// Work is cut into host_chunks fixed chunks of whole index groups (8 entries =
// index_bits bytes): results do not depend on the thread count, and chunks never
// share an index byte.
// The parts, one file each: the sample and its bracket (sample_bracket.hpp), the
// bracket's entries and the select among them (bracket_pool.hpp), the marking
// loops per CPU feature level (mark_loops.hpp); this file runs the passes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../core/bits.hpp"
#include "../../shard/layout.hpp"
#include "../host_compress.hpp"
#include "../support_words.hpp"
#include "bracket_pool.hpp"
#include "mark_loops.hpp"
#include "sample_bracket.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

class threshold_marker {
 public:
  static constexpr std::uint32_t none = 0xffffffffu;

  // Sizes the sample and the bracket's pool for buffers of `length` entries.
  void initialize(const layout& l) {
    lay_ = l;
    groups_per_shard_ = (l.shard_size + 7) / 8;
    groups_ = groups_per_shard_ * std::size_t(l.shards);
    pool_.initialize(l.length);
    if (l.length >= bracket_min_length) sample_.assign(sample_block * sample_blocks_for(l.length), 0u);
  }
  std::size_t workspace_bytes() const {
    return sample_.size() * sizeof(std::uint32_t) + pool_.workspace_bytes();
  }
  // What initialize allocates, before it does (the reducers' workspace query).
  static std::size_t workspace_bytes_for(const layout& l) {
    const std::size_t sample = l.length >= bracket_min_length ? sample_block * sample_blocks_for(l.length) : 0;
    return sample * sizeof(std::uint32_t) + bracket_pool::workspace_bytes_for(l.length);
  }

  // Threshold for target rank `target` (1-based, the (k+1)-th largest |acc|; 0:
  // `fixed` is the threshold), the index [shards][index_bytes] marked (counter 1
  // where |acc| > threshold), the kept count per chunk kept. `hist`: the exact
  // select's histograms (host_select) for a bracket that misses.
  std::uint32_t run(const float* acc, std::uint32_t target, std::uint32_t fixed, std::uint8_t* index,
                    std::uint32_t* hist) {
    if (target == 0) {
      mark_all(acc, std::int32_t(fixed), index);
      return threshold_ = fixed;
    }
    if (!sample_.empty()) {
      const bracket_bounds br = bracket([acc](std::size_t p) { return acc[p]; }, target);
      pass(acc_source{acc}, br.hi, br.lo_m1, index);
    }
    return finish(acc, target, index, hist);
  }

  // Whether begin_fused() can serve a search for rank `target`.
  bool fusable(std::uint32_t target) const { return target != 0 && !sample_.empty(); }

  // Pass 0 and the marking pass in one, when the target rank is known before the
  // agreement check: acc = g + residual written, NaN/Inf counted, max |acc| kept,
  // the index marked against a bracket sampled from g + residual. finish() then
  // selects (after the check). Nothing here is visible state: acc and the index
  // are workspace, so a call refused by the check leaves everything as it was.
  // `want_top`: whether the caller needs max |acc| (host_pass0::top_bin; else left 0).
  template <class R>
  host_pass0 begin_fused(const float* g, const R* r, float* acc, std::uint32_t target, std::uint8_t* index,
                         bool want_top) {
    const bracket_bounds br = bracket([g, r](std::size_t p) { return g[p] + residual_load(r, p); }, target);
    const std::size_t n = lay_.length;
    if (!want_top) return {pass(sum_source<R, false>{g, r, acc}, br.hi, br.lo_m1, index).nonfinite, 0u};
    const sum_source<R, true> sums = pass(sum_source<R, true>{g, r, acc}, br.hi, br.lo_m1, index);
    return {sums.nonfinite, n ? (std::uint32_t(sums.top) >> digit_shift(0)) + 1u : 0u};
  }

  // After a marking pass with the bracket for `target`: the exact threshold, the
  // index completed. A bracket that missed the target (or overflowed the pool)
  // costs the exact radix select over acc and a marking pass against it.
  std::uint32_t finish(const float* acc, std::uint32_t target, std::uint8_t* index, std::uint32_t* hist) {
    if (!sample_.empty()) {
      unsigned long long above = 0, in_bracket = 0;
      for (int c = 0; c < host_chunks; ++c) {
        above += kept_[c + 1];
        in_bracket += bracket_count_[c];
      }
      if (!overflow_ && above < target && target <= above + in_bracket) {
        const std::size_t rank = std::size_t(target - above);
        const std::uint32_t t = pool_.select_in_pool(rank, bracket_, sample_.data(), sample_.size());
        patch(t, index);
        return threshold_ = t;
      }
    }
    const std::size_t n = lay_.length;
    host_histogram_top(acc, n, hist);
    const std::uint32_t t = host_select(acc, n, hist, target, pool_.candidate_buffer(), pool_.candidates());
    mark_all(acc, std::int32_t(t), index);
    return threshold_ = t;
  }

  // Where the next marking passes stage what they find (the index stage's kept
  // list; an empty stage stages nothing). Set before begin_fused() / run().
  void stage_kept(kept_stage s) { stage_ = s; }
  // Whether the last list() filtered the stage (else it read the index: a chunk's
  // entries did not fit its region).
  bool listed_from_stage() const { return from_stage_; }

  // After run(): entries kept, and the ascending list of their positions written
  // into `list` (room for `cap`) when they fit, their acc values into `values`
  // beside them (the sketch and the residual commit then read the kept values in
  // order, not one cache miss each per read). Returns whether they fit.
  unsigned long long kept() const {
    unsigned long long k = 0;
    for (int c = 0; c < host_chunks; ++c) k += kept_[c + 1];
    return k;
  }
  bool list(const std::uint8_t* index, std::uint32_t* list, std::size_t cap, const float* acc, float* values) {
    std::size_t offset[host_chunks + 1];
    offset[0] = 0;
    for (int c = 0; c < host_chunks; ++c) offset[c + 1] = offset[c] + kept_[c + 1];
    from_stage_ = false;
    if (offset[host_chunks] > cap) return false;
    from_stage_ = staged_ && list == stage_.list && values == stage_.values && filter_staged(offset);
    if (from_stage_) return true;
    const layout l = lay_;
    const std::size_t gps = groups_per_shard_, G = groups_;
    const int bits = l.index_bits;
#pragma omp parallel for schedule(static) if (l.length >= host_inline_below)
    for (int c = 0; c < host_chunks; ++c) {
      std::uint32_t* out = list + offset[c];
      float* vout = values + offset[c];
      std::size_t gi = chunk_begin(G, c);
      const std::size_t g1 = chunk_begin(G, c + 1);
      while (gi < g1) {  // shard by shard: no division per group
        const std::size_t s = gi / gps, j0 = gi % gps, j1 = std::min(gps, j0 + (g1 - gi));
        const std::uint8_t* ix = index + s * l.index_bytes;
        const auto first = std::uint32_t(s * l.shard_size);
        std::size_t j = j0;
        if (bits == 1) {
          // 64 entries a word; at 1-10 % density many words are zero, skipped whole
          for (; j + 8 <= j1; j += 8) {
            std::uint64_t w = index_word(ix + j, 8, 0);  // bytes [j, j + 8): one load
            const auto at = first + std::uint32_t(8 * j);
            for (; w; w &= w - 1) {
              const std::uint32_t p = at + std::uint32_t(__builtin_ctzll(w));
              *out++ = p;
              *vout++ = acc[p];
            }
          }
        }
        for (; j < j1; ++j) {
          unsigned m;
          if (bits == 1) {
            m = ix[j];
          } else {
            const std::uint8_t* b = ix + j * std::size_t(bits);
            const std::size_t nb = std::min<std::size_t>(std::size_t(bits), l.index_bytes - j * std::size_t(bits));
            std::uint64_t w = 0;
            for (std::size_t q = 0; q < nb; ++q) w |= std::uint64_t(b[q]) << (8 * q);
            m = 0;
            for (int k = 0; k < 8; ++k) m |= unsigned((w >> (k * bits)) & 1u) << k;
          }
          const auto at = first + std::uint32_t(8 * j);
          for (; m; m &= m - 1) {
            const std::uint32_t p = at + std::uint32_t(__builtin_ctz(m));
            *out++ = p;
            *vout++ = acc[p];
          }
        }
        gi += j1 - j0;
      }
    }
    return true;
  }

 private:
  // The staged entries above the threshold, moved to the front of the kept list in
  // order (chunk c's to offset[c]): a chunk's region starts at c * region and holds
  // at most region entries, and offset[c] <= the entries before it, so every write
  // lands at or before the entry it reads (in place, front to back). Whether each
  // chunk's count matched kept_ (it does; a mismatch would fall back to the index).
  bool filter_staged(const std::size_t* offset) {
    std::uint32_t* list = stage_.list;
    float* values = stage_.values;
    const std::size_t region = stage_.region();
    const std::uint32_t t = threshold_;
    std::size_t w = 0;
    for (int c = 0; c < host_chunks; ++c) {
      const std::size_t r0 = std::size_t(c) * region, r1 = r0 + staged_count_[c];
      for (std::size_t i = r0; i < r1; ++i) {
        const float v = values[i];
        if (abs_bits(v) <= t) continue;
        list[w] = list[i];
        values[w++] = v;
      }
      if (w != offset[c + 1]) return false;
    }
    return true;
  }


  // Entries of shard s inside the caller's length.
  std::size_t valid(std::size_t s) const {
    const std::size_t first = s * lay_.shard_size;
    return lay_.length > first ? std::min(lay_.shard_size, lay_.length - first) : 0;
  }

  // The bracket for `target` from a sample of value(p) (acc, or g + residual), the
  // pool emptied for the pass that fills it.
  template <class Value>
  bracket_bounds bracket(Value value, std::uint32_t target) {
    bracket_ = sample_bracket(value, lay_.length, target, sample_.data());
    pool_.reset();
    return bracket_;
  }

  // One pass over the entries (`src`: acc, or g + residual writing acc): index
  // bytes (counter 1 where u > hi), kept_ per chunk, and the bracket's entries
  // (lo_m1 < u <= hi) into the pool; lo_m1 = 0x7fffffff collects nothing. Stages
  // every entry with u > min(hi, lo_m1) when a stage is set (staged_ says whether
  // all fitted). Returns the source with its per-chunk findings merged.
  template <class Src>
  Src pass(const Src& src0, std::int32_t hi, std::int32_t lo_m1, std::uint8_t* index) {
    const layout l = lay_;
    Src sums[host_chunks];
    const std::size_t gps = groups_per_shard_, G = groups_;
    const int bits = l.index_bits;
    bool overflow = false, stage_full = false;
    kept_[0] = 0;
    [[maybe_unused]] const bool avx2 = bits == 1 && host_avx2(), avx512 = bits == 1 && host_avx512();
    const bool staging = stage_.list && stage_.region() >= 8;
#pragma omp parallel for schedule(static) reduction(|| : overflow, stage_full) if (l.length >= host_inline_below)
    for (int c = 0; c < host_chunks; ++c) {
      Src src = src0;
      unsigned long long kept = 0, in_bracket = 0;
      bracket_pool::writer pool{&pool_};
      stage_writer stage;
      if (staging) {
        stage.list = stage_.list;
        stage.values = stage_.values;
        stage.fill = std::size_t(c) * stage_.region();
        stage.end = stage.fill + stage_.region();
      }
      const std::size_t stage_begin = stage.fill;
      std::size_t gi = chunk_begin(G, c);
      const std::size_t g1 = chunk_begin(G, c + 1);
      while (gi < g1) {
        const std::size_t s = gi / gps, j0 = gi % gps, j1 = std::min(gps, j0 + (g1 - gi));
        const std::size_t base = s * l.shard_size, v = valid(s);
        std::uint8_t* ix = index + s * l.index_bytes;
        std::size_t j = j0;
        if (bits == 1) {  // the paper's index: one byte per group, whole groups first
          const std::size_t full = std::min(j1, std::max(j0, v / 8));
          unsigned long long k = 0;
#if defined(TAGC_HOST_AVX2)
          if constexpr (avx2_source<Src>) {
            // AVX-512 takes groups two at a time; an odd one left goes to the AVX2 loop
            if (avx512)
              j = staging ? marks_avx512<true>(src, base, j, full, hi, lo_m1, ix, k, in_bracket, pool, stage)
                          : marks_avx512<false>(src, base, j, full, hi, lo_m1, ix, k, in_bracket, pool, stage);
            if (avx2)
              j = staging ? marks_avx2<true>(src, base, j, full, hi, lo_m1, ix, k, in_bracket, pool, stage)
                          : marks_avx2<false>(src, base, j, full, hi, lo_m1, ix, k, in_bracket, pool, stage);
          }
#endif
          for (; j < full; ++j) {
            unsigned above, in;
            mark8(src.load8(base + 8 * j), hi, lo_m1, above, in);
            ix[j] = std::uint8_t(above);
            k += mask8_count[above];
            if (in) [[unlikely]] {
              in_bracket += mask8_count[in];
              pool.add(in, base + 8 * j, src.acc);
            }
            if (staging && (above | in)) stage.add(above | in, base + 8 * j, src.acc);
          }
          kept += k;
        }
        for (; j < j1; ++j) {
          const std::size_t e = 8 * j;
          unsigned above, in;
          if (e + 8 <= v) {
            mark8(src.load8(base + e), hi, lo_m1, above, in);
          } else {
            above = in = 0;
            for (std::size_t k = 0; e + k < v && k < 8; ++k) {
              const auto u = std::int32_t(abs_bits(src(base + e + k)));
              above |= unsigned(u > hi) << k;
              in |= unsigned(u > lo_m1 && u <= hi) << k;
            }
          }
          if (bits == 1) {
            ix[j] = std::uint8_t(above);
          } else {
            const std::uint64_t w = spread_marks(above, bits);
            const std::size_t nb = std::min<std::size_t>(std::size_t(bits), l.index_bytes - j * std::size_t(bits));
            for (std::size_t q = 0; q < nb; ++q) ix[j * std::size_t(bits) + q] = std::uint8_t(w >> (8 * q));
          }
          kept += mask8_count[above];
          if (in) {
            in_bracket += mask8_count[in];
            pool.add(in, base + e, src.acc);
          }
          if (staging && (above | in)) stage.add(above | in, base + e, src.acc);
        }
        gi += j1 - j0;
      }
      pool.close();
      overflow = overflow || pool.overflow;
      stage_full = stage_full || stage.full;
      staged_count_[c] = stage.fill - stage_begin;
      kept_[c + 1] = kept;
      bracket_count_[c] = in_bracket;
      if constexpr (requires { src.settle(); }) src.settle();
      sums[c] = src;
    }
    overflow_ = overflow;
    staged_ = staging && !stage_full;
    Src out = src0;
    for (int c = 0; c < host_chunks; ++c) out.merge(sums[c]);
    return out;
  }



  void mark_all(const float* acc, std::int32_t t, std::uint8_t* index) {
    pass(acc_source{acc}, t, 0x7fffffff, index);
  }

  // Marks the bracket entries above t (those ranked above the target: `rank` - 1
  // of them) and counts them into their chunks' kept_. Positions fit 32 bits (the
  // kept list's), so the shard is a 32-bit division; the chunk is found by
  // comparing the group with the chunks' first groups (no division).
  void patch(std::uint32_t t, std::uint8_t* index) {
    const layout l = lay_;
    const std::size_t gps = groups_per_shard_, G = groups_;
    const auto bits = std::size_t(l.index_bits);
    const auto shard_size = std::uint32_t(l.shard_size);
    std::size_t chunk_first[host_chunks];
    for (int c = 0; c < host_chunks; ++c) chunk_first[c] = chunk_begin(G, c);
    pool_.for_each_pooled([&](std::uint64_t entry) {
      if (std::uint32_t(entry >> 32) <= t) return;
      const auto pos = std::uint32_t(entry);
      const std::uint32_t s = pos / shard_size, e = pos - s * shard_size;
      const std::size_t gi = std::size_t(s) * gps + e / 8u, bit = std::size_t(e) * bits;
      std::uint8_t* b = index + std::size_t(s) * l.index_bytes + bit / 8;
      *b = std::uint8_t(*b | (1u << (bit % 8)));
      int c = 0;  // the last chunk whose first group is <= gi
      for (int q = 1; q < host_chunks; ++q) c += chunk_first[q] <= gi ? 1 : 0;
      ++kept_[c + 1];
    });
  }

  layout lay_{};
  std::size_t groups_per_shard_ = 0, groups_ = 0;
  std::vector<std::uint32_t> sample_;  // the bracket's sample; then select_in_pool's scratch
  bracket_pool pool_;                  // the last bracket's entries
  bracket_bounds bracket_{0, -1};      // the last bracket: its pool holds lo_m1 < |acc| bits <= hi
  bool overflow_ = false;
  unsigned long long kept_[host_chunks + 1] = {};
  unsigned long long bracket_count_[host_chunks] = {};
  kept_stage stage_{};                        // where passes stage the entries above lo
  std::size_t staged_count_[host_chunks] = {};  // entries staged per chunk by the last pass
  bool staged_ = false;                       // the last pass staged every entry it found
  bool from_stage_ = false;                   // the last list() came from the stage
  std::uint32_t threshold_ = 0;               // the threshold the index was last marked at
};

}  // namespace detail::host
TAGC_END_NAMESPACE
