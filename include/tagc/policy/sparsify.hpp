#pragma once
// defines: tagc::SparsifyPolicy, tagc::SparsifyBf16ResidualPolicy
//          (= tagc::BasicSparsifyPolicy<float | bfloat16>) (functors: detail/select_kernels.hpp) —
//          error feedback plus a threshold that makes at least a fraction
//          `sparsity` (theta) of the entries zero.
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
//
// Residual storage: BasicSparsifyPolicy<bfloat16> keeps the error-feedback
// residual in bf16 (half the memory of the Reducer's largest buffer). All
// arithmetic stays in fp32 (acc = g + float(residual)); only the store rounds.
// Round-to-nearest would drop every update smaller than half a bf16 ulp of the
// residual it is added to, forever (a residual of 1.0 absorbs nothing below
// 2^-9 of it); the store therefore rounds *stochastically*: up with probability
// (dropped bits) / 2^16, so the stored residual is an unbiased estimate of the
// fp32 one. The random bits are a counter-based hash of (element, step, rank,
// store site): no generator state, the same bits on every execution space, and
// a resumed run (the step counter is part of save_state) rounds as the
// uninterrupted one would.

#include <cstdint>
#include <type_traits>

#include "../core/bfloat16.hpp"
#include "../core/bits.hpp"
#include "../core/config.hpp"
#include "../core/murmur3.hpp"

TAGC_BEGIN_NAMESPACE

// Tag: error feedback + exact radix-select threshold (the default and only
// selection today; a paper-faithful bisection would be another tag here), with
// the residual stored as `Residual` (float, or bfloat16 with stochastic rounding).
template <class Residual = float>
struct BasicSparsifyPolicy {
  static_assert(std::is_same_v<Residual, float> || std::is_same_v<Residual, bfloat16>,
                "tagc: BasicSparsifyPolicy<Residual>: Residual is float or tagc::bfloat16");
  using residual_type = Residual;
  static constexpr const char* name = "radix-select threshold + error feedback";
};
using SparsifyPolicy = BasicSparsifyPolicy<float>;
using SparsifyBf16ResidualPolicy = BasicSparsifyPolicy<bfloat16>;

// The paper pairs sparsity with sketch ratio: 2x/80%, 4x/90%, 10x/98.75%.
inline constexpr double default_sparsity(int sketch_ratio) {
  switch (sketch_ratio) {
    case 2: return 0.80;
    case 4: return 0.90;
    case 10: return 0.9875;
    default: return 1.0 - 0.125 / double(sketch_ratio);
  }
}

TAGC_END_NAMESPACE
