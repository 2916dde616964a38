#pragma once
// defines: tagc::reduce_stats — what one Reducer call did, for logs and tests.

#include <cstddef>

#include "core/config.hpp"

TAGC_BEGIN_NAMESPACE

struct reduce_stats {
  // Sparsify (this rank)
  std::size_t elements = 0;   // gradient length
  std::size_t kept = 0;       // entries of g + residual above the threshold
  std::size_t deferred = 0;   // kept but not marked by the reduced index (1-bit carries): back to the residual
  std::size_t retransmitted = 0;  // kept and marked, but their owner could not resolve them: back to the residual
  double sparsity = 0.0;      // 1 - kept / elements: the sparsity reached
  float threshold = 0.0f;     // |x| must exceed this to be sent
  double theta = 0.0;         // target sparsity used (moves with adaptive sparsity)
  // Index
  int index_bits = 0;              // counter width in use (shared index: 32 a listed position, 16 a
                                   // pooled one (coded lists), 1 a bitmap, 0 no positions sent)
  bool exact_index = false;        // the reduced index is exactly the union of supports
  std::size_t index_popcount = 0;  // entries marked in the reduced index this rank received
  // Decode (this rank's shard)
  bool dense = false;              // shard exchanged uncompressed (too small to sketch)
  std::size_t support = 0;         // entries the reduced index marks in this shard
  double load = 0.0;               // support / sketch cells: peeling is exact below ~0.81
  std::size_t peeled = 0;          // resolved exactly
  std::size_t unresolved = 0;      // peeling could not resolve (estimated or delivered as 0; retransmitted)
  std::size_t packed_slots = 0;    // PackedPolicy: values per shard exchanged (largest union)
  std::size_t packed_union = 0;    // PackedPolicy: union entries of all shards together
  bool packed_back_to_back = false;  // PackedPolicy: a hot shard made the unions go back to back, all-reduced
  // Low precision (policy/wire_value.hpp)
  int value_type_bytes = 4;        // bytes per exchanged value or cell: 4 (float), 2 (bf16, fp16)
  int value_scale_exponent = 0;    // fp16: values travel as x * 2^this (agreed across ranks); else 0
  double unfed_rounding = 0.0;     // 16-bit sketch cells: sum of |rounding| of this rank's cell sums, which
                                   // no residual gets back (per-value rounding is fed back; the collective's
                                   // own rounding of the summed cells/slots is seen by no rank)
  std::size_t residual_bytes = 0;  // memory of this rank's error-feedback residual (bf16 storage: half)
  // Traffic, bytes this rank sends (ring model, see ring_bytes_sent)
  double control_bytes = 0.0;  // agreement check (all-gather of 32 bytes per rank)
  double index_bytes = 0.0;    // index all-reduce
  double value_bytes = 0.0;    // sketch (or dense values) reduce-scatter / all-reduce
  double retransmit_bytes = 0.0;  // unresolved count all-reduce + bitmap all-gather (when any)
  // Two-level reducers (two_level_reducer.hpp): the plain reduce-scatter among the ranks
  // of this rank's node; the fields above then count only what crosses nodes.
  double intranode_bytes = 0.0;
  double total_bytes() const { return control_bytes + index_bytes + value_bytes + retransmit_bytes + intranode_bytes; }
  double internode_bytes() const { return total_bytes() - intranode_bytes; }
  // Stage wall times in seconds, filled only when the Reducer profiles
  // (set_profiling(true)): each stage then ends with a synchronisation, which on
  // a GPU costs overlap, so it is off by default.
  struct stage_seconds {
    double check = 0, sparsify = 0, index = 0, index_exchange = 0, sketch = 0, value_exchange = 0, decode = 0;
    // Committing the residual (error feedback over the whole gradient, after the
    // owner's decode): the sender's side of compression, so compress() counts it.
    // decode is the owner's shard alone (and telling senders what it left).
    double residual = 0;
    double compress() const { return sparsify + index + sketch + residual; }
    double exchange() const { return check + index_exchange + value_exchange; }
  } seconds;
};

TAGC_END_NAMESPACE
