// sharding.hpp: FSDP FULL_SHARD bookkeeping — which elements of which unit this rank
// owns, and where they live in the rank's flat "owned" buffers.
//
// Every model unit (gpt2/layout.hpp) is cut into two segments: the compressible prefix
// [0, compressible_size) and the plain suffix [compressible_size, size). Each segment is
// padded explicitly to world * shard elements (shard = ceil(length / world), the same
// rule tagc's layout uses, so a tagc::Reducer's output shard is exactly our shard) and
// rank r owns elements [r * shard, (r + 1) * shard) of it; the padding is zero forever.
//
// Why two segments and not one: the prefix goes through a tagc::Reducer and the suffix
// through a plain reduce-scatter, and each needs its own shard boundaries.
//
// All owned shards of a rank are concatenated (unit by unit, prefix then suffix) into
// one flat buffer per quantity (params, grads, AdamW m and v), so the optimizer and the
// gradient norm run over one span.
#pragma once

#include "gpt2/layout.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace train {

struct Segment {
  size_t offset = 0;  // first element within the unit
  size_t length = 0;  // elements (unpadded)
  size_t shard = 0;   // elements each rank owns (padding included)
  size_t owned = 0;   // where this rank's shard starts in the owned flat buffers
  bool compressible = false;
  size_t padded(int world) const { return shard * size_t(world); }
};

struct UnitShards {
  std::string name;
  size_t size = 0;      // elements of the gathered unit
  Segment seg[2];       // [0] compressible prefix, [1] plain suffix (either may be empty)
};

class ShardPlan {
 public:
  ShardPlan(const std::vector<gpt2::UnitInfo>& units, int world, int rank);

  int world() const { return world_; }
  int rank() const { return rank_; }
  int num_units() const { return int(units_.size()); }
  const UnitShards& unit(int u) const { return units_[size_t(u)]; }
  size_t owned_size() const { return owned_size_; }
  // Elements of a gathered unit buffer: the unit plus room for the last segment's
  // padding, so an all-gather can write each padded segment straight into place.
  size_t gather_capacity(int u) const;
  size_t max_gather_capacity() const;

  // This rank's shard of a full (unsharded) unit: copies [r*shard, ...) of each segment
  // into owned, zero padding. And back: the inverse is an all-gather.
  void scatter_unit(int u, std::span<const float> full_unit, std::span<float> owned) const;

 private:
  int world_, rank_;
  std::vector<UnitShards> units_;
  size_t owned_size_ = 0;
};

}  // namespace train
