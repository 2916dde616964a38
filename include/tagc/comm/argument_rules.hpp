#pragma once
// defines: tagc::element_type_id, tagc::element_type_name, tagc::buffers_overlap,
//          tagc::argument_error, tagc::argument_check, tagc::check_collective_arguments,
//          tagc::argument_refusal, tagc::check_arguments, tagc::check_reduce_each_arguments,
//          tagc::agreement_field, tagc::disagreement, tagc::route_check,
//          tagc::check_all_to_all_arguments, tagc::route_refusal, tagc::check_route_pairs.
//
// The rules a collective's arguments follow on every backend, and the words a
// backend uses when they are broken: the one place they are written, so the
// thread, MPI, NCCL and Python (ProcessGroup) communicators refuse the same
// calls with the same messages. A backend calls check_collective_arguments (or
// check_arguments, which returns the refusal as a status) before it moves data;
// backends that compare ranks (local, MPI) word a disagreement with disagreement().
//
// One rank's rules (communicator.hpp states the semantics):
//  - reduce and broadcast name a root in [0, size).
//  - all_reduce, reduce, broadcast: send and recv hold the same number of elements.
//    reduce_scatter: send = size x recv. all_gather: recv = size x send.
//  - A backend may cap the element count of one call (MPI-3: INT_MAX).
//  - In place: send == recv (all_reduce, reduce; broadcast always is);
//    reduce_scatter: recv == send + rank * recv.size(); all_gather:
//    send == recv + rank * send.size(). Any other overlap is refused.
// Refusals read "<collective>: rank <r>: <what is wrong>"; shape and count errors
// are errc::size_mismatch, a bad root or overlap errc::invalid_argument.
//
// Across ranks (checked by backends that can: local, MPI checked mode): the
// collective, the element type, the agreed element count (per rank's block for
// reduce_scatter / all_gather) and the root must be equal on every rank. Those
// backends report, in this order, the first of: ranks calling different
// collectives (the other facts then compare unlike things), the lowest rank whose
// own arguments broke a rule, different types, counts, roots.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "communicator.hpp"

TAGC_BEGIN_NAMESPACE

// A stable id per reducible element type (ranks exchange it to compare types;
// the Python transport uses it as its wire type) and its name.
template <reducible T>
inline constexpr int element_type_id = std::is_same_v<T, float>           ? 0
                                       : std::is_same_v<T, double>        ? 1
                                       : std::is_same_v<T, std::uint8_t>  ? 2
                                       : std::is_same_v<T, std::int32_t>  ? 3
                                       : std::is_same_v<T, std::uint32_t> ? 4
                                       : std::is_same_v<T, std::int64_t>  ? 5
                                       : std::is_same_v<T, std::uint64_t> ? 6
                                       : std::is_same_v<T, bfloat16>      ? 7
                                                                          : 8;  // float16
inline constexpr const char* element_type_name(std::int64_t id) noexcept {
  constexpr const char* names[] = {"float", "double", "uint8", "int32", "uint32", "int64", "uint64", "bfloat16",
                                   "float16"};
  return id >= 0 && id < 9 ? names[id] : "?";
}

// Whether the byte ranges [p, p+n) and [q, q+m) share a byte.
inline bool buffers_overlap(const void* p, std::size_t n, const void* q, std::size_t m) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto b = reinterpret_cast<std::uintptr_t>(q);
  return n != 0 && m != 0 && a < b + m && b < a + n;
}

// What is wrong with one rank's arguments. Small integers, so a backend can send
// them to the other ranks and every rank can word the same refusal.
enum class argument_error : std::int64_t {
  none = 0,
  send_recv_differ,   // all_reduce / reduce / broadcast: send.size() != recv.size()
  scatter_shape,      // reduce_scatter: send.size() != size * recv.size()
  gather_shape,       // all_gather: recv.size() != size * send.size()
  root_out_of_range,  // reduce / broadcast
  count_too_large,    // more elements than the backend takes in one call
  partial_overlap,    // send and recv overlap, but not in the in-place layout
};

// The verdict on one rank's arguments, and what a backend needs to run the call.
struct argument_check {
  argument_error error = argument_error::none;
  std::size_t count = 0;  // the length that must agree across ranks (one block for reduce_scatter / all_gather)
  bool in_place = false;  // send and recv are in the in-place layout
  bool ok() const noexcept { return error == argument_error::none; }
};

template <class T>
argument_check check_collective_arguments(collective kind, std::span<const T> send, std::span<T> recv, int root,
                                          int rank, int size,
                                          std::size_t max_count = std::numeric_limits<std::size_t>::max()) {
  argument_check v;
  const std::size_t ns = send.size(), nr = recv.size(), n = std::size_t(size < 0 ? 0 : size);
  const auto sb = reinterpret_cast<std::uintptr_t>(send.data()), rb = reinterpret_cast<std::uintptr_t>(recv.data());
  const std::size_t own = std::size_t(rank < 0 ? 0 : rank);
  bool shape_ok = true;
  switch (kind) {
    case collective::all_reduce:
    case collective::reduce:
    case collective::broadcast:
      v.count = ns;
      shape_ok = ns == nr;
      v.in_place = sb == rb;
      break;
    case collective::reduce_scatter:
      v.count = nr;
      shape_ok = ns == nr * n;
      v.in_place = rb == sb + own * recv.size_bytes();
      break;
    case collective::all_gather:
      v.count = ns;
      shape_ok = nr == ns * n;
      v.in_place = sb == rb + own * send.size_bytes();
      break;
    default: return v;  // barrier: no buffers
  }
  const bool rooted = kind == collective::reduce || kind == collective::broadcast;
  if (rooted && (root < 0 || root >= size))
    v.error = argument_error::root_out_of_range;
  else if (!shape_ok)
    v.error = kind == collective::reduce_scatter ? argument_error::scatter_shape
              : kind == collective::all_gather   ? argument_error::gather_shape
                                                 : argument_error::send_recv_differ;
  else if (ns > max_count || nr > max_count)
    v.error = argument_error::count_too_large;
  else if (kind != collective::broadcast && !v.in_place &&
           buffers_overlap(send.data(), send.size_bytes(), recv.data(), recv.size_bytes()))
    v.error = argument_error::partial_overlap;
  return v;
}

inline constexpr errc argument_error_code(argument_error e) noexcept {
  return e == argument_error::root_out_of_range || e == argument_error::partial_overlap ? errc::invalid_argument
                                                                                        : errc::size_mismatch;
}

// The refusal of rank `rank`'s arguments, from the numbers alone (a backend that
// received them from another rank words it the same): counts in elements.
inline status argument_refusal(collective kind, argument_error e, std::uint64_t send, std::uint64_t recv,
                               std::int64_t root, int rank, int size,
                               std::uint64_t max_count = std::numeric_limits<std::uint64_t>::max()) {
  const auto s = [](auto v) { return std::to_string(v); };
  std::string m;
  switch (e) {
    case argument_error::send_recv_differ: m = "send has " + s(send) + " elements but recv has " + s(recv); break;
    case argument_error::scatter_shape:
      m = "send has " + s(send) + " elements, expected world size " + s(size) + " x recv " + s(recv);
      break;
    case argument_error::gather_shape:
      m = "recv has " + s(recv) + " elements, expected world size " + s(size) + " x send " + s(send);
      break;
    case argument_error::root_out_of_range: m = "root " + s(root) + " outside [0, " + s(size) + ")"; break;
    case argument_error::count_too_large:
      m = "send has " + s(send) + " and recv " + s(recv) + " elements; this backend takes at most " + s(max_count) +
          " per collective";
      break;
    case argument_error::partial_overlap:
      if (kind == collective::reduce_scatter)
        m = "recv overlaps send but is not send's block for rank " + s(rank) +
            " (in place needs recv == send + rank * recv.size())";
      else if (kind == collective::all_gather)
        m = "send overlaps recv but is not recv's block for rank " + s(rank) +
            " (in place needs send == recv + rank * send.size())";
      else
        m = "send and recv overlap without being the same buffer";
      break;
    default: return {};
  }
  return {argument_error_code(e), std::string(collective_name(kind)) + ": rank " + s(rank) + ": " + m};
}

// check_collective_arguments and, when it fails, its refusal; ok otherwise.
template <class T>
status check_arguments(collective kind, std::span<const T> send, std::span<T> recv, int root, int rank, int size) {
  const argument_check v = check_collective_arguments(kind, send, recv, root, rank, size);
  if (v.ok()) return {};
  return argument_refusal(kind, v.error, send.size(), recv.size(), root, rank, size);
}

// reduce_each (uneven shards, NCCL): rank r receives the sum of
// send[offsets[r], offsets[r+1]); offsets has size + 1 non-decreasing entries within
// send; recv holds this rank's block and may be that block of send (in place).
template <class T>
status check_reduce_each_arguments(std::span<const T> send, std::span<const std::size_t> offsets, std::span<T> recv,
                                   int rank, int size) {
  const auto s = [](auto v) { return std::to_string(v); };
  const auto refuse = [&](errc c, const std::string& m) {
    return status{c, "reduce_each: rank " + s(rank) + ": " + m};
  };
  const std::size_t n = std::size_t(size);
  if (offsets.size() != n + 1)
    return refuse(errc::size_mismatch,
                  "offsets has " + s(offsets.size()) + " entries, expected world size " + s(n) + " + 1");
  for (std::size_t r = 0; r < n; ++r)
    if (offsets[r] > offsets[r + 1])
      return refuse(errc::invalid_argument,
                    "offsets decrease at rank " + s(r) + " (" + s(offsets[r]) + " > " + s(offsets[r + 1]) + ")");
  if (offsets[n] > send.size())
    return refuse(errc::size_mismatch,
                  "offsets end at " + s(offsets[n]) + " but send has " + s(send.size()) + " elements");
  const std::size_t me = std::size_t(rank), mine = offsets[me + 1] - offsets[me];
  if (recv.size() != mine)
    return refuse(errc::size_mismatch,
                  "recv has " + s(recv.size()) + " elements but rank " + s(me) + "'s block has " + s(mine));
  if (recv.data() != send.data() + offsets[me] &&
      buffers_overlap(send.data(), send.size_bytes(), recv.data(), recv.size_bytes()))
    return refuse(errc::invalid_argument, "recv overlaps send but is not send's block for rank " + s(me));
  return {};
}

// all_to_all_v (communicator.hpp). One rank's rules: send_counts and recv_counts
// hold size entries; send holds exactly the sum of send_counts elements and recv
// the sum of recv_counts (the blocks in rank order); neither sum exceeds the
// backend's cap; send and recv do not overlap. Across ranks: rank p's
// send_counts[q] equals rank q's recv_counts[p]. A verdict is a few integers
// (what, a, b, c), so a backend can gather every rank's and word the first alike.
struct route_check {
  enum what_t : std::int64_t {
    none = 0,
    counts_shape,     // a: send_counts entries, b: recv_counts entries
    send_sum,         // a: send elements, b: the sum of send_counts
    recv_sum,         // a: recv elements, b: the sum of recv_counts
    count_too_large,  // a: the larger sum
    overlap,
    pair_mismatch,    // this rank receives: a: the sender, b: what it sends, c: what this rank expects
  };
  std::int64_t what = none, a = 0, b = 0, c = 0;
  bool ok() const noexcept { return what == none; }
};

template <class T>
route_check check_all_to_all_arguments(std::span<const T> send, std::span<const std::size_t> send_counts,
                                       std::span<T> recv, std::span<const std::size_t> recv_counts, int size,
                                       std::size_t max_count = std::numeric_limits<std::size_t>::max()) {
  const std::size_t n = std::size_t(size < 0 ? 0 : size);
  if (send_counts.size() != n || recv_counts.size() != n)
    return {route_check::counts_shape, std::int64_t(send_counts.size()), std::int64_t(recv_counts.size())};
  std::size_t sent = 0, received = 0;
  for (std::size_t p = 0; p < n; ++p) sent += send_counts[p], received += recv_counts[p];
  if (send.size() != sent) return {route_check::send_sum, std::int64_t(send.size()), std::int64_t(sent)};
  if (recv.size() != received) return {route_check::recv_sum, std::int64_t(recv.size()), std::int64_t(received)};
  if (sent > max_count || received > max_count)
    return {route_check::count_too_large, std::int64_t(std::max(sent, received))};
  if (buffers_overlap(send.data(), send.size_bytes(), recv.data(), recv.size_bytes())) return {route_check::overlap};
  return {};
}

// The refusal of rank `rank`'s verdict, from its numbers alone.
inline status route_refusal(const route_check& v, int rank, int size,
                            std::uint64_t max_count = std::numeric_limits<std::uint64_t>::max()) {
  const auto s = [](auto x) { return std::to_string(x); };
  std::string m;
  errc code = errc::size_mismatch;
  switch (v.what) {
    case route_check::counts_shape:
      m = "send_counts has " + s(v.a) + " and recv_counts " + s(v.b) + " entries, expected world size " + s(size);
      break;
    case route_check::send_sum: m = "send has " + s(v.a) + " elements but send_counts sum to " + s(v.b); break;
    case route_check::recv_sum: m = "recv has " + s(v.a) + " elements but recv_counts sum to " + s(v.b); break;
    case route_check::count_too_large:
      m = "its blocks hold " + s(v.a) + " elements; this backend takes at most " + s(max_count) + " per collective";
      break;
    case route_check::overlap:
      code = errc::invalid_argument;
      m = "send and recv overlap";
      break;
    case route_check::pair_mismatch:
      m = "rank " + s(v.a) + " sends " + s(v.b) + " elements to rank " + s(rank) + ", which expects " + s(v.c) +
          " (exchange the counts first)";
      break;
    default: return {};
  }
  return {code, "all_to_all_v: rank " + s(rank) + ": " + m};
}

// Rank `rank`'s pair check, given what every rank sends to it (`incoming[p]`: rank
// p's send_counts[rank]) and its own recv_counts: the first sender that disagrees.
inline route_check check_route_pairs(std::span<const std::uint64_t> incoming, std::span<const std::size_t> recv_counts) {
  for (std::size_t p = 0; p < incoming.size() && p < recv_counts.size(); ++p)
    if (incoming[p] != recv_counts[p])
      return {route_check::pair_mismatch, std::int64_t(p), std::int64_t(incoming[p]), std::int64_t(recv_counts[p])};
  return {};
}

// What every rank of a collective must pass alike.
enum class agreement_field { collective, element_type, count, root };

// Two ranks passed different values of `field` (`a` on rank_a, `b` on rank_b):
// the refusal every rank returns. The higher rank is named first, so a backend
// comparing each rank with rank 0 and one comparing extremes word it alike.
inline status disagreement(collective kind, agreement_field field, int rank_a, std::int64_t a, int rank_b,
                           std::int64_t b) {
  if (rank_a < rank_b) {
    std::swap(rank_a, rank_b);
    std::swap(a, b);
  }
  const std::string ra = "rank " + std::to_string(rank_a), rb = "rank " + std::to_string(rank_b);
  const std::string what = std::string(collective_name(kind)) + ": ";
  switch (field) {
    case agreement_field::collective:
      return {errc::invalid_argument, ra + " called " + collective_name(collective(a)) + " while " + rb + " called " +
                                          collective_name(collective(b))};
    case agreement_field::element_type:
      return {errc::invalid_argument,
              what + ra + " passed " + element_type_name(a) + " while " + rb + " passed " + element_type_name(b)};
    case agreement_field::count:
      return {errc::size_mismatch,
              what + ra + " passed " + std::to_string(a) + " elements, " + rb + " passed " + std::to_string(b)};
    case agreement_field::root:
      return {errc::invalid_argument,
              what + ra + " named root " + std::to_string(a) + ", " + rb + " named " + std::to_string(b)};
  }
  return {};
}

TAGC_END_NAMESPACE
