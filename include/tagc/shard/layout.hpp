#pragma once
// defines: tagc::topology, tagc::layout, tagc::make_layout — how a flat gradient
//          of `length` elements is cut into shards, blocks and lanes.
//
//   padded  = shards * shard_size            (shard_size = ceil(length / shards))
//   shard s = elements [s * shard_size, (s+1) * shard_size); tail padding is zero
//   inside a shard, element e = block * lanes + lane   (lanes = min(B, shard_size))
//
// The count sketch of one shard has 3 partitions of p rows each; a block hashes
// to one row per partition, so the three cells of an element are always distinct
// (a plain `h mod r` can send two of an element's hashes to the same row and make
// it unpeelable). p is chosen so that 3 * p * lanes ~ shard_size / ratio. When
// that would not be smaller than the shard itself (tiny shards), the shard is
// exchanged densely instead: exact, and never larger than the plain collective.
//
// Every length works, including 0, odd lengths and lengths below the block size:
// padding is explicit here and every rank derives the same layout, so all ranks
// issue the same collectives with the same counts.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../core/config.hpp"

TAGC_BEGIN_NAMESPACE

enum class topology {
  sharded,     // reduce-scatter: rank r receives shard r (ZeRO-3 / FSDP)
  replicated,  // all-reduce: every rank receives everything (DDP)
};

struct layout {
  std::size_t length = 0;      // caller's elements
  int shards = 1;              // world size (sharded) or 1 (replicated)
  std::size_t shard_size = 0;  // elements per shard, incl. padding
  std::size_t lanes = 0;       // B: sketch columns, independent peeling problems
  std::size_t blocks = 0;      // rows of the shard seen as [blocks x lanes]
  std::size_t part_rows = 0;   // p: sketch rows per hash partition
  bool dense = true;           // exchange the shard uncompressed (sketch would not be smaller)
  std::size_t cells = 0;       // sketch cells per shard (== shard_size when dense)
  int index_bits = 4;
  std::size_t index_bytes = 0; // index bytes per shard

  TAGC_HOST_DEVICE std::size_t padded() const { return shard_size * std::size_t(shards); }
  TAGC_HOST_DEVICE std::size_t sketch_rows() const { return 3 * part_rows; }
};

TAGC_HOST_DEVICE inline constexpr std::size_t ceil_div(std::size_t a, std::size_t b) { return b ? (a + b - 1) / b : 0; }

inline layout make_layout(std::size_t length, int shards, std::size_t block_lanes, int ratio, int index_bits) {
  layout l;
  l.length = length;
  l.shards = std::max(shards, 1);
  l.shard_size = ceil_div(length, std::size_t(l.shards));
  l.lanes = std::min<std::size_t>(block_lanes, l.shard_size);
  l.blocks = ceil_div(l.shard_size, l.lanes);
  const std::size_t rows = ceil_div(l.blocks, std::size_t(ratio));
  l.part_rows = std::max<std::size_t>(1, ceil_div(rows, 3));
  const std::size_t sketch_cells = 3 * l.part_rows * l.lanes;
  l.dense = sketch_cells >= l.shard_size;
  l.cells = l.dense ? l.shard_size : sketch_cells;
  l.index_bits = index_bits;
  l.index_bytes = ceil_div(l.shard_size * std::size_t(index_bits), 8);
  return l;
}

TAGC_END_NAMESPACE
