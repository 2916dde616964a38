#pragma once
// defines: tagc::stage::Values<ValuesPolicy, Residual, Exec> — the primary
//          template of the values stage (what travels for the kept entries and
//          how the owner gets them back). One specialisation per values policy,
//          one file each:
//            values_sketch.hpp  SketchPolicy<ratio, lanes, value>: a count sketch per
//                               shard, reduce-scattered, peeled by stage::Decode
//            values_packed.hpp  PackedValuesPolicy<value>: the values at the union
//                               positions, densely
//
// Every specialisation has the stage contract (plan.hpp) and, per call:
//   encode(call, measure)        build what this rank sends
//   exchange(comm)               sum it to the owner(s)
//   decode(comm, call, dec, rt)  the owner's values into call.out (may still fail;
//                                rt: the unresolved-entry bitmaps senders keep, or nullptr)
//   finish(call, residual, dec)  after the residual is committed (cannot fail)
//   fill_stats(stats, call, dec)

#include <type_traits>

#include "../core/config.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class>
inline constexpr bool values_dependent_false = false;

template <class ValuesPolicy, class Residual, class Exec>
class Values {
  static_assert(values_dependent_false<ValuesPolicy>,
                "tagc: the third Reducer policy is SketchPolicy<ratio[, lanes[, value]]> or "
                "PackedValuesPolicy<float|bfloat16|float16>");
};

}  // namespace stage
TAGC_END_NAMESPACE

#include "values_packed.hpp"
#include "values_sketch.hpp"
