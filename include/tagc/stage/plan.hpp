#pragma once
// defines: tagc::stage::reducer_plan (what every stage is sized from at
//          initialize) and tagc::stage::call_view (what one call's stages hand
//          each other: pointers into the workspaces, the call's scales and seed).
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

template <class Residual>
struct call_view {
  const float* grad = nullptr;
  Residual* residual = nullptr;
  detail::select_state* state = nullptr;      // threshold (device-resident)
  unsigned long long* counters = nullptr;     // [0] kept, [1] deferred, [2] retransmitted
  const std::uint8_t* reduced_index = nullptr;  // the reduced index as this rank received it
  const std::uint8_t* own_index = nullptr;    // reduced index of this rank's shard
  const std::uint8_t* sender_check = nullptr; // whole reduced index, or nullptr when exact
  float* out = nullptr;
  float scale = 1.0f;                         // the op's: 1/N for mean
  float wire_scale = 1.0f, wire_unscale = 1.0f;  // fp16 range scale 2^k, 2^-k
  std::uint32_t seed = 0;                     // stochastic rounding of a bf16 residual
  // Host paths only (detail/host_compress.hpp), else nullptr / false:
  const float* acc = nullptr;                 // g + residual, computed once this call
  const std::uint32_t* kept = nullptr;        // ascending positions of the kept entries
  const float* kept_values = nullptr;         // acc at those positions, in the same order
  std::size_t kept_count = 0;
  bool kept_listed = false;                   // whether `kept` holds them (it has a capacity)
  layout lay{};

  // The value this rank sends for padded element (s, e).
  detail::contribution<Residual> contribution() const { return {grad, residual, sender_check, state, lay}; }
};

}  // namespace stage
TAGC_END_NAMESPACE
