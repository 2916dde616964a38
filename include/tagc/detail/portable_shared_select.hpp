#pragma once
// defines: tagc::detail::portable_shared_select<Exec> — the shared selection's
//          (stage/shared_selection.hpp) leader marks and position lists as bulk
//          launches of the single-source functors (select_kernels.hpp,
//          shared_kernels.hpp): what a GPU runs, and exec::host_portable on a CPU.
//
// The leader: a three-pass radix select over |acc| (the threshold never leaves
// the space's memory: no host round trip per pass), then one launch per bitmap
// word marking the entries above it. Any rank: a bitmap becomes a list by a scan
// of its words' mark counts (CUB on a device, one sequential pass on the host)
// and one launch per word writing its positions.

#include <cstddef>
#include <cstdint>

#include <thrust/fill.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#if defined(__CUDACC__)
#  include <cub/device/device_scan.cuh>

#  include "../exec/cuda.hpp"  // TAGC_CUDA_TRY
#endif

#include "../core/bits.hpp"
#include "../core/status.hpp"
#include "launch.hpp"
#include "select_kernels.hpp"
#include "shared_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

template <class Exec>
class portable_shared_select {
 public:
  template <class T> using vector = typename Exec::template vector<T>;

  // For buffers of `length` entries (bitmaps of (length + 31) / 32 words).
  status initialize(std::size_t length, Exec exec) {
    launch_ = {exec};
    n_ = length;
    words_ = (length + 31) / 32;
    hist_.assign(std::size_t(hist_copies) * hist_bins, 0u);
    state_.resize(1);
    offsets_.assign(words_ + 1, 0u);
#if defined(__CUDACC__)
    if constexpr (Exec::is_device) {
      std::size_t bytes = 0;
      TAGC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, marks_of(nullptr), raw(offsets_), int(words_ + 1),
                                                  exec.stream));
      scan_temp_.assign(bytes ? bytes : 1, 0);
    }
#endif
    return {};
  }
  std::size_t workspace_bytes() const {
    return buffer_bytes(hist_) + buffer_bytes(state_) + buffer_bytes(offsets_) + buffer_bytes(scan_temp_);
  }
  // What initialize allocates, before it does (the reducers' workspace query; on a
  // device, but for CUB's scan temporary, a few KiB queried there).
  static std::size_t workspace_bytes_for(std::size_t length) {
    const std::size_t words = (length + 31) / 32;
    return std::size_t(hist_copies) * hist_bins * sizeof(std::uint32_t) + sizeof(select_state) +
           (words + 1) * sizeof(std::uint32_t);
  }

  // The leader: `words` marks |acc| > the (k+1)-th largest |acc| (every position
  // when k >= length, none but NaN when k = 0), that threshold into *threshold_out.
  void mark(const float* acc, std::size_t k, std::uint32_t* words, std::uint32_t* threshold_out) {
    threshold(acc, k);
    launch_(words_, mark_word{acc, raw(state_), k >= n_, n_, words, threshold_out});
  }

  // The bitmap `words` as k list slots: a scan of the words' marks, then each word
  // writes its positions (at most k: a damaged bitmap cannot overrun the list).
  void to_list(const std::uint32_t* words, std::uint32_t* list, std::size_t k) {
    thrust::fill(launch_.exec.policy(), list, list + std::ptrdiff_t(k), no_position);
    std::uint32_t* offsets = raw(offsets_);
    if constexpr (Exec::is_device) {
#if defined(__CUDACC__)
      // CUB into scan_temp_ (thrust::exclusive_scan would cudaMalloc / cudaFree its
      // temporaries on every call); an error shows at the space's synchronize().
      std::size_t bytes = scan_temp_.size();
      (void)cub::DeviceScan::ExclusiveSum(raw(scan_temp_), bytes, marks_of(words), offsets, int(words_ + 1),
                                          launch_.exec.stream);
#endif
    } else {
      // The host: one sequential pass over n / 32 words (a popcount each).
      const bitmap_word_marks marks{words, words_};
      std::uint32_t at = 0;
      for (std::size_t w = 0; w <= words_; ++w) {
        offsets[w] = at;
        at += marks(w);
      }
    }
    launch_(words_, expand_word{words, offsets, list, k});
  }

 private:
  // The (k+1)-th largest |acc| into state_->threshold (k = 0: inf_bits, nothing but
  // NaN above it; k >= n: left so, mark_word then keeps everything).
  void threshold(const float* acc, std::size_t k) {
    select_state* st = raw(state_);
    thrust::fill(launch_.exec.policy(), hist_.begin(), hist_.end(), 0u);
    launch_(1, init_select{st, nullptr, 0, 0u, inf_bits});
    if (k == 0 || k >= n_) return;
    launch_(1, start_select{st, std::uint32_t(k + 1)});
    for (int pass = 0; pass < select_passes; ++pass) {
      launch_(n_, acc_histogram_pass{acc, raw(hist_), st, pass});
      launch_(1, select_digit{raw(hist_), st, pass});
    }
  }

  auto marks_of(const std::uint32_t* words) const {
    return thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0), bitmap_word_marks{words, words_});
  }

  launcher<Exec> launch_{};
  std::size_t n_ = 0, words_ = 0;
  vector<std::uint32_t> hist_;       // the radix select's histograms
  vector<select_state> state_;       // its threshold search
  vector<std::uint32_t> offsets_;    // scan of marks per bitmap word
  vector<unsigned char> scan_temp_;  // CUB's scan workspace (CUDA only)
};

}  // namespace detail
TAGC_END_NAMESPACE
