#pragma once
// defines: the radix-select threshold and residual-storage functors (SparsifyPolicy).
//          Implementation detail of the Reducer's stages (include/tagc/stage/);
//          users read the policy tags in policy/*.hpp, not this file.

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <type_traits>
#include <vector>
#include <cuda/atomic>
#include <cuda/std/span>

#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#  include <omp.h>
#endif

#include "../core/bfloat16.hpp"
#include "../core/bits.hpp"
#include "../core/config.hpp"
#include "../core/murmur3.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {


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
  std::uint32_t top_bin;     // 1 + highest non-empty pass-0 bin (top 10 bits of |acc|), 0 if none; see find_top_bin
};

// ---- residual storage ----

// Stochastic rounding of a float to bf16: the 16 dropped bits decide, against
// 16 random bits, whether the magnitude rounds up (probability dropped / 2^16)
// or is truncated, so E[result] = f exactly. Adding to the magnitude bits of a
// sign-magnitude number carries into the exponent as rounding up should. NaN
// and Inf round to nearest; a finite value is never rounded up to Inf.
TAGC_HOST_DEVICE inline std::uint16_t bf16_bits_stochastic(float f, std::uint32_t random) {
  const std::uint32_t u = cuda::std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) >= 0x7f800000u) return bf16_bits_from_float(f);
  const std::uint16_t up = std::uint16_t((u + (random & 0xffffu)) >> 16);
  return (up & 0x7fffu) == 0x7f80u ? std::uint16_t(u >> 16) : up;
}

// The random bits of one residual store: a hash of the element, the call's
// seed (step and rank, see residual_seed) and the store site.
enum class residual_site : std::uint32_t { update = 0, owed_estimate = 1 };
TAGC_HOST_DEVICE inline std::uint32_t residual_seed(std::uint64_t step, int rank) {
  return murmur3_32(std::uint32_t(step) ^ murmur3_32(std::uint32_t(step >> 32), 0x5eedu), std::uint32_t(rank));
}
TAGC_HOST_DEVICE inline std::uint32_t residual_random(std::size_t g, std::uint32_t seed, residual_site site) {
  return murmur3_32(std::uint32_t(g), seed ^ (std::uint32_t(site) * 0x9e3779b9u));
}

// Read and write one residual entry of storage type R (float: plain).
template <class R>
TAGC_HOST_DEVICE inline float residual_load(const R* residual, std::size_t g) {
  return float(residual[g]);
}
template <class R>
TAGC_HOST_DEVICE inline void residual_store(R* residual, std::size_t g, float v, std::uint32_t seed, residual_site site) {
  if constexpr (std::is_same_v<R, float>) {
    (void)seed;
    (void)site;
    residual[g] = v;
  } else {
    residual[g] = R::from_bits(bf16_bits_stochastic(v, residual_random(g, seed, site)));
  }
}

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
template <class R = float>
struct histogram_pass {
  const float* grad;
  const R* residual;
  std::uint32_t* hist;  // [hist_copies][hist_bins]
  select_state* state;
  int pass;

  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t u = abs_bits(grad[i] + residual_load(residual, i));
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

// The owner's estimates go into its residual with the opposite sign (as
// decode.hpp's owe_estimates), for a residual stored in R (bf16: rounded
// stochastically, its own store site).
template <class R>
struct owe_estimates_stored {
  const std::uint8_t* state;  // decode state per shard entry; 1 = unresolved
  const float* out;           // unscaled estimates
  R* residual;                // the owner's whole residual
  std::size_t first;          // global index of the shard's first entry
  std::size_t length;
  std::uint32_t seed;
  TAGC_HOST_DEVICE void operator()(std::size_t e) const {
    if (state[e] != 1 || first + e >= length) return;
    residual_store(residual, first + e, residual_load(residual, first + e) - out[e], seed, residual_site::owed_estimate);
  }
};

// One thread, after pass 0 and before select_digit clears the histogram: the
// highest non-empty bin, i.e. the exponent (and 2 mantissa bits) of max |acc|.
// fp16 values agree their scale from it (values exchanged as x * 2^k).
struct find_top_bin {
  const std::uint32_t* hist;
  select_state* state;
  TAGC_HOST_DEVICE void operator()(std::size_t) const {
    std::uint32_t top = 0;
    for (int b = (1 << digit_bits(0)) - 1; b >= 0 && top == 0; --b)
      for (int cp = 0; cp < hist_copies; ++cp)
        if (hist[cp * hist_bins + b] != 0) {
          top = std::uint32_t(b) + 1u;
          break;
        }
    state->top_bin = top;
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
    *state = select_state{0u, remaining, threshold, 0u, 0u};
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

}  // namespace detail
TAGC_END_NAMESPACE
