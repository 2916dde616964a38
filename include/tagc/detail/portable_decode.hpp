#pragma once
// defines: tagc::detail::portable_decoder<Exec> — the owner's decode of its shard
//          as bulk-parallel launches of the single-source functors: what a GPU
//          runs, and what the CPU tests run as the reference for the host decoder.
//
//   support list   one launch per 64-bit index word counts its marks, a scan
//                  turns counts into offsets (CUB DeviceScan on CUDA, into
//                  workspace sized at initialize), a second launch writes each
//                  word's entries (detail/support_words.hpp): no per-entry
//                  compaction, no temporaries
//   edges          cells and signs of each support entry, cached
//   peeling        rounds (decode functors): resolve entries alone in a cell,
//                  claim / apply / release to serialise subtractions per cell.
//                  The rounds run over a frontier, the support positions still
//                  unresolved or not yet subtracted, compacted every few rounds
//                  (CUB DeviceSelect on CUDA, into workspace sized at
//                  initialize): later rounds touch only what is left, and the
//                  host learns the frontier's size (and progress) only at those
//                  compactions, never every round
//   estimate       the conservative estimate for what is left
//   counts         sums over the support or the frontier (work left, entries
//                  resolved): sum_workspace (detail/launch.hpp), CUB into storage
//                  sized at initialize on CUDA, not thrust::transform_reduce,
//                  whose temporary storage is a cudaMalloc / cudaFree per call
//
// Every buffer is sized in initialize(); run() allocates nothing.

#include <cstddef>
#include <cstdint>

#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>

#include "../core/status.hpp"
#include "../shard/layout.hpp"
#include "decode_counts.hpp"
#include "decode_kernels.hpp"
#include "launch.hpp"
#include "support_words.hpp"

#if defined(__CUDACC__)
#  include <cub/device/device_scan.cuh>
#  include <cub/device/device_select.cuh>

#  include "../exec/cuda.hpp"  // TAGC_CUDA_TRY
#endif

TAGC_BEGIN_NAMESPACE
namespace detail {

// f at the k-th position a list holds (a frontier's support positions, or the
// support itself), with f's result: the rounds' functors, and the terms of a sum.
template <class F>
struct over_frontier {
  F f;
  const std::uint32_t* frontier;
  TAGC_HOST_DEVICE auto operator()(std::size_t k) const { return f(frontier[k]); }
};
// An entry-state functor (work_left, count_state) at a support position.
template <class F>
struct at_position {
  F f;
  const std::uint32_t* support;
  TAGC_HOST_DEVICE unsigned long long operator()(std::uint32_t i) const { return f(support[i]); }
};
// Support positions peeling is not done with: unresolved, or resolved and not yet subtracted.
struct peeling_active {
  decode_view v;
  TAGC_HOST_DEVICE bool operator()(std::uint32_t i) const {
    const std::uint8_t s = v.state[v.support[i]];
    return s == entry_unresolved || s == entry_resolved;
  }
};
struct write_position {
  std::uint32_t* frontier;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const { frontier[i] = std::uint32_t(i); }
};

template <class Exec>
class portable_decoder {
 public:
  template <class T> using vector = typename Exec::template vector<T>;

  status initialize(const layout& l, std::size_t own_shard, Exec exec) {
    exec_ = exec;
    lay_ = l;
    shard_ = own_shard;
    const std::size_t first = own_shard * l.shard_size;
    valid_ = l.length > first ? (l.length - first < l.shard_size ? l.length - first : l.shard_size) : 0;
    words_ = index_words(l.index_bytes);
    count_.assign(l.cells, 0u);
    ids_.assign(l.cells, 0u);
    writer_.assign(l.cells, 0u);
    support_.assign(l.shard_size, 0u);
    edges_.assign(3 * l.shard_size, 0u);
    word_counts_.assign(words_, 0u);
    word_offsets_.assign(words_ + 1, 0u);
    frontier_[0].assign(l.shard_size, 0u);
    frontier_[1].assign(l.shard_size, 0u);
    selected_.assign(1, 0u);
#if defined(__CUDACC__)
    if constexpr (Exec::is_device) {  // one temporary for both CUB calls: the larger of their needs
      std::size_t scan_bytes = 0, select_bytes = 0;
      TAGC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, raw_(word_counts_), raw_(word_offsets_) + 1,
                                                  int(words_), exec.stream));
      const decode_view none{};
      TAGC_CUDA_TRY(cub::DeviceSelect::If(nullptr, select_bytes, raw_(frontier_[0]), raw_(frontier_[1]),
                                          raw_(selected_), int(l.shard_size), peeling_active{none}, exec.stream));
      const std::size_t bytes = scan_bytes > select_bytes ? scan_bytes : select_bytes;
      scan_temp_.assign(bytes ? bytes : 1, 0);
    }
#endif
    // the sums run() and apply_rounds() take, at their largest (the shard)
    const decode_view none{};
    TAGC_TRY(sums_.template reserve<unsigned long long>(exec, l.shard_size,
                                                        over_frontier<count_state>{count_state{none, 0}, nullptr}));
    TAGC_TRY(sums_.template reserve<unsigned long long>(
        exec, l.shard_size, over_frontier<at_position<work_left>>{{work_left{none}, nullptr}, nullptr}));
    TAGC_TRY(sums_.template reserve<unsigned long long>(
        exec, l.shard_size, over_frontier<at_position<count_state>>{{count_state{none, 0}, nullptr}, nullptr}));
    return {};
  }
  std::size_t workspace_bytes() const {
    return (count_.size() + ids_.size() + writer_.size() + support_.size() + edges_.size() + word_counts_.size() +
            word_offsets_.size() + frontier_[0].size() + frontier_[1].size() + selected_.size()) *
               sizeof(std::uint32_t) +
           scan_temp_.size() + sums_.workspace_bytes();
  }
  // What initialize(l, ...) allocates, but for a device's CUB temporaries (queried there;
  // a few KiB).
  static std::size_t workspace_bytes_for(const layout& l) {
    const std::size_t words = index_words(l.index_bytes);
    return (3 * l.cells + 6 * l.shard_size + 2 * words + 1 + 1) * sizeof(std::uint32_t);
  }

  // Same contract as host::shard_decoder::run.
  status run(float* cells, const std::uint8_t* own_index, float* out, std::uint8_t* state, bool peels,
             bool estimates, decode_counts& d) {
    const decode_view v{lay_,         shard_,       own_index,     cells,           raw_(count_), raw_(ids_),
                        raw_(writer_), state,       raw_(support_), raw_(edges_),   out};
    d = {};
    launch(lay_.shard_size, mark_support{v});
    std::size_t m = 0;
    TAGC_TRY(support_list(own_index, m));
    launch(lay_.cells, reset_cells{v});
    launch(m, add_edges{v});
    if (peels) TAGC_TRY(apply_rounds(v, m));
    d.support = m;
    unsigned long long unresolved = 0;
    TAGC_TRY(sum_over(raw_(support_), m, count_state{v, entry_unresolved}, unresolved));
    d.unresolved = unresolved;
    d.peeled = m - d.unresolved;
    if (estimates && d.unresolved) launch(m, estimate_round{v});
    return {};
  }

 private:
  static constexpr std::size_t check_every = 4;  // peeling rounds between progress checks

  template <class V> static auto raw_(V& v) { return thrust::raw_pointer_cast(v.data()); }

  template <class F> void launch(std::size_t n, F f) const {
    if (n == 0) return;
    thrust::for_each(exec_.policy(), thrust::counting_iterator<std::size_t>(0),
                     thrust::counting_iterator<std::size_t>(n), f);
  }
  // out = the sum of f(list[k]) over [0, n), f: uint32 -> unsigned long long.
  template <class F> status sum_over(const std::uint32_t* list, std::size_t n, F f, unsigned long long& out) const {
    return sums_.sum(launcher<Exec>{exec_}, n, over_frontier<F>{f, list}, out);
  }

  // Word counts, their scan (offsets[0] = 0, offsets[k + 1] = marks in words 0..k), the entries.
  status support_list(const std::uint8_t* own_index, std::size_t& m) {
    std::uint32_t* counts = raw_(word_counts_);
    std::uint32_t* offsets = raw_(word_offsets_);
    launch(words_, count_word_marks{own_index, lay_.index_bytes, lay_.index_bits, valid_, counts});
    if constexpr (Exec::is_device) {
#if defined(__CUDACC__)
      std::size_t bytes = scan_temp_.size();
      TAGC_CUDA_TRY(cub::DeviceScan::InclusiveSum(raw_(scan_temp_), bytes, counts, offsets + 1, int(words_),
                                                  exec_.stream));
#endif
    } else {  // host memory: the reference path (the host decoder has its own, parallel, list builder)
      for (std::size_t k = 0; k < words_; ++k) offsets[k + 1] = offsets[k] + counts[k];
    }
    launch(words_, write_word_marks{own_index, lay_.index_bytes, lay_.index_bits, valid_, offsets, raw_(support_)});
    std::uint32_t total = 0;
    TAGC_TRY(exec_.copy_to_host(offsets + words_, &total, 1));  // the launch sizes below need it
    m = total;
    return {};
  }

  // out = the sum of f(support[positions[k]]) over [0, n): a count over the frontier.
  template <class F> status sum_at(const std::uint32_t* positions, std::size_t n, F f, unsigned long long& out) const {
    return sum_over(positions, n, at_position<F>{f, raw_(support_)}, out);
  }

  // Keep the active positions of `in` (n of them) in `out`; how many, on the host.
  status compact(const decode_view& v, const std::uint32_t* in, std::size_t n, std::uint32_t* out, std::size_t& kept) {
    if constexpr (Exec::is_device) {
#if defined(__CUDACC__)
      std::size_t bytes = scan_temp_.size();
      TAGC_CUDA_TRY(cub::DeviceSelect::If(raw_(scan_temp_), bytes, in, out, raw_(selected_), int(n), peeling_active{v},
                                          exec_.stream));
#endif
      std::uint32_t k = 0;
      TAGC_TRY(exec_.copy_to_host(raw_(selected_), &k, 1));
      kept = k;
    } else {  // host memory: the reference path, in order
      const peeling_active active{v};
      std::size_t k = 0;
      for (std::size_t j = 0; j < n; ++j)
        if (active(in[j])) out[k++] = in[j];
      kept = k;
    }
    return {};
  }

  // Serialised subtraction rounds until every resolved entry has been subtracted
  // from its cells, or nothing moves any more. Each round runs over the frontier;
  // every check_every rounds the frontier is compacted (one host round trip) and
  // progress is checked: the same rounds, in the same order, as over the whole
  // support list (an entry outside the frontier is done: no functor acts on it).
  status apply_rounds(const decode_view& v, std::size_t m) {
    std::uint32_t* cur = raw_(frontier_[0]);
    std::uint32_t* next = raw_(frontier_[1]);
    launch(m, write_position{cur});
    std::size_t n = m;
    unsigned long long before = 0;
    TAGC_TRY(sum_at(cur, n, work_left{v}, before));
    const std::size_t max_rounds = 2 * m + 8;  // each productive round retires at least one unit of work
    for (std::size_t round = 0; before != 0 && round < max_rounds; ++round) {
      launch(n, over_frontier<peel_round>{{v}, cur});
      launch(n, over_frontier<claim_cells>{{v}, cur});
      launch(n, over_frontier<apply_resolved>{{v}, cur});
      launch(n, over_frontier<release_cells>{{v}, cur});
      if (round % check_every == check_every - 1) {
        std::size_t kept = 0;
        TAGC_TRY(compact(v, cur, n, next, kept));
        n = kept;
        std::uint32_t* t = cur;
        cur = next;
        next = t;
        unsigned long long now = 0, resolved = 0;
        TAGC_TRY(sum_at(cur, n, work_left{v}, now));
        if (now == before) TAGC_TRY(sum_at(cur, n, count_state{v, entry_resolved}, resolved));
        // Only unresolved entries with no lone cell left: a stopping set.
        if (now == before && resolved == 0) break;
        before = now;
      }
    }
    return {};
  }

  Exec exec_{};
  layout lay_{};
  std::size_t shard_ = 0, valid_ = 0, words_ = 0;
  vector<std::uint32_t> count_, ids_, writer_;  // [cells]
  vector<std::uint32_t> support_;               // [shard] support list
  vector<std::uint32_t> edges_;                 // [3 * shard] cached cells and signs of the support
  vector<std::uint32_t> word_counts_;           // [index words] marks per word
  vector<std::uint32_t> word_offsets_;          // [index words + 1] their inclusive scan, shifted by one
  vector<std::uint32_t> frontier_[2];           // [shard] support positions still peeling (ping-pong)
  vector<std::uint32_t> selected_;              // [1] the compacted frontier's size (CUDA)
  vector<unsigned char> scan_temp_;             // CUB scan / select workspace (CUDA only)
  sum_workspace<Exec> sums_;                    // the counts over the support and the frontier
};

}  // namespace detail
TAGC_END_NAMESPACE
