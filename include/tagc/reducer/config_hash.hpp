#pragma once
// defines: tagc::per_rank_config_hash, tagc::shared_index_config_hash — the
//          configuration every rank must share, as the one number each rank puts into
//          the agreement check (stage/agreement.hpp), which refuses the call on every
//          rank when the numbers differ.
//
// Hand-rolled rather than a general hash: the inputs are a few small enums and
// counts, and these exact formulas are what every rank of a run (and of a resumed
// run, on another build) computes; changing one makes ranks of different builds
// disagree. Unsigned arithmetic: it wraps, never overflows.

#include <cstddef>
#include <cstdint>

#include "../core/config.hpp"
#include "../policy/choices.hpp"
#include "../policy/wire_value.hpp"
#include "../reducer_arguments.hpp"
#include "../shard/layout.hpp"

TAGC_BEGIN_NAMESPACE

// The per-rank-index Reducer: its policies (index width and exchange, sketch ratio or
// packed values, the wire type) and options (topology, op).
template <class Wire>
inline std::uint64_t per_rank_config_hash(int index_bits, index_exchange exchange, int ratio, bool sketched,
                                          topology topo, reduce_op op) {
  return std::uint64_t(index_bits) * 1000003u + std::uint64_t(exchange) * 100003u + std::uint64_t(ratio) * 1009u +
         std::uint64_t(topo) * 7u + std::uint64_t(op) + (sketched ? 0u : 500009u) +
         std::uint64_t(wire_type_id<Wire>) * 50021u;
}

// The shared-index Reducer: the wire type, topology and op, and the call's k and
// step (the step names the leader; ranks that disagree on it would broadcast from
// different roots) and, for a pooled index, that it pools (a rank that pools and one
// that broadcasts would wait on different collectives; the rotating leader's
// numbers stay what they were) and how many positions the pooling ranks pick
// (ranks whose saved overlap differs would all-gather blocks of different sizes), and
// whether each rank sends only its own picks (ranks that differ there would deliver
// sums that are neither rule's), and how many sums a routed all-reduce's owners
// forward (ranks bounding differently would broadcast blocks of different sizes).
template <class Wire>
inline std::uint64_t shared_index_config_hash(topology topo, reduce_op op, std::size_t k, std::uint64_t step,
                                              bool pooled = false, std::size_t picks = 0, bool own_values = false,
                                              bool routed = false, std::size_t forwards = 0) {
  return 0x5a4edull + std::uint64_t(wire_type_id<Wire>) * 50021u + std::uint64_t(topo) * 7u +
         std::uint64_t(op) * 3u + std::uint64_t(k) * 1000003u + step * 0x9e3779b97f4a7c15ull +
         (pooled ? 0x7001ed00ull + std::uint64_t(picks) * 0x100000001b3ull : 0ull) + (own_values ? 0x6f776eull : 0ull) +
         (routed ? 0x726f757465ull : 0ull) + std::uint64_t(forwards) * 0x51ed27ull;
}

TAGC_END_NAMESPACE
