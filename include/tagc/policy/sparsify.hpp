#pragma once
// defines: tagc::SparsifyPolicy and its kernels — error feedback plus a threshold
//          that makes at least a fraction `sparsity` (theta) of the entries zero.
//
// The threshold is the k-th largest |g + residual| (k = floor((1 - theta) n)),
// found *exactly* by a three-pass radix select over the float bit patterns
// (10 + 11 + 10 bits): each pass histograms the digits of the elements whose
// higher digits match the prefix chosen so far, and a one-thread kernel picks the
// next digit. The prefix never leaves device memory, so there is no host round
// trip per probe, and entries strictly above the threshold are kept: the kept
// count never exceeds k, i.e. the target sparsity is met, never undershot (the
// reference bisects over a fixed ladder with a host sync per probe and keeps up
// to 2.5x too many).
//
// Histograms are privatised (several copies, chosen by OpenMP thread or CUDA
// block) so that the atomics of one pass rarely contend.

#include <cstdint>
#include <cuda/atomic>
#include <cuda/std/span>

#include "../core/bits.hpp"
#include "../core/config.hpp"

#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#  include <omp.h>
#endif

TAGC_BEGIN_NAMESPACE

// Tag: error feedback + exact radix-select threshold (the default and only
// selection today; a paper-faithful bisection would be another tag here).
struct SparsifyPolicy {
  static constexpr const char* name = "radix-select threshold + error feedback";
};

// The paper pairs sparsity with sketch ratio: 2x/80%, 4x/90%, 10x/98.75%.
inline constexpr double default_sparsity(int sketch_ratio) {
  switch (sketch_ratio) {
    case 2: return 0.80;
    case 4: return 0.90;
    case 10: return 0.9875;
    default: return 1.0 - 0.125 / double(sketch_ratio);
  }
}

namespace kernels {

inline constexpr int select_passes = 3;
inline constexpr int hist_bins = 2048;   // enough for the widest digit (11 bits)
inline constexpr int hist_copies = 16;   // privatised copies

// Digit layout of the 31 magnitude bits: [30:21] [20:10] [9:0].
TAGC_HOST_DEVICE constexpr int digit_shift(int pass) { return pass == 0 ? 21 : pass == 1 ? 10 : 0; }
TAGC_HOST_DEVICE constexpr int digit_bits(int pass) { return pass == 1 ? 11 : 10; }

// Device-resident selection state; lives in the Reducer's workspace.
struct select_state {
  std::uint32_t prefix;      // digits chosen so far
  std::uint32_t remaining;   // rank of the target within the current prefix bucket (1-based)
  std::uint32_t threshold;   // final |x| bit pattern; keep entries strictly above it
  std::uint32_t nonfinite;   // count of NaN/Inf in g + residual (pass 0)
};

TAGC_HOST_DEVICE inline int histogram_copy() {
#if defined(__CUDA_ARCH__)
  return int(blockIdx.x % hist_copies);
#elif defined(_OPENMP)
  return omp_get_thread_num() % hist_copies;
#else
  return 0;
#endif
}

// Pass `pass` of the radix select over u = bits(|grad + residual|).
struct histogram_pass {
  const float* grad;
  const float* residual;
  std::uint32_t* hist;  // [hist_copies][hist_bins]
  select_state* state;
  int pass;

  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t u = abs_bits(grad[i] + residual[i]);
    if (pass == 0) {
      if (u >= inf_bits) {
        cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> nf(state->nonfinite);
        nf.fetch_add(1u, cuda::memory_order_relaxed);
      }
    } else if ((u >> (digit_shift(pass) + digit_bits(pass))) != state->prefix) {
      return;
    }
    const std::uint32_t digit = (u >> digit_shift(pass)) & ((1u << digit_bits(pass)) - 1u);
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> h(hist[histogram_copy() * hist_bins + digit]);
    h.fetch_add(1u, cuda::memory_order_relaxed);
  }
};

// One thread: choose the digit of `pass` that contains the target rank, then
// clear the histogram for the next pass.
struct select_digit {
  std::uint32_t* hist;
  select_state* state;
  int pass;

  TAGC_HOST_DEVICE void operator()(int) const {
    const int bins = 1 << digit_bits(pass);
    std::uint32_t k = state->remaining;
    std::uint32_t chosen = 0;
    if (k != 0) {
      std::uint32_t above = 0;
      for (int b = bins - 1; b >= 0; --b) {
        std::uint32_t c = 0;
        for (int cp = 0; cp < hist_copies; ++cp) c += hist[cp * hist_bins + b];
        if (above + c >= k) {
          chosen = std::uint32_t(b);
          k -= above;
          break;
        }
        above += c;
      }
    }
    state->remaining = k;
    state->prefix = (state->prefix << digit_bits(pass)) | chosen;
    // The host starts the search at rank k + 1 (1 <= k < n), so the final prefix
    // is the (k+1)-th largest |x|: exactly k entries lie strictly above it when
    // there are no ties, fewer when there are (ties stay in the residual).
    if (pass == select_passes - 1) state->threshold = state->prefix;
    for (int cp = 0; cp < hist_copies; ++cp)
      for (int b = 0; b < bins; ++b) hist[cp * hist_bins + b] = 0;
  }
};

// One thread each: reset the selection state and the call's counters; start a
// search for the entry of rank `remaining`; or fix the threshold without one.
struct init_select {
  select_state* state;
  unsigned long long* counters;
  std::size_t n_counters;
  std::uint32_t remaining;
  std::uint32_t threshold;
  TAGC_HOST_DEVICE void operator()(std::size_t) const {
    *state = select_state{0u, remaining, threshold, 0u};
    for (std::size_t i = 0; i < n_counters; ++i) counters[i] = 0ull;
  }
};
struct start_select {
  select_state* state;
  std::uint32_t remaining;
  TAGC_HOST_DEVICE void operator()(std::size_t) const {
    state->prefix = 0u;
    state->remaining = remaining;
  }
};
struct fix_threshold {
  select_state* state;
  std::uint32_t threshold;
  TAGC_HOST_DEVICE void operator()(std::size_t) const { state->threshold = threshold; }
};

// Is element i of the accumulated gradient kept by the threshold?
TAGC_HOST_DEVICE inline bool is_kept(float acc, std::uint32_t threshold) { return abs_bits(acc) > threshold; }

}  // namespace kernels
TAGC_END_NAMESPACE
