#pragma once
// defines: tagc::link_model, tagc::codec_model, tagc::cost_estimate,
//          tagc::estimate_reduce_scatter, tagc::estimate_two_level_reduce_scatter,
//          tagc::estimate_two_level_all_reduce, tagc::shared_selection_cross_bits,
//          tagc::gathered_index_cross_bits, tagc::gathered_union_ratio,
//          tagc::routed_index_cross_bits, tagc::routed_all_reduce_cross_bits —
//          does compressing this unit pay (flat, or across nodes only)?
//
// The paper found compressing every layer *slower* than compressing none: small
// tensors cost more to compress than to send, and each compressed exchange is
// several latency-bound collectives instead of one. This model decides per unit
// from measured figures (link bandwidth and latency, codec throughput, and the
// bits per parameter the Reducer reported), so a trainer can pick, per unit,
// the plain reduce-scatter or the Reducer.
//
//   dense      = a + (N-1)/N * 4n / B
//   compressed = c*a + (N-1)/N * n*bits/8 / B + 4n / T_compress + 4(n/N) / T_decode
//
// with a the per-collective latency, B the link bandwidth (bytes/s per rank),
// and c the collectives one Reducer call issues (agreement check, index,
// values, unresolved count: 4).

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/config.hpp"

TAGC_BEGIN_NAMESPACE

struct link_model {
  double bytes_per_second = 1.25e9;  // per rank, what a plain reduce-scatter achieves (busbw)
  double latency_seconds = 50e-6;    // per collective
};

struct codec_model {
  double compress_bytes_per_second = 1e9;  // fp32 gradient bytes through sparsify + index + values
  double decode_bytes_per_second = 1e9;    // fp32 shard bytes through decode
};

struct cost_estimate {
  double dense_seconds = 0;
  double compressed_seconds = 0;
  bool pays() const { return compressed_seconds < dense_seconds; }
  double speedup() const { return compressed_seconds > 0 ? dense_seconds / compressed_seconds : 0; }
};

inline constexpr int reducer_collectives = 4;

inline cost_estimate estimate_reduce_scatter(std::size_t length, int world, double compressed_bits_per_param,
                                             const link_model& link, const codec_model& codec,
                                             int collectives = reducer_collectives) {
  cost_estimate c;
  const double n = double(length), N = double(world > 0 ? world : 1), ring = (N - 1.0) / N;
  c.dense_seconds = link.latency_seconds + ring * 4.0 * n / link.bytes_per_second;
  c.compressed_seconds = double(collectives) * link.latency_seconds +
                         ring * n * compressed_bits_per_param / 8.0 / link.bytes_per_second +
                         4.0 * n / codec.compress_bytes_per_second + 4.0 * (n / N) / codec.decode_bytes_per_second;
  return c;
}

namespace detail {
// Both two-level layouts: a plain reduce-scatter among the node's K ranks, then the M
// nodes exchange each rank's slice of n/K: `cross_factor` times (M-1)/M of it through the
// node's link when plain (1: reduce-scatter, 2: all-reduce), compressed at cross_bits
// (the convention below), decoded over the slice (all-reduce) or one shard of it.
inline cost_estimate two_level_estimate(std::size_t length, int nodes, int ranks_per_node, double node_bits,
                                        double cross_bits, double cross_factor, const link_model& node_link,
                                        const link_model& cross_link, const codec_model& codec, int collectives) {
  const double n = double(length), M = double(nodes > 0 ? nodes : 1), K = double(ranks_per_node > 0 ? ranks_per_node : 1);
  const double decoded = cross_factor > 1.0 ? n / K : n / (K * M);
  const double node =
      K > 1 ? node_link.latency_seconds + (K - 1.0) / K * n * node_bits / 8.0 / node_link.bytes_per_second : 0.0;
  const double cross = (M - 1.0) / M * n / 8.0 / cross_link.bytes_per_second;  // seconds per bit per parameter
  cost_estimate c;
  c.dense_seconds = node + (M > 1 ? cross_link.latency_seconds + cross_factor * cross * node_bits : 0.0);
  c.compressed_seconds = node + double(collectives) * cross_link.latency_seconds + cross * cross_bits +
                         4.0 * (n / K) / codec.compress_bytes_per_second + 4.0 * decoded / codec.decode_bytes_per_second;
  return c;
}
}  // namespace detail

// Two levels (two_level_reducer.hpp): a plain reduce-scatter of the whole buffer among a
// node's K ranks over `node_link` (in `node_bits` per parameter: 32 fp32, 16 bf16), then
// among the M nodes on each rank's slice of n/K: plain in `node_bits` (the dense side: the
// fair two-level baseline, as ZeRO++ compares) or compressed at `cross_bits` per parameter.
// cross_link is the node's link: its K ranks share it, and together they move (M-1)/M of
// the whole buffer through it (K slices of n/K).
//
//   node       = a + (K-1)/K * n*node_bits/8 / B_node
//   dense      = node + a + (M-1)/M * n*node_bits/8 / B_cross          (K slices of n/K)
//   compressed = node + c*a + (M-1)/M * n*cross_bits/8 / B_cross + 4(n/K) / T_compress + 4(n/W) / T_decode
//                + a + (K-1)/K * 4(n/M) / B_node        (the interleaved lanes' all-gather inside the node)
inline cost_estimate estimate_two_level_reduce_scatter(std::size_t length, int nodes, int ranks_per_node,
                                                       double node_bits, double cross_bits,
                                                       const link_model& node_link, const link_model& cross_link,
                                                       const codec_model& codec,
                                                       int collectives = reducer_collectives) {
  cost_estimate c = detail::two_level_estimate(length, nodes, ranks_per_node, node_bits, cross_bits, 1.0, node_link,
                                               cross_link, codec, collectives);
  // The compressed cross stage interleaves its lanes, so the node all-gathers its region
  // (n/M floats) to put the shards back (two_level_reducer.hpp, step 5).
  if (ranks_per_node > 1 && nodes > 0)
    c.compressed_seconds += node_link.latency_seconds + double(ranks_per_node - 1) / double(ranks_per_node) * 4.0 *
                                                            (double(length) / double(nodes)) / node_link.bytes_per_second;
  return c;
}

// Hybrid sharding (HSDP: FSDP2 with a 2-D mesh): parameters and optimizer state are
// sharded inside a node and replicated across nodes, so after the node's plain
// reduce-scatter every node needs the sum of its slices, not one shard of it: the M nodes
// all-reduce. A plain ring moves 2(M-1)/M of the buffer through each node's link, twice a
// reduce-scatter's bytes. `cross_bits` is in the convention above ((M-1)/M * n * bits/8
// bytes per node) and must be what the compressed all-reduce sends: for a shared selection
// it equals its reduce-scatter's (its values are all-reduced either way); a per-rank
// selection's reduce-scatter figure would under-price it. Decoded over the whole slice.
//
//   dense      = node + a + 2(M-1)/M * n*node_bits/8 / B_cross
//   compressed = node + c*a + (M-1)/M * n*cross_bits/8 / B_cross + 4(n/K) / T_compress + 4(n/K) / T_decode
inline cost_estimate estimate_two_level_all_reduce(std::size_t length, int nodes, int ranks_per_node,
                                                   double node_bits, double cross_bits,
                                                   const link_model& node_link, const link_model& cross_link,
                                                   const codec_model& codec,
                                                   int collectives = reducer_collectives) {
  return detail::two_level_estimate(length, nodes, ranks_per_node, node_bits, cross_bits, 2.0, node_link, cross_link,
                                    codec, collectives);
}

// What a shared selection (SharedIndexPolicy) sends across M nodes, per compressed
// parameter, in the convention above: the k = density * n agreed values all-reduced in
// `value_bits` (a ring moves 2(M-1)/M of them) and the leader's positions broadcast as a
// bitmap (1 bit per parameter) or a list of 32-bit positions, whichever is smaller (a
// pipelined broadcast forwards (M-1)/M of it per rank). Independent of M:
//   bits = 2 * value_bits * density + min(1, 32 * density)
// tests/test_shared_index.cpp holds it equal to the bytes the reducer reports.
inline double shared_selection_cross_bits(double density, double value_bits = 16.0) {
  return 2.0 * value_bits * density + std::min(1.0, 32.0 * density);
}

// What the gathered index (GatheredIndexPolicy: every node its own k) sends across M
// nodes, per compressed parameter, in the convention above. Every node's k = density * n
// positions are all-gathered, M lists coded in 16-bit offsets (and a 32-bit word per
// 65536 positions: detail::coded_list_words) or M bitmaps, whichever is smaller (a ring
// forwards M - 1 of them through each node: M * min(16 d + 1/2048, 1) bits here),
// and the values at the union of the M selections, `union_ratio` * k positions (between 1
// and M; it grows with M and is measured, docs/results.md, Scaling), are all-reduced in
// `value_bits`; a sharded call whose union holds over half the buffer reduce-scatters the
// buffer instead (value_bits). Unlike the shared selection's, this grows with M:
//   bits = M * min(1, 16 d + 1/2048) + min(2 * value_bits * union_ratio * d, value_bits)   (sharded)
//   bits = M * min(1, 16 d + 1/2048) + 2 * value_bits * union_ratio * d                      (replicated)
// (the list's count word, 32 bits per list, is left out).
// tests/test_pooled_index.cpp holds it equal to the bytes the reducer reports.
inline double gathered_index_cross_bits(double density, int nodes, double union_ratio, double value_bits = 16.0,
                                        bool sharded = true) {
  const double values = 2.0 * value_bits * union_ratio * density;
  const double list_bits = 16.0 * density + 32.0 / 65536.0;
  return double(nodes) * std::min(1.0, list_bits) + (sharded && 2.0 * union_ratio * density > 1.0 ? value_bits : values);
}

// What the routed index (RoutedIndexPolicy: every node its own k, each entry sent to its
// shard's owner only) sends across M nodes, per compressed parameter, in the convention
// above: a node sends its k = density * n entries, 32-bit offset and value, of which the
// (M-1)/M for other shards leave it (the share the convention divides out, where the
// shards are evenly loaded), and a count per peer (left out); a call whose entries would
// outweigh the buffer reduce-scatters the buffer instead (value_bits). Independent of M:
//   bits = min((32 + value_bits) * density, value_bits)
// tests/test_routed_index.cpp holds it to the bytes the reducer reports.
inline double routed_index_cross_bits(double density, double value_bits = 16.0) {
  return std::min((32.0 + value_bits) * density, value_bits);
}

// The routed index in an all-reduce (HSDP across nodes): the entries go to their owners
// as above, then each owner broadcasts its nonzero sums as entries, so every node
// receives (M-1)/M of the union of the M selections, `union_ratio` * k entries
// (gathered_union_ratio): the picks' bytes do not grow with M, the union's do. A call
// whose picks pass a quarter of the buffer's bytes all-reduces the buffer (2 value_bits).
//   bits = (32 + value_bits) * density * (1 + union_ratio)
// (the counts, 64 bits per peer twice, are left out). With reducer_arguments::union_bound
// B the owners forward at most B k sums: union_ratio is then at most B.
// tests/test_routed_index.cpp and test_routed_union_bound.cpp hold it to the bytes the
// reducer reports.
inline double routed_all_reduce_cross_bits(double density, double union_ratio, double value_bits = 16.0) {
  const double entries = (32.0 + value_bits) * density;
  return entries > value_bits / 4.0 ? 2.0 * value_bits : entries * (1.0 + union_ratio);
}

// The union of M nodes' own selections over k, modelled as union_at_two * (M/2)^growth
// and kept between 1 and M. The defaults are the fit to GPT-2 d2 at theta 0.9875 over
// 2-16 ranks (docs/results/gathered-union.csv: 1.70, 2.71, 4.25, 6.13 at M = 2, 4, 8, 16);
// another model or theta has its own.
inline double gathered_union_ratio(int nodes, double union_at_two = 1.735, double growth = 0.621) {
  if (nodes <= 1) return 1.0;
  return std::clamp(union_at_two * std::pow(double(nodes) / 2.0, growth), 1.0, double(nodes));
}

TAGC_END_NAMESPACE
