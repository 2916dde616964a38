// param_gathers.hpp: the parameter all-gathers of a two-level run (--ranks-per-node K > 1),
// one tagc::TwoLevelAllGather per distinct segment length.
// defines: train::ParamGathers<Exec>
//
// Why one per length and not one per segment: a TwoLevelAllGather is planned for one
// length (its two staging buffers hold M and M x K shards of it), and the segments of
// the model's units come in few lengths (every attention unit has the same two, every MLP
// unit too), and the worker runs one gather at a time, so segments of one length share
// the staging: at most 7 lengths (embedding, attention, MLP: prefix and suffix; the final
// norm), about (1 + 1/K) x (embedding + one attention + one MLP unit) elements per dtype,
// ~0.2 GB in fp32 for GPT-2 124M.
//
// fp32 gathers always exist (--save-model gathers the fp32 master); bf16 ones only with
// --gather-dtype bf16, int8 ones (the segment's coded pieces, tagc/int8_blocks.hpp) only
// with --gather-dtype int8. Every buffer is allocated here, at setup, never inside a step.
#pragma once

#include "sharding.hpp"

#include "tagc/core/bfloat16.hpp"
#include "tagc/core/status.hpp"
#include "tagc/int8_blocks.hpp"
#include "tagc/two_level_all_gather.hpp"

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>

namespace train {

template <class Exec>
class ParamGathers {
 public:
  template <class T>
  using Gather = tagc::TwoLevelAllGather<T, Exec>;

  // A gather for every non-empty segment length of `plan` (this rank of `shape`).
  // The int8 gather of a segment moves W pieces of its shard's code, one a rank.
  ParamGathers(const ShardPlan& plan, tagc::node_shape shape, bool bf16, bool int8, const Exec& exec) {
    for (int u = 0; u < plan.num_units(); ++u)
      for (const Segment& g : plan.unit(u).seg) {
        if (g.length == 0 || f32_.count(g.length)) continue;
        plan_one(f32_[g.length], g.length, shape, plan.rank(), exec);
        if (bf16) plan_one(b16_[g.length], g.length, shape, plan.rank(), exec);
        if (int8)
          plan_one(i8_[g.length], tagc::int8_blocks::piece_bytes(g.shard) * size_t(shape.world()), shape, plan.rank(),
                   exec);
      }
  }

  // The gather for a segment of `length` elements (planned by the constructor).
  template <class T>
  Gather<T>& of(size_t length) {
    auto& by_length = table<T>();
    const auto it = by_length.find(length);
    if (it == by_length.end())
      throw std::logic_error("no two-level " + std::string(sizeof(T) == 1 ? "int8" : sizeof(T) == 2 ? "bf16" : "fp32") +
                             " parameter gather planned for a segment of " + std::to_string(length) + " elements");
    return it->second;
  }

 private:
  template <class T>
  static void plan_one(Gather<T>& g, size_t length, tagc::node_shape shape, int rank, const Exec& exec) {
    if (const tagc::status st = g.initialize(length, shape, rank, exec); !st.ok())
      throw std::runtime_error("two-level parameter gather: " + st.message());
  }
  template <class T>
  std::map<size_t, Gather<T>>& table() {
    if constexpr (sizeof(T) == 1) return i8_;
    else if constexpr (sizeof(T) == 2) return b16_;
    else return f32_;
  }

  std::map<size_t, Gather<float>> f32_;
  std::map<size_t, Gather<tagc::bfloat16>> b16_;
  std::map<size_t, Gather<std::uint8_t>> i8_;  // keyed by the segment's length, like the others
};

}  // namespace train
