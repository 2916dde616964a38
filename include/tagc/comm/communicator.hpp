#pragma once
// defines: tagc::communicator and tagc::full_communicator (concepts), tagc::collective,
//          tagc::reducible, tagc::collective_request, tagc::ring_bytes_sent,
//          tagc::completed_request, tagc::routing_communicator (concept).
//
// Two concepts, because the library and its users need different amounts:
//  - communicator: what the reducers and their stages call (rank, size,
//    all_reduce, reduce_scatter, all_gather, and broadcast for the shared
//    selection). A transport that offers these can carry a Reducer; the Python
//    package's ProcessGroup communicator offers no more.
//  - full_communicator: what every tagc backend (local, MPI, NCCL) offers besides:
//    barrier, reduce, and non-blocking start_all_reduce / start_reduce_scatter /
//    start_all_gather returning a request whose wait() completes it. Programs that
//    overlap communication themselves (the GPT-2 trainer, benchmarks, tests) use these.
//  - routing_communicator: a communicator that also routes blocks of any size to
//    each rank (all_to_all_v): what a routed index (policy/shared_index.hpp) needs,
//    so that each rank sends its own entries to their shards' owners only. Every
//    tagc backend and the Python package's communicator offer it.
// Both take *typed spans*: the element type and count always come from the span,
// so a byte count can never be passed where an element count is meant.
//
// Semantics every backend follows (as NCCL's public header documents them):
//  - all_reduce(send, recv):      recv[i] = sum over ranks of send[i]; sizes equal.
//  - reduce_scatter(send, recv):  send.size() == size() * recv.size(); rank r gets
//                                 the sum of block r (recv.size() elements).
//  - all_gather(send, recv):      recv.size() == size() * send.size(); block r is rank r's send.
//  - reduce(send, recv, root):    like all_reduce, but only root's recv is written.
//  - broadcast(buf, root):        root's buf is copied to every rank's buf.
//  - all_to_all_v(send, send_counts, recv, recv_counts): send holds size() blocks in
//                                 rank order, block p (send_counts[p] elements) for
//                                 rank p; recv gets size() blocks in rank order, block
//                                 q (recv_counts[q] elements) from rank q. Rank p's
//                                 send_counts[q] equals rank q's recv_counts[p]
//                                 (exchange the counts first, with counts of 1);
//                                 send and recv do not overlap.
//  - barrier().
//  In-place is allowed where send and recv are the same memory (all_reduce,
//  broadcast) or where send/recv alias at the rank's own block (reduce_scatter:
//  recv == send.subspan(rank * recv.size()), all_gather likewise).
//  The argument rules and the refusals' wording live in one place,
//  comm/argument_rules.hpp, which every backend calls.
//  Unsigned integer sums wrap modulo 2^bits (NCCL's and MPI's behaviour): the
//  index policies rely on that.
//  Stream-ordered backends (NCCL) return once the collective is *enqueued*; host
//  backends (MPI, local) return once it is complete. start_*() returns a request
//  whose wait() completes it; buffers must stay alive until then.
//
// A new backend: one header with its communicator class that calls
// check_collective_arguments before moving data and ends with
// static_assert(full_communicator<...>) (or communicator<...> if it only carries
// a Reducer), plus its test.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include "../core/bfloat16.hpp"
#include "../core/float16.hpp"
#include "../core/status.hpp"

TAGC_BEGIN_NAMESPACE

enum class collective : int { all_reduce = 0, reduce_scatter, all_gather, reduce, broadcast, barrier, all_to_all, count_ };

inline constexpr const char* collective_name(collective c) noexcept {
  switch (c) {
    case collective::all_reduce: return "all_reduce";
    case collective::reduce_scatter: return "reduce_scatter";
    case collective::all_gather: return "all_gather";
    case collective::reduce: return "reduce";
    case collective::broadcast: return "broadcast";
    case collective::barrier: return "barrier";
    case collective::all_to_all: return "all_to_all_v";
    default: return "?";
  }
}

// Element types every backend must reduce with SUM. bfloat16 and float16 sums
// are computed in float and rounded to the 16-bit type once per reduction step
// (core/bfloat16.hpp, core/float16.hpp): a ring or tree reduction rounds at
// every hop, as NCCL's bf16 / fp16 sums do.
template <class T>
concept reducible = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, std::uint8_t> ||
                    std::same_as<T, std::int32_t> || std::same_as<T, std::uint32_t> ||
                    std::same_as<T, std::int64_t> || std::same_as<T, std::uint64_t> ||
                    std::same_as<T, bfloat16> || std::same_as<T, float16>;

// A completion handle of a non-blocking collective.
template <class R>
concept collective_request = std::movable<R> && requires(R& r) {
  { r.wait() } -> std::same_as<status>;
};

namespace detail {
// What the reducers call, for one element type.
template <class C, class T>
concept reducer_collectives_for = requires(C& c, std::span<const T> in, std::span<T> out, int root) {
  { c.all_reduce(in, out) } -> std::same_as<status>;
  { c.reduce_scatter(in, out) } -> std::same_as<status>;
  { c.all_gather(in, out) } -> std::same_as<status>;
  { c.broadcast(out, root) } -> std::same_as<status>;
};
// What the backends add, for one element type.
template <class C, class T>
concept backend_collectives_for = requires(C& c, std::span<const T> in, std::span<T> out, int root) {
  { c.reduce(in, out, root) } -> std::same_as<status>;
  { c.start_all_reduce(in, out) } -> collective_request;
  { c.start_reduce_scatter(in, out) } -> collective_request;
  { c.start_all_gather(in, out) } -> collective_request;
};
}  // namespace detail

// The element types the reducers pass (values, index words and bytes, control
// vectors); the members are templates over every reducible type.
template <class C>
concept communicator = requires(const C& cc) {
  { cc.rank() } -> std::convertible_to<int>;
  { cc.size() } -> std::convertible_to<int>;
} && detail::reducer_collectives_for<C, float> && detail::reducer_collectives_for<C, std::uint8_t> &&
    detail::reducer_collectives_for<C, std::int64_t> && detail::reducer_collectives_for<C, double>;

namespace detail {
template <class C, class T>
concept routing_collectives_for = requires(C& c, std::span<const T> in, std::span<const std::size_t> counts,
                                           std::span<T> out) {
  { c.all_to_all_v(in, counts, out, counts) } -> std::same_as<status>;
};
}  // namespace detail

// The routed index's exchange: bytes for the entries, int64 for their counts.
template <class C>
concept routing_communicator =
    communicator<C> && detail::routing_collectives_for<C, std::uint8_t> && detail::routing_collectives_for<C, std::int64_t>;

template <class C>
concept full_communicator = communicator<C> && requires(C& c) {
  { c.barrier() } -> std::same_as<status>;
} && detail::backend_collectives_for<C, float> && detail::backend_collectives_for<C, std::uint8_t> &&
    detail::backend_collectives_for<C, std::int64_t> && detail::backend_collectives_for<C, double>;

// Bytes one rank sends for a collective over a buffer of `whole_bytes` bytes
// (the full, unsharded buffer) with a ring algorithm on `n` ranks — the model
// nccl-tests uses for bus bandwidth: all-reduce 2(n-1)/n, reduce-scatter,
// all-gather, reduce and broadcast (n-1)/n; all_to_all_v with blocks of equal size
// (n-1)/n too (counting_communicator counts its real blocks instead).
inline constexpr double ring_bytes_sent(collective c, double whole_bytes, int n) noexcept {
  if (n <= 1) return 0.0;
  const double f = double(n - 1) / double(n);
  switch (c) {
    case collective::all_reduce: return 2.0 * f * whole_bytes;
    case collective::barrier: return 0.0;
    default: return f * whole_bytes;
  }
}

// A request that is already complete (host backends that finish at start).
struct completed_request {
  status result;
  status wait() { return std::move(result); }
};

TAGC_END_NAMESPACE
