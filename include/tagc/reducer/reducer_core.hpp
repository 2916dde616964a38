#pragma once
// defines: tagc::reducer_core — what a flat Reducer (the per-rank-index one and its
//          shared-index specialisation) keeps besides its stages and buffers: the
//          arguments it was planned for, its unit name, the plan, theta, the count of
//          completed calls and its profiling; the accessors the Reducer contract
//          publishes from them, and the check that opens every call.
//
// A base class rather than a member, so that the contract's accessors (plan(),
// arguments(), sparsity(), ...) are the reducers' own; not a template, so the
// reducers name these members without `this->`.

#include <cstdint>
#include <string_view>
#include <utility>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../reducer_arguments.hpp"
#include "../shard/layout.hpp"
#include "../stage/plan.hpp"
#include "../stats.hpp"
#include "entry_points.hpp"
#include "theta_controller.hpp"
#include "unit_label.hpp"

TAGC_BEGIN_NAMESPACE

class reducer_core {
 public:
  // Time each stage (synchronising after it) and report it in reduce_stats::seconds.
  void set_profiling(bool on) { profiling_ = on; }
  // Selects what it sends (PlainReducer: false): a two-level reducer interleaves its lanes for it.
  static constexpr bool compressed() { return true; }

  const layout& plan() const { return plan_.lay; }
  const reducer_arguments& arguments() const { return args_; }  // (its name is empty: see name())
  std::string_view name() const { return unit_.name(); }
  double sparsity() const { return theta_.sparsity(); }
  // Theta of the next call: sparsity() on the sparsity schedule's ramp at steps().
  double next_sparsity() const { return current_sparsity(); }
  // Length of the shard a rank receives (sharded) or of the whole buffer (replicated).
  std::size_t output_size() const {
    return args_.topo == topology::sharded ? plan_.lay.shard_size : plan_.lay.length;
  }
  // Successful calls so far (seeds the stochastic rounding of a bf16 residual; checkpointed).
  std::uint64_t steps() const { return step_; }

 protected:
  // initialize's opening: the unit's name kept, then either can_implement's refusal
  // (`implementable`, named) or the arguments adopted: kept without the name (a
  // moved reducer must not view a moved string; unit_label keeps its own copy),
  // theta started from them, and the plan the stages will be sized from (made only
  // for arguments can_implement accepted).
  status adopt(const reducer_arguments& args, status implementable, double default_theta,
               stage::reducer_plan (*plan_for)(const reducer_arguments&)) {
    unit_.assign(args.name);
    if (!implementable.ok()) return unit_(std::move(implementable));
    args_ = args;
    args_.name = {};
    theta_.initialize(args, default_theta);
    plan_ = plan_for(args);
    return {};
  }

  // Every status a call returns names the unit and the step (the reducer's own count
  // of completed calls): "unit 'mlp.fc' (step 12): ...".
  status label(status s) const { return unit_(std::move(s), step_); }

  // Theta for this call: the one place it is read (adaptive theta and
  // set_sparsity move it between calls).
  double current_sparsity() const { return theta_.at(step_); }

  // The first check of a call: initialised, and on the communicator planned for.
  template <communicator C>
  status check_call(C& comm) const {
    if (!initialized_) return {errc::invalid_argument, "Reducer used before initialize()"};
    return check_communicator(comm, args_);
  }

  reducer_arguments args_{};  // name left empty: see unit_
  unit_label unit_;
  stage::reducer_plan plan_{};
  theta_controller theta_;
  bool initialized_ = false;
  bool profiling_ = false;
  reduce_stats::stage_seconds seconds_{};
  std::uint64_t step_ = 0;  // successful calls (checkpointed): seeds a bf16 residual's rounding
};

TAGC_END_NAMESPACE
