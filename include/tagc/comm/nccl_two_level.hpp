#pragma once
// defines: tagc::split_two_level(const nccl_communicator&, node_shape,
//                                 std::optional<two_level_communicator<nccl_communicator>>&)
//
// The NCCL world in two levels (comm/two_level.hpp) by two ncclCommSplit calls: the
// node's ranks (color = node) and one rank per node (color = local rank). The shape is
// given: NCCL cannot tell which ranks share a host, and the caller (an MPI bootstrap, a
// launcher's LOCAL_WORLD_SIZE) can. Every rank must pass the same shape; a shape that
// does not make the world is refused before any split, on every rank alike.

#include <optional>
#include <string>

#include "nccl.hpp"
#include "two_level.hpp"

TAGC_BEGIN_NAMESPACE

inline status split_two_level(const nccl_communicator& world, node_shape shape,
                              std::optional<two_level_communicator<nccl_communicator>>& out) {
  node_shape checked;
  TAGC_TRY(check_node_shape(world.size(), shape.ranks_per_node, checked));
  const int r = world.rank();
  auto node = world.split(checked.node_of(r), r, checked.ranks_per_node, checked.local_rank_of(r));
  if (!node) return node.error();
  auto cross = world.split(checked.local_rank_of(r), r, checked.nodes, checked.node_of(r));
  if (!cross) return cross.error();
  out.emplace(two_level_communicator<nccl_communicator>{std::move(*node), std::move(*cross)});
  return {};
}

TAGC_END_NAMESPACE
