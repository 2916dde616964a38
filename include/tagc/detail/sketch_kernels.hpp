#pragma once
// defines: the count-sketch hashing, the bucket map and the gather build (SketchPolicy).
//          Implementation detail of the Reducer's stages (include/tagc/stage/);
//          users read the policy tags in policy/*.hpp, not this file.

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <type_traits>
#include <vector>
#include <cuda/atomic>
#include <cuda/std/span>

#include "../core/config.hpp"
#include "../core/murmur3.hpp"
#include "../shard/layout.hpp"
#include "index_kernels.hpp"
#include "wire_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {


// Row within partition h, and sign, of block j.
TAGC_HOST_DEVICE inline std::uint32_t sketch_hash(std::uint32_t block, int h) {
  return murmur3_32(block, std::uint32_t(h));
}
TAGC_HOST_DEVICE inline std::size_t sketch_row(std::uint32_t hash, std::size_t part_rows, int h) {
  return std::size_t(h) * part_rows + std::size_t(hash % std::uint32_t(part_rows));
}
TAGC_HOST_DEVICE inline float sketch_sign(std::uint32_t hash) { return (hash >> 31) ? -1.0f : 1.0f; }
TAGC_HOST_DEVICE inline std::size_t sketch_rotation(std::uint32_t block, int h, std::size_t lanes) {
  return std::size_t(murmur3_32(block, std::uint32_t(h + 3)) % std::uint32_t(lanes));
}
// Cell of shard element e in partition h, and its sign.
TAGC_HOST_DEVICE inline std::size_t sketch_cell(const layout& l, std::size_t e, int h) {
  const auto j = std::uint32_t(e / l.lanes);
  const std::size_t lane = (e % l.lanes + sketch_rotation(j, h, l.lanes)) % l.lanes;
  return sketch_row(sketch_hash(j, h), l.part_rows, h) * l.lanes + lane;
}
TAGC_HOST_DEVICE inline float sketch_sign_of(const layout& l, std::size_t e, int h) {
  return sketch_sign(sketch_hash(std::uint32_t(e / l.lanes), h));
}

// The inverse of the block -> row map, built once on the host:
// blocks of row r are order[start[r] .. start[r+1]) for global row r in [0, 3p).
struct sketch_buckets {
  std::vector<std::uint32_t> start;  // 3p + 1
  std::vector<std::uint32_t> order;  // 3 * blocks
  // The most blocks of one row: no cell of one rank sums more values than this
  // (one per block), which bounds the fp16 range scale.
  std::size_t max_row_blocks() const {
    std::size_t m = 0;
    for (std::size_t r = 0; r + 1 < start.size(); ++r) m = std::max<std::size_t>(m, start[r + 1] - start[r]);
    return m;
  }
};

inline sketch_buckets make_sketch_buckets(const layout& l) {
  sketch_buckets b;
  if (l.dense || l.blocks == 0) return b;
  const std::size_t rows = l.sketch_rows();
  b.start.assign(rows + 1, 0);
  b.order.resize(3 * l.blocks);
  for (int h = 0; h < 3; ++h)
    for (std::uint32_t j = 0; j < l.blocks; ++j) ++b.start[sketch_row(sketch_hash(j, h), l.part_rows, h) + 1];
  for (std::size_t r = 0; r < rows; ++r) b.start[r + 1] += b.start[r];
  std::vector<std::uint32_t> fill(b.start.begin(), b.start.end() - 1);
  for (int h = 0; h < 3; ++h)  // ascending j within each row: a fixed summation order
    for (std::uint32_t j = 0; j < l.blocks; ++j) b.order[fill[sketch_row(sketch_hash(j, h), l.part_rows, h)]++] = j;
  return b;
}

// One run of `chunk` consecutive cells of one sketch row per call, over all
// shards. The per-block work (two hashes, sign, rotation) is done once per block
// and shared by the chunk's lanes: a GPU launches one cell per thread (chunk 1,
// coalesced across threads), a CPU thread takes a whole row (chunk = lanes, a
// vectorisable inner loop). Cells are written exactly once, in a fixed order.
// Value: each value is rounded to the wire type (scaled by 2^k) before it is
// added, so the cell holds the exact fp32 sum of what the sender accounts as
// sent; the cell itself is rounded afterwards (round_cells).
template <class Value = float, class Contribution = contribution<>>
struct build_sketch {
  Contribution value;
  const std::uint32_t* start;
  const std::uint32_t* order;
  float* sketch;      // [shards][cells]
  std::size_t chunk;  // lanes per call (divides lanes or covers the tail)
  float wire_scale = 1.0f;  // 2^k (fp16), else 1

  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const layout& l = value.lay;
    if (l.dense) {  // one element per call
      const std::size_t s = i / l.cells, c = i % l.cells;
      sketch[i] = wire_round<Value>(value(s, c) * wire_scale);
      return;
    }
    const std::size_t chunks_per_row = (l.lanes + chunk - 1) / chunk;
    const std::size_t rows = l.sketch_rows();
    const std::size_t s = i / (rows * chunks_per_row);
    const std::size_t rest = i % (rows * chunks_per_row);
    const std::size_t row = rest / chunks_per_row;
    const std::size_t lane0 = (rest % chunks_per_row) * chunk;
    const std::size_t lane1 = lane0 + chunk < l.lanes ? lane0 + chunk : l.lanes;
    const int h = int(row / l.part_rows);
    float* out = sketch + s * l.cells + row * l.lanes;
    for (std::size_t lane = lane0; lane < lane1; ++lane) out[lane] = 0.0f;
    for (std::uint32_t k = start[row]; k < start[row + 1]; ++k) {
      const std::uint32_t j = order[k];
      const float sign = sketch_sign(sketch_hash(j, h));
      const std::size_t rot = sketch_rotation(j, h, l.lanes);
      const std::size_t base = std::size_t(j) * l.lanes;
      for (std::size_t lane = lane0; lane < lane1; ++lane) {
        const std::size_t e = base + (lane >= rot ? lane - rot : lane + l.lanes - rot);
        if (e >= l.shard_size) continue;
        const float v = value(s, e);
        if (v != 0.0f) out[lane] += sign * wire_round<Value>(v * wire_scale);
      }
    }
  }
  static std::size_t calls(const layout& l, std::size_t chunk) {
    if (l.dense) return std::size_t(l.shards) * l.cells;
    return std::size_t(l.shards) * l.sketch_rows() * ((l.lanes + chunk - 1) / chunk);
  }
};

}  // namespace detail
TAGC_END_NAMESPACE
