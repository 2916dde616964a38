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
//   peeling        rounds over the support list (decode functors): resolve
//                  entries alone in a cell, claim / apply / release to serialise
//                  subtractions per cell; progress is checked every few rounds,
//                  not every round (a check is a host round trip on a GPU)
//   estimate       the conservative estimate for what is left
//
// Every buffer is sized in initialize(); run() allocates nothing.

#include <cstddef>
#include <cstdint>

#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>

#include "../core/status.hpp"
#include "../shard/layout.hpp"
#include "decode_counts.hpp"
#include "decode_kernels.hpp"
#include "support_words.hpp"

#if defined(__CUDACC__)
#  include <cub/device/device_scan.cuh>

#  include "../exec/cuda.hpp"  // TAGC_CUDA_TRY
#endif

TAGC_BEGIN_NAMESPACE
namespace detail {

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
#if defined(__CUDACC__)
    if constexpr (Exec::is_device) {
      std::size_t bytes = 0;
      TAGC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, raw_(word_counts_), raw_(word_offsets_) + 1,
                                                  int(words_), exec.stream));
      scan_temp_.assign(bytes ? bytes : 1, 0);
    }
#endif
    return {};
  }
  std::size_t workspace_bytes() const {
    return (count_.size() + ids_.size() + writer_.size() + support_.size() + edges_.size() + word_counts_.size() +
            word_offsets_.size()) * sizeof(std::uint32_t) + scan_temp_.size();
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
    if (peels) apply_rounds(v, m);
    d.support = m;
    d.unresolved = sum_over_support(m, count_state{v, entry_unresolved});
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
  template <class F> unsigned long long sum_over_support(std::size_t m, F f) const {
    if (m == 0) return 0;
    const std::uint32_t* list = thrust::raw_pointer_cast(support_.data());
    return thrust::transform_reduce(exec_.policy(), list, list + m, f, 0ull, thrust::plus<unsigned long long>());
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

  // Serialised subtraction rounds until every resolved entry has been subtracted
  // from its cells, or nothing moves any more.
  void apply_rounds(const decode_view& v, std::size_t m) {
    unsigned long long before = sum_over_support(m, work_left{v});
    const std::size_t max_rounds = 2 * m + 8;  // each productive round retires at least one unit of work
    for (std::size_t round = 0; before != 0 && round < max_rounds; ++round) {
      launch(m, peel_round{v});
      launch(m, claim_cells{v});
      launch(m, apply_resolved{v});
      launch(m, release_cells{v});
      if (round % check_every == check_every - 1) {
        const unsigned long long now = sum_over_support(m, work_left{v});
        // Only unresolved entries with no lone cell left: a stopping set.
        if (now == before && sum_over_support(m, count_state{v, entry_resolved}) == 0) break;
        before = now;
      }
    }
  }

  Exec exec_{};
  layout lay_{};
  std::size_t shard_ = 0, valid_ = 0, words_ = 0;
  vector<std::uint32_t> count_, ids_, writer_;  // [cells]
  vector<std::uint32_t> support_;               // [shard] support list
  vector<std::uint32_t> edges_;                 // [3 * shard] cached cells and signs of the support
  vector<std::uint32_t> word_counts_;           // [index words] marks per word
  vector<std::uint32_t> word_offsets_;          // [index words + 1] their inclusive scan, shifted by one
  vector<unsigned char> scan_temp_;             // CUB scan workspace (CUDA only)
};

}  // namespace detail
TAGC_END_NAMESPACE
