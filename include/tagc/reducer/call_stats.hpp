#pragma once
// defines: tagc::call_summary, tagc::summary_stats (the reduce_stats fields every
//          flat reducer fills the same way), tagc::agreement_bytes_sent (the
//          agreement check's traffic), tagc::call_record and
//          tagc::per_rank_call_stats (the per-rank-index Reducer's statistics of one
//          call, read from its stages once the call has committed).
//
// Statistics are read after the step, and only when asked for (or for adaptive
// theta): they cost device-to-host copies of the stages' counters, which the step
// path itself never needs.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../comm/communicator.hpp"
#include "../core/bits.hpp"
#include "../core/status.hpp"
#include "../stage/plan.hpp"
#include "../stats.hpp"

TAGC_BEGIN_NAMESPACE

// What every flat reducer knows of a call the same way: its length and theta, the
// entries this rank kept and the threshold they passed, the stage times.
struct call_summary {
  std::size_t elements = 0;
  double theta = 0.0;
  std::size_t kept = 0;
  std::uint32_t threshold_bits = 0;
  reduce_stats::stage_seconds seconds{};
};

// A fresh reduce_stats with the summary's fields (the sparsity reached among them).
inline reduce_stats summary_stats(const call_summary& c) {
  reduce_stats s{};
  s.elements = c.elements;
  s.theta = c.theta;
  s.kept = c.kept;
  s.sparsity = c.elements ? 1.0 - double(c.kept) / double(c.elements) : 1.0;
  s.threshold = float_from_bits(c.threshold_bits);
  s.seconds = c.seconds;
  return s;
}

// Bytes this rank sends for the agreement check (an all-gather of `bytes_per_rank`
// from each of `world` ranks), 0 when the reducer does not check its inputs.
inline double agreement_bytes_sent(bool check_inputs, std::size_t bytes_per_rank, int world) {
  return check_inputs ? ring_bytes_sent(collective::all_gather, double(bytes_per_rank * std::size_t(world)), world)
                      : 0.0;
}

// What the per-rank-index Reducer knows of a call that its stages do not: the
// call's theta, the stage times, the fp16 range exponent agreed for it.
struct call_record {
  double theta = 0.0;
  reduce_stats::stage_seconds seconds{};
  int wire_exp = 0;
};

// The per-rank-index Reducer's statistics of the call `c` just committed, from its
// stages (`st`: Reducer::stage_refs) and plan; `Wire` is its values' wire type.
template <class Wire, class Stages, class Residual>
status per_rank_call_stats(reduce_stats& s, const Stages& st, const stage::reducer_plan& plan, const call_record& call,
                           const stage::call_view<Residual>& c) {
  using select_stage = std::remove_cvref_t<decltype(st.select)>;
  using agreement_stage = std::remove_cvref_t<decltype(st.agreement)>;
  unsigned long long cnt[select_stage::n_counters];
  detail::select_state state{};
  TAGC_TRY(st.select.read_counters(cnt));
  TAGC_TRY(st.select.read_state(state));
  const layout& lay = plan.lay;
  const int world = plan.args.world_size;
  s = summary_stats({lay.length, call.theta, cnt[0], state.threshold, call.seconds});
  s.deferred = cnt[1];
  s.retransmitted = cnt[2];
  s.index_bits = lay.index_bits;
  s.exact_index = plan.exact_index;
  s.dense = lay.dense;
  st.values.fill_stats(s, c, st.decode);
  // A reduce-scattered index is the owner's shard alone: its marks are the support
  // the values stage counted already (no second pass over the index).
  s.index_popcount = plan.scatter_index && !lay.dense ? s.support : st.index.received_marks();
  s.control_bytes = agreement_bytes_sent(plan.args.check_inputs, agreement_stage::bytes_per_rank(), world);
  s.index_bytes = ring_bytes_sent(plan.scatter_index ? collective::reduce_scatter : collective::all_reduce,
                                  double(st.index.local_bytes()), world);
  s.value_bytes = ring_bytes_sent(st.values.value_collective(), double(st.values.value_bytes_sent()), world);
  s.retransmit_bytes = st.decode.retransmit_bytes_sent();
  s.value_type_bytes = int(sizeof(Wire));
  s.value_scale_exponent = call.wire_exp;
  s.unfed_rounding = st.values.unfed_rounding();
  s.residual_bytes = st.residual.residual_bytes();
  return {};
}

TAGC_END_NAMESPACE
