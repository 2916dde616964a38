#pragma once
// defines: tagc::mpi_communicator — the Communicator concept over an MPI
//          communicator (CPU buffers, any number of hosts), with deadlines
//          instead of hangs and an optional cross-rank argument check.
//
// Usage:
//   MPI_Init(&argc, &argv);
//   {
//     tagc::mpi_communicator comm(MPI_COMM_WORLD);        // dups it
//     if (auto s = comm.init_status(); !s.ok()) { ... }
//     TAGC_TRY(comm.all_reduce(std::span<const float>(g), std::span<float>(sum)));
//     auto req = comm.start_reduce_scatter(in, out);      // overlap ...
//     TAGC_TRY(req.wait());
//   }                                                      // frees the dup
//   MPI_Finalize();
//
// Semantics are those documented in communicator.hpp (sum only, in-place rules,
// unsigned sums wrap). Details of this backend:
//  - The constructor duplicates the given communicator twice (one for the
//    collectives, one for the argument check below) and sets MPI_ERRORS_RETURN
//    on both, so every MPI failure comes back as
//    status{errc::communication, "<collective>: <MPI_Error_string>"}.
//  - Blocking collectives are start_*() + wait(). wait() polls MPI_Test (yielding
//    the core between polls, as MPI_Wait does when oversubscribed) until the
//    collective completes or the deadline (`timeout()`, default 300 s, per wait()
//    call) passes; then it returns errc::timeout naming the collective and the
//    time waited. The collective is still pending inside MPI after a timeout and
//    still owns the caller's buffers. Until it completes, the communicator
//    refuses new collectives (errc::communication). Either wait() on the request
//    again / call drain() — if the late peer does arrive, the collective then
//    completes normally with the right result — or call abort(code) (MPI_Abort:
//    the usual reaction to a dead peer).
//  - checked mode (options::checked, default on): before each collective, one
//    extra MPI_Iallreduce(MAX) of 12 int64 on a separate communicator lets every
//    rank see every rank's collective kind, element type, length, root and local
//    argument errors. All ranks then return the *same* status
//    (size_mismatch / invalid_argument, naming the ranks and lengths, worded by
//    comm/argument_rules.hpp) instead of one rank returning early and the others
//    hanging. Cost: one small,
//    latency-bound all-reduce per collective (2 ranks, TCP on loopback, busy
//    2-core machine: an 8-float all_reduce took 75 us unchecked, 110 us checked;
//    a 4 MiB one ~9-10 ms either way, the difference within noise). The tagc Reducer
//    already agrees on its plan across ranks, so it may run unchecked
//    (options{.checked = false}); then a local argument error is returned on the
//    offending rank only, without calling MPI, and the other ranks time out.
//    Check and collective are started in order on their own communicators, so
//    several requests may be in flight in any combination.
//  - all_to_all_v (blocking; MPI_Ialltoallv + wait(), so the deadline and the order
//    after earlier requests hold). Checked, it also checks the rule that spans two
//    ranks (rank p's send_counts[q] == rank q's recv_counts[p]): after the argument
//    all-reduce, an all-to-all of one count per pair and an all-gather of 4 int64 per
//    rank (mpi/route.hpp), so a mismatch is the same refusal on every rank instead of
//    MPI's truncation error on one. Unchecked, only this rank's own arguments are
//    checked and the caller guarantees the pairs (the reducer exchanges counts first).
//  - uint8 sums use a user-defined wrapping op instead of MPI_SUM: Open MPI
//    4.1's AVX reduction component saturates 8-bit sums (see wrapping_sum_u8).
//  - bfloat16 and float16 travel as MPI_UINT16_T with user-defined commutative
//    ops that add in float and round to the 16-bit type at every reduction step
//    (see half_sum). The ops are created once per communicator.
//  - Element counts must fit in int (MPI-3; OpenMPI 4.1 has no MPI-4 "_c"
//    large-count variants): a larger span is a local argument error; for
//    all_to_all_v, sums of send_counts or recv_counts above INT_MAX (the
//    displacements are int too).
//  - In place: all_reduce, reduce, broadcast (send == recv) and all_gather
//    (send == recv.subspan(rank * send.size())) use MPI_IN_PLACE.
//    reduce_scatter in place (recv == send.subspan(rank * recv.size())) reduces
//    into a temporary of recv.size() elements and copies it into the rank's block,
//    so the other blocks of send are left untouched (MPI's own in-place form
//    would leave its result at block 0 and the rest of the buffer unspecified).
//    Partial overlap of send and recv in any other layout is an argument error.
//  - Not thread-safe: one thread drives one communicator (MPI_THREAD_SINGLE is
//    enough). Requests must be waited or destroyed before their communicator;
//    destroying a request that has not completed leaves the collective running:
//    later calls keep progressing it, drain() waits for it.
//
// Files, read top to bottom: mpi/datatypes.hpp (element types on the wire, the
// wrapping and 16-bit sums), mpi/argument_check.hpp (checked mode's one
// all-reduce), mpi/route.hpp (all_to_all_v's counts and pair check),
// mpi/state.hpp (collectives in flight, deadlines),
// mpi/communicator.hpp (the class). The argument rules themselves, and the
// wording of every refusal, are comm/argument_rules.hpp's.

#include "mpi/communicator.hpp"
