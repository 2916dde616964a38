#pragma once
// defines: the host (OpenMP) implementations of the compress-side stages: acc = g + residual
//          once per call (pass 0), the exact radix select over acc from
//          chunk-private histograms (the fallback of detail/host/threshold_marker.hpp,
//          which selects the threshold and marks the index in one pass), the
//          sketch from the kept list, and the residual committed sparsely.
//
// Same algorithm as the portable functors (detail/*_kernels.hpp), another
// shape for a CPU (as Thrust and CUB dispatch one algorithm per system):
//  - no atomics and no omp_get_thread_num() per element: the work is cut into
//    `host_chunks` fixed chunks (independent of the thread count, so the
//    results are too), each with its own histogram / counter;
//  - the threshold is the exact (k+1)-th largest |acc|, as the radix select's:
//    usually from a sampled bracket (detail/host/threshold_marker.hpp); else the
//    top digit's histogram names the bin holding it, the bin's entries are
//    gathered (candidates) and the rank is selected among them; a bin too full
//    for the candidate buffer falls back to radix passes 1 and 2 over acc;
//  - sketch cells add their terms in ascending block order, as the gather
//    build's (detail/sketch_kernels.hpp), so the cells are bit-identical;
//  - the residual of a float reducer is the acc buffer itself after the call
//    (swapped in): only kept entries are written.
// Launches below host_inline_below elements run on the calling thread.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "../core/bits.hpp"
#include "../core/config.hpp"
#include "../shard/layout.hpp"
#include "compress_handoff.hpp"
#include "host_paths.hpp"
#include "index_kernels.hpp"
#include "launch.hpp"
#include "select_kernels.hpp"
#include "sketch_kernels.hpp"
#include "wire_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

// Fixed work chunks of a host pass; each owns one histogram copy.
inline constexpr int host_chunks = hist_copies;
inline constexpr std::size_t chunk_begin(std::size_t n, int c) { return n * std::size_t(c) / std::size_t(host_chunks); }

// What pass 0 learns besides acc: NaN/Inf entries and the largest |acc| bits.
struct host_pass0 {
  std::uint32_t nonfinite = 0;
  std::uint32_t top_bin = 0;  // 1 + the top radix digit of max |acc| (find_top_bin's), 0 if n == 0
};

// Pass 0: acc = g + residual, the NaN/Inf count and max |acc|, in one
// vectorisable pass (no histogram: the threshold comes from a sampled bracket,
// detail/host/threshold_marker.hpp).
template <class R>
inline host_pass0 host_accumulate(const float* g, const R* r, float* acc, std::size_t n) {
  std::uint32_t nonfinite = 0;
  std::int32_t top = -1;  // |x| bits fit in 31 bits: a signed max vectorises
#pragma omp parallel for schedule(static) reduction(+ : nonfinite) reduction(max : top) if (n >= host_inline_below)
  for (int c = 0; c < host_chunks; ++c) {
    std::uint32_t nf = 0;
    std::int32_t m = -1;
    const std::size_t e = chunk_begin(n, c + 1);
#pragma omp simd reduction(+ : nf) reduction(max : m)
    for (std::size_t i = chunk_begin(n, c); i < e; ++i) {
      const float a = g[i] + residual_load(r, i);
      acc[i] = a;
      const auto u = std::int32_t(abs_bits(a));
      nf += u >= std::int32_t(inf_bits) ? 1u : 0u;
      m = u > m ? u : m;
    }
    nonfinite += nf;
    top = m > top ? m : top;
  }
  return {nonfinite, n ? (std::uint32_t(top) >> digit_shift(0)) + 1u : 0u};
}

// Pass 0's histogram of the top digit ([30:21]) of |acc|, chunk c into
// hist[c * hist_bins ..] (cleared here): what host_select starts from.
inline void host_histogram_top(const float* acc, std::size_t n, std::uint32_t* hist) {
  const int bins = 1 << digit_bits(0);
#pragma omp parallel for schedule(static) if (n >= host_inline_below)
  for (int c = 0; c < host_chunks; ++c) {
    std::uint32_t* h = hist + std::size_t(c) * hist_bins;
    for (int b = 0; b < bins; ++b) h[b] = 0;
    const std::size_t e = chunk_begin(n, c + 1);
    for (std::size_t i = chunk_begin(n, c); i < e; ++i) ++h[abs_bits(acc[i]) >> digit_shift(0)];
  }
}

// The `target`-th largest |acc| (1-based; target <= n) bit pattern, from pass 0's
// histograms. `cand`: room for `cand_cap` candidates. Leaves `hist` dirty.
inline std::uint32_t host_select(const float* acc, std::size_t n, std::uint32_t* hist, std::uint32_t target,
                                 std::uint32_t* cand, std::size_t cand_cap) {
  const int top_bins = 1 << digit_bits(0);
  std::uint32_t above = 0, in_bin = 0;
  int bin = 0;
  for (int b = top_bins - 1; b >= 0; --b) {
    std::uint32_t c = 0;
    for (int k = 0; k < host_chunks; ++k) c += hist[std::size_t(k) * hist_bins + std::size_t(b)];
    if (above + c >= target) {
      bin = b;
      in_bin = c;
      break;
    }
    above += c;
  }
  std::uint32_t remaining = target - above;  // rank within the bin, 1-based
  [[maybe_unused]] const bool par = n >= host_inline_below;
  if (in_bin <= cand_cap) {
    // Gather the bin's entries, chunk by chunk at known offsets; select among them.
    std::size_t offset[host_chunks + 1];
    offset[0] = 0;
    for (int k = 0; k < host_chunks; ++k) offset[k + 1] = offset[k] + hist[std::size_t(k) * hist_bins + std::size_t(bin)];
#pragma omp parallel for schedule(static) if (par)
    for (int c = 0; c < host_chunks; ++c) {
      std::size_t o = offset[c];
      const std::size_t e = chunk_begin(n, c + 1);
      for (std::size_t i = chunk_begin(n, c); i < e; ++i) {
        const std::uint32_t u = abs_bits(acc[i]);
        if ((u >> digit_shift(0)) == std::uint32_t(bin)) cand[o++] = u;
      }
    }
    std::nth_element(cand, cand + (remaining - 1), cand + in_bin, std::greater<std::uint32_t>());
    return cand[remaining - 1];
  }
  // A crowded bin: radix passes 1 and 2 over acc, chunk-private histograms.
  std::uint32_t prefix = std::uint32_t(bin);
  for (int pass = 1; pass < select_passes; ++pass) {
    const int shift = digit_shift(pass), bits = digit_bits(pass), bins = 1 << bits;
    const std::uint32_t mask = (1u << bits) - 1u;
#pragma omp parallel for schedule(static) if (par)
    for (int c = 0; c < host_chunks; ++c) {
      std::uint32_t* h = hist + std::size_t(c) * hist_bins;
      for (int b = 0; b < bins; ++b) h[b] = 0;
      const std::size_t e = chunk_begin(n, c + 1);
      for (std::size_t i = chunk_begin(n, c); i < e; ++i) {
        const std::uint32_t u = abs_bits(acc[i]);
        if ((u >> (shift + bits)) == prefix) ++h[(u >> shift) & mask];
      }
    }
    std::uint32_t chosen = 0, over = 0;
    for (int b = bins - 1; b >= 0; --b) {
      std::uint32_t c = 0;
      for (int k = 0; k < host_chunks; ++k) c += hist[std::size_t(k) * hist_bins + std::size_t(b)];
      if (over + c >= remaining) {
        chosen = std::uint32_t(b);
        break;
      }
      over += c;
    }
    remaining -= over;
    prefix = (prefix << bits) | chosen;
  }
  return prefix;
}

// The sketch cells of partitions [h0, h0 + H) of shard s from the kept list (the
// entries of shard s: [b, e)). Each cell adds its terms in ascending block order,
// as build_sketch does: bit-identical, however the partitions are split into tasks.
template <class Value, int H>
inline void host_sketch_shard(const float* kept_values, const std::uint32_t* kept, const std::uint32_t* b,
                              const std::uint32_t* e, const layout& l, std::size_t s, int h0,
                              const std::uint8_t* sender_check, float* sketch, float wire_scale) {
  const std::size_t part_cells = l.part_rows * l.lanes;  // partition h owns cells [h, h + 1) * part_cells
  // The task clears its own cells (one parallel region per sketch, and the cells
  // are in cache for the additions).
  float* out = sketch + s * l.cells;
  std::fill(out + std::size_t(h0) * part_cells, out + std::size_t(h0 + H) * part_cells, 0.0f);
  const std::size_t first = s * l.shard_size;
  // The list is ascending: the block changes only when an entry passes its end,
  // so the lane is a subtraction and the rotation a conditional one (no
  // division per entry: a 64-bit divide costs tens of cycles).
  const std::size_t lanes = l.lanes;
  std::size_t block_begin = 0, block_end = 0, row_base[H] = {}, rot[H] = {};
  float sign[H] = {};
  for (const std::uint32_t* p = b; p != e; ++p) {
    const std::size_t el = std::size_t(*p) - first;
    if (sender_check && !index_marked(sender_check, l, s, el)) continue;
    if (el >= block_end) {
      const auto j = std::uint32_t(el / lanes);
      block_begin = std::size_t(j) * lanes;
      block_end = block_begin + lanes;
      for (int k = 0; k < H; ++k) {
        const std::uint32_t hash = sketch_hash(j, h0 + k);
        row_base[k] = sketch_row(hash, l.part_rows, h0 + k) * lanes;
        sign[k] = sketch_sign(hash);
        rot[k] = sketch_rotation(j, h0 + k, lanes);
      }
    }
    const float v = wire_round<Value>(kept_values[p - kept] * wire_scale);
    for (int k = 0; k < H; ++k) {
      std::size_t lane = el - block_begin + rot[k];  // = (el % lanes + rot) % lanes
      if (lane >= lanes) lane -= lanes;
      out[row_base[k] + lane] += sign[k] * v;
    }
  }
}

// The sketch cells [shards][cells] (fp32 sums) from the kept list and its values
// (acc at the kept positions: read in order, not a cache miss per entry and
// partition). A task per shard takes its three partitions in one pass over the
// shard's entries (the list read and the sender check asked once per entry, not
// once per partition); with fewer shards than threads, a task per partition keeps
// the threads busy instead. The cells are the same either way.
template <class Value>
inline void host_sketch_from_kept(const float* kept_values, const std::uint32_t* kept, std::size_t m,
                                  const layout& l, const std::uint8_t* sender_check, float* sketch, float wire_scale) {
  const std::size_t shards = std::size_t(l.shards), cells = l.cells;
  [[maybe_unused]] const bool par = shards * cells >= host_inline_below || m >= host_inline_below;
  int per_task = 3;  // partitions per task
#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
  if (par && shards < std::size_t(omp_get_max_threads())) per_task = 1;
#endif
  const int tasks = int(shards) * (3 / per_task);
#pragma omp parallel for schedule(dynamic, 1) if (par)
  for (int t = 0; t < tasks; ++t) {
    const std::size_t s = std::size_t(t) / std::size_t(3 / per_task);
    const int h0 = per_task == 3 ? 0 : t % 3;
    const std::size_t first = s * l.shard_size;
    const std::uint32_t* b = std::lower_bound(kept, kept + m, std::uint32_t(first));
    const std::uint32_t* e = std::lower_bound(b, kept + m, std::uint32_t(std::min(first + l.shard_size, l.length)));
    if (per_task == 3)
      host_sketch_shard<Value, 3>(kept_values, kept, b, e, l, s, 0, sender_check, sketch, wire_scale);
    else
      host_sketch_shard<Value, 1>(kept_values, kept, b, e, l, s, h0, sender_check, sketch, wire_scale);
  }
}

// The index stage's repair of a 1-bit index at two ranks (repair_pair_index's),
// on the host: a byte loop the compiler vectorises (16 bytes an instruction).
struct host_pair_repair {
  template <class Exec>
  static void run(const launcher<Exec>&, const std::uint8_t* mine, std::uint8_t* summed, std::size_t bytes) {
#pragma omp simd
    for (std::size_t b = 0; b < bytes; ++b) summed[b] = std::uint8_t(mine[b] | std::uint8_t(summed[b] - mine[b]));
  }
};

// The sketch stage's host implementation (detail/compress_dispatch.hpp): the cells
// [shards][cells] (fp32 sums) from the kept list the threshold select made, 1-10 %
// of the entries instead of a gather over all of them. Builds nothing (false) where
// there is no list, or the shard is dense (no sketch).
struct host_sketch_builder {
  template <class Wire>
  static bool from_kept(const kept_entries& kept, const layout& l, const std::uint8_t* sender_check, float* cells,
                        float wire_scale) {
    if (l.dense || !kept.listed) return false;
    host_sketch_from_kept<Wire>(kept.values, kept.positions, kept.count, l, sender_check, cells, wire_scale);
    return true;
  }
};

// One kept entry after the exchange: delivered (its wire rounding stays in the
// residual) or not (acc stays); counts what was not.
struct host_commit_entry {
  const std::uint8_t* reduced_index;  // nullptr when exact
  const std::uint8_t* retransmit;     // [shards][mask bytes] or nullptr
  layout lay;
  // 0 delivered, 1 deferred (not marked), 2 retransmitted (not resolved)
  int operator()(std::size_t g) const {
    if (!reduced_index && !retransmit) return 0;  // exact index, all resolved: no division per entry
    const std::size_t s = g / lay.shard_size, e = g % lay.shard_size;
    const bool marked = !reduced_index || index_marked(reduced_index, lay, s, e);
    const std::size_t mask_bytes = (lay.shard_size + 7) / 8;
    const bool resolved = !retransmit || !((retransmit[s * mask_bytes + e / 8] >> (e % 8)) & 1u);
    return marked && resolved ? 0 : marked ? 2 : 1;
  }
};

// Float residual: acc becomes the residual; only kept entries change (the
// delivered ones keep their wire rounding). Over the kept list when there is
// one, else over all of acc. Adds to counters[1] (deferred), [2] (retransmitted).
template <class Value>
inline void host_commit_float(float* acc, const std::uint32_t* kept, const float* kept_values, std::size_t m,
                              bool listed, std::size_t n,
                              std::uint32_t threshold, host_commit_entry what, float wire_scale, float wire_unscale,
                              unsigned long long* counters) {
  unsigned long long deferred = 0, again = 0;
  const std::size_t count = listed ? m : n;
#pragma omp parallel for schedule(static) reduction(+ : deferred, again) if (count >= host_inline_below)
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t g = listed ? std::size_t(kept[i]) : i;
    const float a = listed ? kept_values[i] : acc[g];
    if (!listed && !is_kept(a, threshold)) continue;
    const int w = what(g);
    if (w == 0) acc[g] = a - wire_round<Value>(a * wire_scale) * wire_unscale;
    else if (w == 1) ++deferred;
    else ++again;
  }
  counters[1] += deferred;
  counters[2] += again;
}

// A 16-bit (bf16) residual: every entry is stored (rounded stochastically), from acc.
template <class Value, class R>
struct host_commit_stored {
  const float* acc;
  R* residual;
  std::uint32_t threshold;
  host_commit_entry what;
  float wire_scale, wire_unscale;
  std::uint32_t seed;
  unsigned long long* counts;  // [2 * host_chunks]: deferred, retransmitted per chunk
  void operator()(std::size_t g, int chunk) const {
    const float a = acc[g];
    bool delivered = false;
    if (is_kept(a, threshold)) {
      const int w = what(g);
      delivered = w == 0;
      if (w) ++counts[2 * chunk + (w - 1)];
    }
    const float left = delivered ? a - wire_round<Value>(a * wire_scale) * wire_unscale : a;
    residual_store(residual, g, left, seed, residual_site::update);
  }
};
template <class Value, class R>
inline void host_commit_residual(const host_commit_stored<Value, R>& f, std::size_t n, unsigned long long* counters) {
  unsigned long long counts[2 * host_chunks] = {};
  auto fc = f;
  fc.counts = counts;
#pragma omp parallel for schedule(static) if (n >= host_inline_below)
  for (int c = 0; c < host_chunks; ++c) {
    const std::size_t e = chunk_begin(n, c + 1);
    for (std::size_t g = chunk_begin(n, c); g < e; ++g) fc(g, c);
  }
  for (int c = 0; c < host_chunks; ++c) {
    counters[1] += counts[2 * c];
    counters[2] += counts[2 * c + 1];
  }
}

}  // namespace detail
TAGC_END_NAMESPACE
