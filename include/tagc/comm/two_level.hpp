#pragma once
// defines: tagc::node_shape, tagc::check_node_shape, tagc::two_level_communicator<C>.
//
// A job of `nodes x ranks_per_node` ranks seen in two levels: the ranks of one node
// (fast links: NVLink, shared memory) and, for each local rank l, the ranks with local
// rank l on every node (slow links between nodes). Global rank r is node r / K, local
// rank r % K (K = ranks per node): the order MPI and torchrun give ranks that share a
// host. TwoLevelReducer (two_level_reducer.hpp) reduces inside the node plainly and
// across the nodes compressed, so what crosses nodes grows with the nodes, not the ranks.
//
// Makers of the two communicators, one per backend:
//   in-process threads   comm/local_cluster.hpp   local_cluster(nodes, ranks_per_node)
//   MPI                  comm/mpi_two_level.hpp   split_two_level(world, ranks_per_node | 0 = by host)
//   NCCL                 comm/nccl.hpp            nccl_communicator::split(color, key) (ncclCommSplit)

#include <string>
#include <utility>

#include "../core/status.hpp"
#include "communicator.hpp"

TAGC_BEGIN_NAMESPACE

struct node_shape {
  int nodes = 1;
  int ranks_per_node = 1;

  int world() const { return nodes * ranks_per_node; }
  int node_of(int rank) const { return rank / ranks_per_node; }
  int local_rank_of(int rank) const { return rank % ranks_per_node; }
  friend bool operator==(const node_shape&, const node_shape&) = default;
};

// The node shape of `world` ranks with `ranks_per_node` each, or why there is none.
inline status check_node_shape(int world, int ranks_per_node, node_shape& out) {
  if (world < 1) return {errc::invalid_argument, "world size " + std::to_string(world) + " < 1"};
  if (ranks_per_node < 1)
    return {errc::invalid_argument, "ranks per node " + std::to_string(ranks_per_node) + " < 1"};
  if (world % ranks_per_node != 0)
    return {errc::invalid_argument, "ranks per node " + std::to_string(ranks_per_node) +
                                        " does not divide the world size " + std::to_string(world) +
                                        " (every node must hold the same number of ranks)"};
  out = {world / ranks_per_node, ranks_per_node};
  return {};
}

// The two communicators of one rank: `node` (its node's ranks, rank = local rank) and
// `cross` (one rank per node with the same local rank, rank = node index).
template <communicator C>
struct two_level_communicator {
  C node;
  C cross;

  node_shape shape() const { return {cross.size(), node.size()}; }
  int rank() const { return cross.rank() * node.size() + node.rank(); }
  int size() const { return cross.size() * node.size(); }
};

TAGC_END_NAMESPACE
