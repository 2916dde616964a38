#pragma once
// defines: tagc::reducer_arguments, tagc::adaptive_sparsity, tagc::reduce_op —
//          what a user passes to Reducer::initialize (and every stage's
//          can_implement reads). Light (no stage, kernel or policy template): the
//          builder's interface (builder.hpp) takes it too.

#include <cstddef>
#include <string_view>

#include "core/config.hpp"
#include "policy/sparsity_schedule.hpp"
#include "shard/layout.hpp"

TAGC_BEGIN_NAMESPACE

enum class reduce_op { sum, mean };

// Adaptive theta (sketch reducers): after every call each rank publishes the
// load of the shard it decoded (piggybacked on the agreement check), and every
// rank moves theta so that the largest load heads for `target_load`, below the
// peeling threshold (~0.81) with margin. All ranks compute the same theta.
struct adaptive_sparsity {
  bool enabled = false;
  double target_load = 0.6;
  double min_sparsity = 0.5;     // floor on theta: never send more than half
  double max_sparsity = 0.9999;  // ceiling on theta
  friend bool operator==(const adaptive_sparsity&, const adaptive_sparsity&) = default;
};

struct reducer_arguments {
  std::size_t length = 0;   // elements of the local (full, unsharded) gradient
  int world_size = 1;
  int rank = 0;
  topology topo = topology::sharded;
  reduce_op op = reduce_op::sum;
  double sparsity = -1.0;   // theta; < 0 picks the paper's pairing for the sketch ratio
  bool check_inputs = true; // agreement + NaN/Inf check before every call (one tiny all-gather)
  adaptive_sparsity adapt{};
  // The unit's name (e.g. "mlp.fc"), the prefix of every status message the
  // reducer returns. Copied at initialize: the caller's string need not outlive it.
  std::string_view name{};
  sparsity_schedule schedule{};  // theta warm-up over the first calls (policy/sparsity_schedule.hpp)
  // A routed index's all-reduce (RoutedIndexPolicy, topology::replicated): every owner
  // forwards at most ceil(union_bound x k / N) of its largest summed entries and the
  // senders keep the others in their residuals, so what every rank receives stays near
  // union_bound x k at any N (the second selection of Ok-Topk). 0: every nonzero sum,
  // the union of the ranks' picks, which grows with N. Other reducers refuse it (a
  // plain reducer, which sends everything, ignores it as it ignores theta).
  double union_bound = 0.0;
};

TAGC_END_NAMESPACE
