#pragma once
// defines: tagc::check_placement(args) (world size and rank, the first check of
//          every reducer's can_implement), tagc::check_communicator(comm, args) (a
//          call's communicator is the one the reducer was planned for: the first
//          check of a call), tagc::reducer_entry_points<Derived> (the
//          two calls of the Reducer contract, reduce_scatter and all_reduce, each
//          refused on a reducer planned for the other topology).
//
// Every flat reducer (Reducer, its shared-index specialisation, PlainReducer) derives
// from reducer_entry_points<itself> and provides, privately (the base is a friend):
//   static constexpr const char* contract_name   "Reducer", "PlainReducer": for messages
//   template <communicator C> status run(C&, std::span<const float> grad,
//                                        std::span<float> out, reduce_stats*)
//   status label(status) const                    its unit_label applied (with the step
//                                                 where the reducer counts them)
// and publicly arguments() (the topology it was planned for).

#include <span>
#include <string>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../shard/layout.hpp"
#include "../reducer_arguments.hpp"
#include "../stats.hpp"

TAGC_BEGIN_NAMESPACE

inline status check_placement(const reducer_arguments& a) {
  if (a.world_size < 1) return {errc::invalid_argument, "world size " + std::to_string(a.world_size) + " < 1"};
  if (a.rank < 0 || a.rank >= a.world_size)
    return {errc::invalid_argument,
            "rank " + std::to_string(a.rank) + " outside [0, " + std::to_string(a.world_size) + ")"};
  return {};
}

// reducer_arguments::union_bound: a finite number >= 0, and set only for a reducer that
// bounds a routed index's all-reduce (`bounds`).
inline status check_union_bound(const reducer_arguments& a, bool bounds) {
  if (!(a.union_bound >= 0.0 && a.union_bound <= 1e6))
    return {errc::invalid_argument, "union_bound " + std::to_string(a.union_bound) + " outside [0, 1e6]"};
  if (a.union_bound > 0.0 && !bounds)
    return {errc::invalid_argument,
            "union_bound " + std::to_string(a.union_bound) +
                " bounds what the owners of a routed index forward in an all-reduce (index=routed, "
                "topology::replicated); this reducer has no owners to bound (set it to 0)"};
  return {};
}

// The communicator a call brings has the rank and size the reducer was planned for
// (checked before any collective: a mismatch would pair the wrong ranks' buffers).
template <communicator C>
status check_communicator(C& comm, const reducer_arguments& planned) {
  if (comm.size() != planned.world_size || comm.rank() != planned.rank)
    return {errc::invalid_argument, "communicator is rank " + std::to_string(comm.rank()) + " of " +
                                        std::to_string(comm.size()) + ", the reducer was planned for rank " +
                                        std::to_string(planned.rank) + " of " + std::to_string(planned.world_size)};
  return {};
}

template <class Derived>
class reducer_entry_points {
 public:
  // ZeRO-3 / FSDP: rank r receives shard r (output_size() elements, tail padding 0).
  template <communicator C>
  status reduce_scatter(C& comm, std::span<const float> grad, std::span<float> shard, reduce_stats* stats = nullptr) {
    return enter(topology::sharded, comm, grad, shard, stats);
  }
  // DDP: every rank receives the whole reduced gradient.
  template <communicator C>
  status all_reduce(C& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats = nullptr) {
    return enter(topology::replicated, comm, grad, out, stats);
  }

 private:
  static const char* topology_name(topology t) { return t == topology::sharded ? "sharded" : "replicated"; }

  template <communicator C>
  status enter(topology called, C& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats) {
    Derived& self = static_cast<Derived&>(*this);
    const topology planned = self.arguments().topo;
    if (planned != called)
      return self.label({errc::invalid_argument, std::string(called == topology::sharded ? "reduce_scatter" : "all_reduce") +
                                                     " on a " + Derived::contract_name + " initialised for topology::" +
                                                     topology_name(planned)});
    return self.label(self.run(comm, grad, out, stats));
  }
};

TAGC_END_NAMESPACE
