#pragma once
// defines: rounding of values to the wire type and the cell conversions.
//          Implementation detail of the Reducer's stages (include/tagc/stage/);
//          users read the policy tags in policy/*.hpp, not this file.

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <type_traits>
#include <vector>
#include <cuda/atomic>
#include <cuda/std/span>

#include "../core/bfloat16.hpp"
#include "../core/bits.hpp"
#include "../core/config.hpp"
#include "../core/float16.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {


// 2^k for k in [-126, 127], exactly.
TAGC_HOST_DEVICE inline float pow2(int k) { return float_from_bits(std::uint32_t(127 + k) << 23); }

// x (already scaled) as it arrives after the rounding to V, back in float.
template <class V>
TAGC_HOST_DEVICE inline float wire_round(float x) {
  if constexpr (std::is_same_v<V, float>) return x;
  else return float(V(x));
}

// Round float cells to the wire type (sketch policies, one cell per call).
template <class V>
struct round_cells {
  const float* in;
  V* out;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const { out[i] = V(in[i]); }
};
// And back, unscaled, for fp32 decoding.
template <class V>
struct widen_cells {
  const V* in;
  float* out;
  float unscale;  // 2^-k
  TAGC_HOST_DEVICE void operator()(std::size_t i) const { out[i] = float(in[i]) * unscale; }
};
// |float cell - wire cell|: the rounding of a cell sum that no residual gets back.
template <class V>
struct cell_rounding {
  const float* exact;
  const V* rounded;
  TAGC_HOST_DEVICE double operator()(std::size_t i) const {
    const double d = double(exact[i]) - double(float(rounded[i]));
    return d < 0 ? -d : d;
  }
};

}  // namespace detail
TAGC_END_NAMESPACE
