#pragma once
// defines: tagc::split_two_level(const mpi_communicator&, int ranks_per_node,
//                                 std::optional<two_level_communicator<mpi_communicator>>&)
//
// Splits an MPI world into its two levels (comm/two_level.hpp): the ranks of one node
// and, per local rank, one rank of every node. ranks_per_node = K > 0 takes K
// consecutive ranks as a node; 0 takes the ranks that share a host
// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), which must then be consecutive and
// equally many on every host, as mpirun and srun place them by default.
//
// Every rank takes part in one all-gather of (K asked, host-local rank and size) first
// and derives the same verdict from it, so a shape that cannot work (K not dividing the
// world, K different between ranks, hosts of unequal size or interleaved ranks) is
// refused on every rank with the same message, before any split: nobody waits alone.

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "mpi.hpp"
#include "two_level.hpp"

TAGC_BEGIN_NAMESPACE

inline status split_two_level(const mpi_communicator& world, int ranks_per_node,
                              std::optional<two_level_communicator<mpi_communicator>>& out) {
  TAGC_TRY(world.init_status());
  const MPI_Comm w = world.native();
  const int n = world.size(), rank = world.rank();
  const auto mpi_fail = [](const char* call, int rc) {
    return status{errc::communication, std::string("split_two_level: ") + call + ": " + detail::mpi::error_string(rc)};
  };
  // This rank's host: its rank and size among the ranks that share memory with it.
  int host_rank = 0, host_size = 1;
  if (ranks_per_node == 0) {
    MPI_Comm host = MPI_COMM_NULL;
    if (const int rc = MPI_Comm_split_type(w, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host); rc != MPI_SUCCESS)
      return mpi_fail("MPI_Comm_split_type", rc);
    MPI_Comm_rank(host, &host_rank);
    MPI_Comm_size(host, &host_size);
    MPI_Comm_free(&host);
  }
  const int mine[3] = {ranks_per_node, host_rank, host_size};
  std::vector<int> all(std::size_t(3 * n));
  if (const int rc = MPI_Allgather(mine, 3, MPI_INT, all.data(), 3, MPI_INT, w); rc != MPI_SUCCESS)
    return mpi_fail("MPI_Allgather", rc);
  // The same verdict on every rank, from the same gathered table.
  int K = ranks_per_node;
  for (int r = 0; r < n; ++r) {
    const int asked = all[std::size_t(3 * r)], hr = all[std::size_t(3 * r + 1)], hs = all[std::size_t(3 * r + 2)];
    if (asked != ranks_per_node)
      return {errc::invalid_argument, "ranks per node differs between ranks: rank " + std::to_string(r) + " asked for " +
                                          (asked == 0 ? std::string("auto") : std::to_string(asked)) + ", rank " +
                                          std::to_string(rank) + " for " +
                                          (ranks_per_node == 0 ? std::string("auto") : std::to_string(ranks_per_node))};
    if (ranks_per_node != 0) continue;
    if (r == 0) K = hs;
    if (hs != K)
      return {errc::invalid_argument, "ranks per node 'auto': hosts hold different numbers of ranks (rank 0's host " +
                                          std::to_string(K) + ", rank " + std::to_string(r) + "'s " +
                                          std::to_string(hs) + "); give --ranks-per-node explicitly"};
    if (hr != r % K)
      return {errc::invalid_argument, "ranks per node 'auto': the ranks of a host are not consecutive (rank " +
                                          std::to_string(r) + " is rank " + std::to_string(hr) +
                                          " of its host); place ranks by host (mpirun --map-by core) or give "
                                          "--ranks-per-node explicitly"};
  }
  node_shape shape;
  TAGC_TRY(check_node_shape(n, K, shape));
  MPI_Comm node = MPI_COMM_NULL, cross = MPI_COMM_NULL;
  if (const int rc = MPI_Comm_split(w, shape.node_of(rank), rank, &node); rc != MPI_SUCCESS)
    return mpi_fail("MPI_Comm_split (node)", rc);
  if (const int rc = MPI_Comm_split(w, shape.local_rank_of(rank), rank, &cross); rc != MPI_SUCCESS) {
    MPI_Comm_free(&node);
    return mpi_fail("MPI_Comm_split (cross)", rc);
  }
  mpi_communicator::options opt;
  opt.checked = world.checked();
  opt.timeout = world.timeout();
  // mpi_communicator duplicates what it is given: the split handles are freed here.
  two_level_communicator<mpi_communicator> levels{mpi_communicator(node, opt), mpi_communicator(cross, opt)};
  MPI_Comm_free(&node);
  MPI_Comm_free(&cross);
  TAGC_TRY(levels.node.init_status());
  TAGC_TRY(levels.cross.init_status());
  out.emplace(std::move(levels));
  return {};
}

TAGC_END_NAMESPACE
