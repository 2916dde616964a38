#pragma once
// defines: tagc::stage::reducer_plan (what every stage is sized from at
//          initialize), tagc::stage::selection and tagc::stage::received_index
//          (what the select and index stages hand on: each owns its buffers, the
//          later stages read them through these), and tagc::stage::call_view (one
//          call as the values, decode and residual stages see it).
//
// The stages (one file each in this folder) share the CUTLASS-like contract of
// the Reducer that composes them:
//   static status can_implement(const reducer_arguments&)
//   status initialize(const reducer_plan&, Exec)   allocates every workspace, once
//   std::size_t workspace_bytes() const            what initialize allocated
//   ... run methods                                 allocate nothing
// Reducer::can_implement is the AND of its stages', its workspace their sum.

#include <cstddef>
#include <cstdint>

#include "../core/config.hpp"
#include "../detail/index_kernels.hpp"
#include "../detail/compress_handoff.hpp"
#include "../detail/select_kernels.hpp"
#include "../shard/layout.hpp"
#include "arguments.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

struct reducer_plan {
  reducer_arguments args{};
  layout lay{};
  int shards = 1;              // world size (sharded) or 1 (replicated)
  std::size_t own_shard = 0;   // the shard this rank decodes
  bool exact_index = false;    // the reduced index is the union (senders need not check it)
  bool pair_repair = false;    // 1-bit index at N = 2: repaired to the exact union
  bool scatter_index = false;  // the index is reduce-scattered (the owner holds only its shard's)
  // In replicated mode every rank decodes the same shard to the same bits, so
  // one rank (0) stands for "the owner" when estimates are owed.
  bool owes_estimates() const { return args.topo == topology::sharded || args.rank == 0; }
};

// The select stage's hand-off (ThresholdSelect::handoff()): what it found this call.
struct selection {
  detail::select_state* state = nullptr;      // the threshold (in the space's memory)
  unsigned long long* counters = nullptr;     // [0] kept, [1] deferred, [2] retransmitted
  const std::uint8_t* marks = nullptr;        // this rank's marks [shards][index_bytes]
  detail::kept_entries kept{};                // host: acc and the kept entries listed; else none
};

// The index stage's hand-off (IndexExchange::handoff()): the reduced index as this rank holds it.
struct received_index {
  const std::uint8_t* reduced = nullptr;       // the reduced index as this rank received it
  const std::uint8_t* own = nullptr;           // reduced index of this rank's shard
  const std::uint8_t* sender_check = nullptr;  // whole reduced index, or nullptr when exact
};

// One call as the values, decode and residual stages see it: the call's buffers
// and scales, and the earlier stages' hand-offs.
template <class Residual>
struct call_view {
  const float* grad = nullptr;
  Residual* residual = nullptr;
  float* out = nullptr;
  float scale = 1.0f;                            // the op's: 1/N for mean
  float wire_scale = 1.0f, wire_unscale = 1.0f;  // fp16 range scale 2^k, 2^-k
  std::uint32_t seed = 0;                        // stochastic rounding of a bf16 residual
  layout lay{};
  selection sel{};
  received_index index{};

  // The value this rank sends for padded element (s, e).
  detail::contribution<Residual> contribution() const { return {grad, residual, index.sender_check, sel.state, lay}; }
};

}  // namespace stage
TAGC_END_NAMESPACE
