#pragma once
// defines: tagc::int8_blocks — the int8 block code for the parameter all-gather: each
//          rank encodes its fp32 shard into blocks of int8 codes with one fp32 scale
//          each, the ranks all-gather the bytes, every rank decodes the W pieces.
//
// Why: a sharded job (ZeRO-3 / FSDP) gathers its parameters every step, and once the
// gradients are compressed the gather is what crosses the nodes: at 25 Gbit/s a node's
// bf16 gather of GPT-2 124M takes about a third of an H100's step (docs/results.md,
// "Scaling"). Only the copy the model computes with is coded; the master weights stay
// fp32 in the owner's shard, so no coding error accumulates over the steps. This is the
// idea of ZeRO++'s quantized weight communication (qwZ): per-block scales keep a block's
// error relative to its own largest weight, where one scale per tensor would let one
// outlier coarsen every weight.
//
// Format of one rank's piece of n values, piece_bytes(n) bytes: ceil(n / 256) blocks of
// 260 bytes, each its scale (fp32, max |x| / 127) then 256 codes (int8, x / scale rounded
// to the nearest, ties away from zero, in [-127, 127]; a short last block padded with 0):
// 8.125 bits a value, 0.51x bf16. A value decodes to code x scale, within scale / 2 of x.
// A block of zeros has scale 0 and decodes to zeros. A block holding NaN or Inf gets a NaN
// scale and decodes to NaN throughout: a non-finite weight stays visible, never clipped.
// The arithmetic is a product and a rounding per value, the same on every execution space.

#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/config.hpp"
#include "detail/launch.hpp"

TAGC_BEGIN_NAMESPACE

namespace int8_blocks {

inline constexpr std::size_t block = 256;                             // values per scale
inline constexpr std::size_t block_bytes = sizeof(float) + block;     // scale + codes
static_assert(block_bytes % alignof(float) == 0, "every block's scale must stay aligned in a piece");

// Bytes of one rank's piece of n values.
TAGC_HOST_DEVICE constexpr std::size_t piece_bytes(std::size_t n) { return (n + block - 1) / block * block_bytes; }

namespace detail {

// Encodes block b of x[0, n) into piece + b * block_bytes.
struct encode_block {
  const float* x;
  std::size_t n;
  std::uint8_t* piece;
  TAGC_HOST_DEVICE void operator()(std::size_t b) const {
    const std::size_t first = b * block, count = n - first < block ? n - first : block;
    float amax = 0.0f;
    bool finite = true;
    for (std::size_t i = 0; i < count; ++i) {
      const float v = x[first + i], a = v < 0.0f ? -v : v;
      finite = finite && a <= std::numeric_limits<float>::max();  // false for NaN and Inf
      amax = a > amax ? a : amax;
    }
    std::uint8_t* out = piece + b * block_bytes;
    *reinterpret_cast<float*>(out) = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    std::int8_t* codes = reinterpret_cast<std::int8_t*>(out + sizeof(float));
    const float inv = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
    for (std::size_t i = 0; i < block; ++i) {
      // |q| <= 127 up to rounding, so the truncating casts below are defined
      const float q = i < count && inv > 0.0f ? x[first + i] * inv : 0.0f;
      const int c = q < 0.0f ? -int(0.5f - q) : int(q + 0.5f);  // nearest, ties away from zero
      codes[i] = std::int8_t(c > 127 ? 127 : (c < -127 ? -127 : c));
    }
  }
};

// out[i] for i in [0, n): value i % shard of piece i / shard (pieces of shard values each).
struct decode_value {
  const std::uint8_t* pieces;
  std::size_t shard, piece;
  float* out;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t r = i / shard, e = i - r * shard;
    const std::uint8_t* blk = pieces + r * piece + (e / block) * block_bytes;
    const float scale = *reinterpret_cast<const float*>(blk);
    out[i] = float(reinterpret_cast<const std::int8_t*>(blk + sizeof(float))[e % block]) * scale;
  }
};

}  // namespace detail

// x[0, n) into piece[0, piece_bytes(n)), on `exec`.
template <class Exec>
void encode(const Exec& exec, const float* x, std::size_t n, std::uint8_t* piece) {
  tagc::detail::launcher<Exec>{exec}((n + block - 1) / block, detail::encode_block{x, n, piece});
}

// `pieces`: W pieces of piece_bytes(shard) bytes, rank order (an all-gather of encode's
// output); out[0, n) with n <= W x shard: the first n decoded values (a gather cuts the
// last shard's padding).
template <class Exec>
void decode(const Exec& exec, const std::uint8_t* pieces, std::size_t shard, std::size_t n, float* out) {
  if (shard == 0) return;
  tagc::detail::launcher<Exec>{exec}(n, detail::decode_value{pieces, shard, piece_bytes(shard), out});
}

}  // namespace int8_blocks

TAGC_END_NAMESPACE
