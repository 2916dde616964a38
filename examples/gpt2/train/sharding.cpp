// sharding.cpp: see sharding.hpp.
// defines: train::ShardPlan
#include "sharding.hpp"

#include <algorithm>
#include <stdexcept>

namespace train {

ShardPlan::ShardPlan(const std::vector<gpt2::UnitInfo>& units, int world, int rank) : world_(world), rank_(rank) {
  if (world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("ShardPlan: bad rank/world");
  for (const auto& ui : units) {
    UnitShards us;
    us.name = ui.name;
    us.size = ui.size;
    const size_t lens[2] = {ui.compressible_size, ui.size - ui.compressible_size};
    size_t offset = 0;
    for (int s = 0; s < 2; ++s) {
      Segment& g = us.seg[s];
      g.offset = offset;
      g.length = lens[s];
      g.shard = (lens[s] + size_t(world) - 1) / size_t(world);
      g.owned = owned_size_;
      g.compressible = s == 0;
      owned_size_ += g.shard;
      offset += lens[s];
    }
    units_.push_back(us);
  }
}

size_t ShardPlan::gather_capacity(int u) const {
  const UnitShards& us = unit(u);
  // The suffix is gathered last and its padding spills past the unit's end.
  return std::max(us.seg[0].padded(world_), us.seg[1].offset + us.seg[1].padded(world_));
}

size_t ShardPlan::max_gather_capacity() const {
  size_t m = 0;
  for (int u = 0; u < num_units(); ++u) m = std::max(m, gather_capacity(u));
  return m;
}

void ShardPlan::scatter_unit(int u, std::span<const float> full_unit, std::span<float> owned) const {
  const UnitShards& us = unit(u);
  for (const Segment& g : us.seg) {
    const size_t begin = size_t(rank_) * g.shard;
    for (size_t i = 0; i < g.shard; ++i) {
      const size_t e = begin + i;
      owned[g.owned + i] = e < g.length ? full_unit[g.offset + e] : 0.0f;
    }
  }
}

}  // namespace train
