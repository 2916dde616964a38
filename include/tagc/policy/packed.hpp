#pragma once
// defines: tagc::PackedPolicy (functors: detail/packed_kernels.hpp) — exchange the values at the
//          union positions densely instead of sketching them.
//
// Once every rank holds the same reduced index (it is all-reduced), every rank
// knows, for every shard, which positions are marked and in which order. Each
// rank writes its values at those positions into a dense vector per shard
// (position = prefix count of marks, a scan over the index bytes) and the
// vectors are reduce-scattered: the owner receives, slot by slot, the exact sum.
// No hashing, no peeling, nothing unresolved — and |union| is usually far below
// the n / ratio cells of a sketch (10x with theta = 98.75% sends 3.2 bits per
// parameter for the sketch; the union of 4 ranks is at most 5% of the entries,
// 1.6 bits). Shards have different union sizes; all are padded to the largest,
// which every rank can compute from the index.
//
// Takes the place of SketchPolicy in the Reducer; the DecodePolicy is then unused.
//
// Low precision: PackedValuesPolicy<bfloat16> (PackedBf16Policy) and
// PackedValuesPolicy<float16> (PackedFp16Policy) send each value rounded to 16
// bits (half the value bytes). The rounding error of a rank's own value goes
// back to its residual (residual = acc - bf16(acc)), so nothing of what a rank
// contributes is lost; the sum across ranks is rounded by the collective at
// each step (as NCCL's 16-bit reduce-scatter does), and that rounding — a few
// parts in a thousand of the sum for bf16, 8x less for fp16 — is not fed back.
// fp16 values travel scaled by a power of two 2^k that all ranks agree on every
// call (from the largest |acc| of any rank, exchanged in the agreement check):
// no sum of N slots can overflow fp16's 65504, and small values stay out of its
// subnormals (policy/wire_value.hpp). fp16 therefore needs check_inputs.

#include <cstdint>
#include <type_traits>

#include "../core/bfloat16.hpp"
#include "../core/config.hpp"
#include "../shard/layout.hpp"
#include "index.hpp"
#include "wire_value.hpp"

TAGC_BEGIN_NAMESPACE

template <class Value = float>
struct PackedValuesPolicy {
  static_assert(wire_value<Value>, "tagc: PackedValuesPolicy<Value>: Value is float, tagc::bfloat16 or tagc::float16");
  using value_type = Value;
};
using PackedPolicy = PackedValuesPolicy<float>;
using PackedBf16Policy = PackedValuesPolicy<bfloat16>;
using PackedFp16Policy = PackedValuesPolicy<float16>;

TAGC_END_NAMESPACE
