#pragma once
// defines: tagc::detail::mpi::route — what one all_to_all_v carries through its
//          phases: the int counts and displacements MPI_Ialltoallv reads, and the
//          checked mode's pair check (part of comm/mpi.hpp).
//
// The pair rule (rank p's send_counts[q] == rank q's recv_counts[p], comm/argument_rules.hpp)
// spans two ranks, so the argument all-reduce (mpi/argument_check.hpp) cannot see it.
// Once that has agreed (every rank called all_to_all_v with the same type and sound
// arguments of its own), two small collectives settle it:
//  1. exchange: MPI_Ialltoall of one count per pair; rank q learns every rank's
//     send_counts[q] and checks them against its recv_counts (check_route_pairs);
//  2. verdicts: MPI_Iallgather of every rank's route_check (4 int64), so every rank
//     words the lowest failing rank's refusal (route_refusal), as the local backend does.
// Without it a mismatch is MPI's truncation error on one rank and a wrong result or a
// hang on the others. Everything lives here, in the heap-allocated pending record, so
// MPI's buffers never move and the caller's counts may go once the call returned (after
// a timeout, the collective resumes from these copies).

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../argument_rules.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail::mpi {

struct route {
  // MPI_Ialltoallv's arguments; the sums were checked against INT_MAX, so every
  // count and displacement fits.
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
  // Checked mode only.
  std::vector<std::uint64_t> sent;      // sent[q]: this rank's send_counts[q]
  std::vector<std::uint64_t> incoming;  // incoming[p]: rank p's send_counts[this rank]
  std::vector<std::size_t> expected;    // this rank's recv_counts
  std::array<std::int64_t, 4> mine{};   // this rank's pair verdict (route_check)
  std::vector<std::int64_t> verdicts;   // every rank's, 4 each, in rank order

  // From arguments check_all_to_all_arguments accepted (size entries each).
  void plan(std::span<const std::size_t> send, std::span<const std::size_t> recv, bool checked) {
    const auto layout = [](std::span<const std::size_t> c, std::vector<int>& counts, std::vector<int>& displs) {
      counts.resize(c.size());
      displs.resize(c.size());
      int at = 0;
      for (std::size_t p = 0; p < c.size(); ++p) {
        counts[p] = int(c[p]);
        displs[p] = at;
        at += counts[p];
      }
    };
    layout(send, send_counts, send_displs);
    layout(recv, recv_counts, recv_displs);
    if (!checked) return;
    sent.assign(send.begin(), send.end());
    incoming.assign(send.size(), 0);
    expected.assign(recv.begin(), recv.end());
    verdicts.assign(4 * recv.size(), 0);
  }

  // Step 1: one count per pair.
  int start_exchange(MPI_Comm comm, MPI_Request* req) {
    return MPI_Ialltoall(sent.data(), 1, MPI_UINT64_T, incoming.data(), 1, MPI_UINT64_T, comm, req);
  }

  // Step 2: this rank's pair verdict, to every rank.
  int start_verdicts(MPI_Comm comm, MPI_Request* req) {
    const route_check v = check_route_pairs(incoming, expected);
    mine = {v.what, v.a, v.b, v.c};
    return MPI_Iallgather(mine.data(), 4, MPI_INT64_T, verdicts.data(), 4, MPI_INT64_T, comm, req);
  }

  // What every rank returns: the lowest rank whose counts disagree with a sender's.
  status verdict(int size, std::uint64_t max_count) const {
    for (int r = 0; r < size; ++r) {
      const std::int64_t* v = verdicts.data() + 4 * std::size_t(r);
      const route_check c{v[0], v[1], v[2], v[3]};
      if (!c.ok()) return route_refusal(c, r, size, max_count);
    }
    return {};
  }
};

}  // namespace detail::mpi

TAGC_END_NAMESPACE
