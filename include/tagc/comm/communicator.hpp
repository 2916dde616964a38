#pragma once
// defines: tagc::communicator and tagc::full_communicator (concepts), tagc::collective,
//          tagc::reducible, tagc::collective_request, tagc::ring_bytes_sent,
//          tagc::completed_request.
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

enum class collective : int { all_reduce = 0, reduce_scatter, all_gather, reduce, broadcast, barrier, count_ };

inline constexpr const char* collective_name(collective c) noexcept {
  switch (c) {
    case collective::all_reduce: return "all_reduce";
    case collective::reduce_scatter: return "reduce_scatter";
    case collective::all_gather: return "all_gather";
    case collective::reduce: return "reduce";
    case collective::broadcast: return "broadcast";
    case collective::barrier: return "barrier";
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

template <class C>
concept full_communicator = communicator<C> && requires(C& c) {
  { c.barrier() } -> std::same_as<status>;
} && detail::backend_collectives_for<C, float> && detail::backend_collectives_for<C, std::uint8_t> &&
    detail::backend_collectives_for<C, std::int64_t> && detail::backend_collectives_for<C, double>;

// Bytes one rank sends for a collective over a buffer of `whole_bytes` bytes
// (the full, unsharded buffer) with a ring algorithm on `n` ranks — the model
// nccl-tests uses for bus bandwidth: all-reduce 2(n-1)/n, reduce-scatter,
// all-gather, reduce and broadcast (n-1)/n.
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
