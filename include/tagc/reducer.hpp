#pragma once
// defines: tagc::Reducer<Sparsify, Index, Values, Decode = DecodePolicy<>, Exec>, tagc::PackedReducer
//          (reducer_arguments, adaptive_sparsity and reduce_op live in stage/arguments.hpp).
//
// The TAGC pipeline for one flat gradient buffer (one FSDP unit), composed at
// compile time from its policies:
//
//   check    all ranks agree on lengths, nobody has NaN/Inf   (all-gather, 48 B/rank)
//   sparsify acc = g + residual; threshold = (k+1)-th largest |acc|     (no host sync)
//   index    counters of kept entries, summed across ranks   (all-reduce or reduce-scatter)
//   values   SketchPolicy: count sketch per shard of what the reduced index marks;
//            PackedPolicy: the values at the union positions, densely
//   exchange sum to each shard's owner                              (reduce-scatter)
//   decode   owner peels its shard (estimates what is left) or unpacks
//   residual residual = acc where nothing was delivered, else 0; entries the
//            owner could not resolve stay (bitmap all-gather, only when any)
//
// The Reducer is an orchestrator of stages (include/tagc/stage/, one file each,
// all with the same CUTLASS-like contract): agreement check, threshold select
// (and this rank's index marks), index exchange, values (one per values policy), decode,
// residual. can_implement(args) is the AND of the stages', initialize(args,
// exec) sizes and allocates every workspace once from the layout (their sum is
// workspace_bytes(), known beforehand from workspace_bytes_for(args)); the step
// path (reduce_scatter / all_reduce) allocates nothing. What is not orchestration
// lives in components of its own (include/tagc/reducer/): the checkpoint formats
// (state_codec.hpp), theta and its schedule and adaptation (theta_controller.hpp),
// the unit name on every status (unit_label.hpp), the two entry points with
// their topology and communicator checks (entry_points.hpp, shared with the
// shared-index and plain reducers), what it keeps besides its stages (its arguments,
// plan, theta, step count and the contract's accessors: reducer_core.hpp, shared with
// the shared-index reducer), the configuration hash the agreement check
// compares (config_hash.hpp), a call's statistics (call_stats.hpp) and its stage
// times when profiling (stage_clock.hpp). Errors are returned as
// tagc::status; whenever one is returned, the residual is as it was before the
// call. Every rank returns the same verdict for bad input (mismatched lengths,
// NaN/Inf on any rank), so no rank is left waiting in a collective.
//
// When peeling succeeds (always, with PackedPolicy), the result equals a dense
// reduce-scatter of the sparsified gradients (to float-sum tolerance). What an
// owner cannot resolve stays in the senders' residuals and is sent again
// (policy/decode.hpp), so over any number of steps, exactly up to float sums:
//   sum of inputs over ranks and steps = sum delivered + sum of residuals.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/communicator.hpp"
#include "core/status.hpp"
#include "exec/host.hpp"
#include "policy/decode.hpp"
#include "policy/index.hpp"
#include "policy/packed.hpp"
#include "policy/sketch.hpp"
#include "policy/sparsify.hpp"
#include "reducer/call_stats.hpp"
#include "reducer/config_hash.hpp"
#include "reducer/entry_points.hpp"
#include "reducer/reducer_core.hpp"
#include "reducer/stage_clock.hpp"
#include "reducer/state_codec.hpp"
#include "reducer/theta_controller.hpp"
#include "reducer/unit_label.hpp"
#include "shard/layout.hpp"
#include "stage/agreement.hpp"
#include "stage/arguments.hpp"
#include "stage/decode.hpp"
#include "stage/index.hpp"
#include "stage/plan.hpp"
#include "stage/residual.hpp"
#include "stage/select.hpp"
#include "stage/values.hpp"
#include "stats.hpp"

TAGC_BEGIN_NAMESPACE

template <class>
inline constexpr bool tagc_dependent_false = false;

// Primary template: only the combinations specialised below exist. The decode
// policy may be left out (it defaults to DecodePolicy<>): a PackedPolicy reducer
// decodes nothing, so Reducer<SparsifyPolicy, ExactIndexPolicy, PackedPolicy> is
// complete; PackedReducer<...> names one on another execution space.
template <class Sparsify, class Index, class Values, class Decode = DecodePolicy<>, class Exec = exec::host>
class Reducer {
  static_assert(tagc_dependent_false<Sparsify>,
                "tagc: no Reducer for this policy combination; expected Reducer<SparsifyPolicy, "
                "IndexPolicy<bits[, exchange]>, SketchPolicy<ratio> | PackedPolicy, DecodePolicy<mode>[, Exec]> "
                "or Reducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy | PackedBf16Policy> (shared_reducer.hpp)");
};

template <class Residual, int Bits, index_exchange IX, class Values, decode_mode Mode, class Exec>
class Reducer<BasicSparsifyPolicy<Residual>, IndexPolicy<Bits, IX>, Values, DecodePolicy<Mode>, Exec>
    : public reducer_entry_points<Reducer<BasicSparsifyPolicy<Residual>, IndexPolicy<Bits, IX>, Values, DecodePolicy<Mode>, Exec>>,
      public reducer_core {
  // The residual's storage type: float, or bf16 stored with stochastic rounding.
  using residual_t = Residual;
  // The stages this reducer is composed of (include/tagc/stage/). The values stage's
  // specialisation is the one place that knows the values policy's kind (its static_assert
  // names the policies there are).
  using agreement_stage = stage::Agreement<typename Values::value_type, Exec>;
  using select_stage = stage::ThresholdSelect<residual_t, Exec>;
  using index_stage = stage::IndexExchange<IndexPolicy<Bits, IX>, residual_t, Exec>;
  using values_stage = stage::Values<Values, residual_t, Exec>;
  using decode_stage = stage::Decode<DecodePolicy<Mode>, Exec>;
  using residual_stage = stage::ResidualStore<residual_t, Exec>;
  static constexpr bool sketched = values_stage::sketched;
  static_assert(sketched || IX == index_exchange::all_reduce,
                "tagc: PackedPolicy needs every rank to hold the whole reduced index: use index_exchange::all_reduce");
  static constexpr int Ratio = values_stage::ratio;
  static constexpr int Lanes = values_stage::lanes;
  // Theta when the arguments leave it unset: the paper's pairing for the sketch ratio
  // (a packed reducer takes the 10x sketch's, 98.75 %).
  static constexpr double default_theta = default_sparsity(sketched ? Ratio : 10);
  using state_format = per_rank_state_format;
  friend class reducer_entry_points<Reducer>;
  static constexpr const char* contract_name = "Reducer";
  // The element type on the wire (sketch cells or packed values): float, bf16 or fp16.
  using wire_t = typename Values::value_type;

 public:
  using sparsify_policy = BasicSparsifyPolicy<Residual>;
  using index_policy = IndexPolicy<Bits, IX>;
  using values_policy = Values;
  using decode_policy = DecodePolicy<Mode>;
  using exec_space = Exec;
  template <class T> using vector = typename Exec::template vector<T>;

  // The AND of the stages' (and the reducer's own: ranks, length).
  static status can_implement(const reducer_arguments& a) {
    TAGC_TRY(check_placement(a));
    TAGC_TRY(check_union_bound(a, false));
    TAGC_TRY(index_stage::can_implement(a));
    if (a.length >= (std::size_t(1) << 32))
      return {errc::invalid_argument, "length " + std::to_string(a.length) + " >= 2^32 elements; split the unit"};
    TAGC_TRY(select_stage::can_implement(a));
    TAGC_TRY(agreement_stage::can_implement(a));
    TAGC_TRY(values_stage::can_implement(a));
    TAGC_TRY(decode_stage::can_implement(a));
    TAGC_TRY(residual_stage::can_implement(a));
    // sparsity schedule (issue 11): checked against the resolved target theta
    return theta_controller::can_implement(a, default_theta);
  }

  status initialize(const reducer_arguments& args, Exec exec = {}) {
    TAGC_TRY(adopt(args, can_implement(args), default_theta, &plan_for));
    exec_ = exec;
    const stage::reducer_plan& p = plan_;
    // The stages in order, the first refusal returned (a lambda, not `s = ...` chains:
    // nvcc warns that the assignment's result, a [[nodiscard]] status, is dropped).
    const auto initialize_stages = [&]() -> status {
      TAGC_TRY(residual_.initialize(p, exec));
      TAGC_TRY(agreement_.initialize(p, exec));
      TAGC_TRY(select_.initialize(p, exec));
      TAGC_TRY(index_.initialize(p, exec));
      TAGC_TRY(values_.initialize(p, exec));
      TAGC_TRY(decode_.initialize(p, exec, values_stage::peels(p.lay)));
      return {};
    };
    if (status s = initialize_stages(); !s.ok()) return unit_(std::move(s));
    step_ = 0;
    initialized_ = true;
    return {};
  }

  // The bytes initialize(args) allocates, known before anything is allocated (CUTLASS's
  // get_workspace_size): the stages' workspaces, the residual included; equal to
  // workspace_bytes() after initialize (tests/test_workspace.cpp). 0 for arguments
  // can_implement refuses. On a device, CUB's temporaries (a few KiB, queried from CUB
  // at initialize) come on top.
  static std::size_t workspace_bytes_for(const reducer_arguments& args) {
    if (!can_implement(args).ok()) return 0;
    const stage::reducer_plan p = plan_for(args);
    return residual_stage::workspace_bytes_for(p) + agreement_stage::workspace_bytes_for(p) +
           select_stage::workspace_bytes_for(p) + index_stage::workspace_bytes_for(p) +
           values_stage::workspace_bytes_for(p) + decode_stage::workspace_bytes_for(p, values_stage::peels(p.lay));
  }

  // Change theta between calls (draining residuals, an external schedule).
  status set_sparsity(double theta) {
    TAGC_TRY(unit_(theta_controller::check(theta)));
    theta_.set(theta);
    return {};
  }

  // set_profiling, plan, arguments, name, sparsity, next_sparsity, output_size, steps:
  // reducer/reducer_core.hpp.
  bool exact_index() const { return plan_.exact_index; }
  // Bytes of every workspace the stages allocated at initialize (the residual included).
  std::size_t workspace_bytes() const {
    return residual_.workspace_bytes() + agreement_.workspace_bytes() + select_.workspace_bytes() +
           index_.workspace_bytes() + values_.workspace_bytes() + decode_.workspace_bytes();
  }

  // Read-only access to the stages (stage/*.hpp), for tests and tools that
  // compare execution paths; the stages' interfaces are not a stable API.
  struct stage_refs {
    const agreement_stage& agreement;
    const select_stage& select;
    const index_stage& index;
    const values_stage& values;
    const decode_stage& decode;
    const residual_stage& residual;
  };
  stage_refs stages() const { return {agreement_, select_, index_, values_, decode_, residual_}; }

  // reduce_scatter (ZeRO-3 / FSDP) and all_reduce (DDP): reducer/entry_points.hpp.

  // ---- state: the error-feedback residual ----
  static constexpr std::uint32_t state_magic = state_format::magic;  // "tagc"
  static constexpr std::uint32_t state_version = state_format::version;  // reducer/state_codec.hpp
  std::vector<float> residual_to_host() const {
    if constexpr (std::is_same_v<residual_t, float>) {
      return residual_.to_host();
    } else {
      const auto h = residual_.to_host();
      std::vector<float> f(h.size());
      for (std::size_t i = 0; i < h.size(); ++i) f[i] = float(h[i]);
      return f;
    }
  }
  // Bytes the residual occupies (bf16 storage: half of float's).
  std::size_t residual_bytes() const { return residual_.residual_bytes(); }

  // Checkpoint: everything a resumed run needs to continue exactly (the
  // residual, theta and the loads adaptive theta steers by); reducer/state_codec.hpp.
  std::vector<std::byte> save_state() const {
    const auto residual = residual_.to_host();
    return state_format::save<residual_t>(state_header(), saved(), residual);
  }

  // Everything restored is range-checked first (theta, the adaptive-theta
  // feedback, the step counter, every residual entry); a refused state leaves
  // the reducer as it was, with a status naming the field.
  status load_state(std::span<const std::byte> in) {
    if (!initialized_) return unit_({errc::invalid_argument, "load_state before initialize"});
    saved_reducer_state s;
    std::vector<residual_t> residual(residual_.size());
    TAGC_TRY(unit_(state_format::load<residual_t>(in, state_header(), plan_.lay, s, residual)));
    TAGC_TRY(unit_(residual_.from_host(residual.data())));
    theta_.set(s.theta);
    theta_.record({s.last_load_ppm, s.last_unresolved});
    step_ = s.step;
    return {};
  }

 private:
  // Where the stages work: shards, the index width and exchange, the layout.
  static stage::reducer_plan plan_for(const reducer_arguments& args) {
    stage::reducer_plan p;
    p.args = args;
    p.args.name = {};  // stages do not keep the caller's string
    p.shards = args.topo == topology::sharded ? args.world_size : 1;
    p.own_shard = args.topo == topology::sharded ? std::size_t(args.rank) : 0;
    const int width = index_policy::width_for(args.world_size);
    p.exact_index = index_policy::exact(width, args.world_size);
    p.pair_repair = width == 1 && args.world_size == 2;
    p.scatter_index = IX == index_exchange::reduce_scatter && args.topo == topology::sharded;
    p.lay = values_stage::make_plan_layout(args.length, p.shards, width);
    return p;
  }
  state_format::header state_header() const {
    return state_format::header_of<residual_t>(plan_.lay, args_.rank, Ratio, Lanes, sketched, args_.topo);
  }
  saved_reducer_state saved() const {
    return {theta_.sparsity(), theta_.last().load_ppm, theta_.last().unresolved, step_};
  }
  template <communicator C>
  status run(C& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats) {
    TAGC_TRY(check_call(comm));
    const layout& lay = plan_.lay;
    const bool sizes_ok = grad.size() == lay.length && out.size() == output_size();
    if (!sizes_ok && !args_.check_inputs)
      return {errc::size_mismatch, "gradient has " + std::to_string(grad.size()) + " elements (expected " +
                                       std::to_string(lay.length) + "), output " + std::to_string(out.size()) +
                                       " (expected " + std::to_string(output_size()) + ")"};
    const float* g = grad.data();
    residual_t* r = residual_.data();
    using S = reduce_stats::stage_seconds;
    seconds_ = {};
    stage_clock<Exec> clock{exec_, profiling_, seconds_};

    // 1. Check (and, with adaptive theta, agree on theta) before anything changes.
    // Pass 0 counts NaN/Inf (and max |acc| for fp16). On the host it writes acc =
    // g + residual into the residual stage's buffer and, unless adaptive theta moves
    // theta at the check, marks the index for this call's theta too.
    const double theta_early = args_.adapt.enabled ? -1.0 : current_sparsity();
    select_.begin({g, r, residual_.acc()}, sizes_ok, wire_scaled<wire_t>, theta_early);
    clock.mark(&S::sparsify);
    if (args_.check_inputs) {
      detail::select_state h{};
      TAGC_TRY(select_.read_state(h));
      typename agreement_stage::contribution mine{grad.size(), out.size(), sizes_ok ? h.nonfinite : 0u, h.top_bin,
                                                  per_rank_config_hash<wire_t>(lay.index_bits, IX, Ratio, sketched, args_.topo, args_.op),
                                                  theta_.last().load_ppm, theta_.last().unresolved};
      typename agreement_stage::verdict v;
      TAGC_TRY(agreement_.check(comm, mine, lay.length, output_size(), values_.max_cell_terms(), v));
      if constexpr (wire_scaled<wire_t>) wire_exp_ = v.wire_exp;
      if (theta_.adaptive()) theta_.adapt(double(v.max_load_ppm) * 1e-6, v.unresolved);
      clock.mark(&S::check);
    }

    // 2. Threshold: the (k+1)-th largest |acc|, k = most entries that may be kept.
    call_sparsity_ = current_sparsity();  // sparsity schedule: this call's theta (after adaptive moved sparsity_)
    select_.select(call_sparsity_);
    clock.mark(&S::sparsify);

    // 3. Index: this rank's marks (the select stage's), summed across ranks.
    select_.mark();
    clock.mark(&S::index);
    const stage::selection sel = select_.handoff();
    TAGC_TRY(index_.exchange(comm, sel.marks));
    clock.mark(&S::index_exchange);

    // The call as the later stages see it: its buffers and scales, the hand-offs.
    // Low precision: values travel as wire_t(acc * 2^k) (k = 0 but for fp16), and
    // a bf16 residual rounds stochastically with this call's seed.
    stage::call_view<residual_t> c;
    c.grad = g;
    c.residual = r;
    c.out = out.data();
    c.scale = args_.op == reduce_op::mean ? 1.0f / float(args_.world_size) : 1.0f;
    c.wire_scale = detail::pow2(wire_exp_);
    c.wire_unscale = detail::pow2(-wire_exp_);
    c.seed = detail::residual_seed(step_, args_.rank);
    c.lay = lay;
    c.sel = sel;
    c.index = index_.handoff();

    // 4. Values, exchanged to the owner(s) and decoded; then commit the residual.
    values_.encode(c, stats != nullptr);
    clock.mark(&S::sketch);
    TAGC_TRY(values_.exchange(comm));
    clock.mark(&S::value_exchange);
    const std::uint8_t* retransmit = nullptr;
    TAGC_TRY(values_.decode(comm, c, decode_, retransmit));
    clock.mark(&S::decode);
    // From here on the step cannot fail.
    residual_.template commit<wire_t>(c, retransmit);
    values_.finish(c, residual_, decode_);
    clock.mark(&S::residual);
    ++step_;                 // committed: the next call rounds a bf16 residual with fresh bits

    if (stats || args_.adapt.enabled) {
      reduce_stats local_stats;
      reduce_stats& s = stats ? *stats : local_stats;
      TAGC_TRY(per_rank_call_stats<wire_t>(s, stages(), plan_, {call_sparsity_, seconds_, wire_exp_}, c));
      theta_.record({std::int64_t(std::llround(s.load * 1e6)), std::int64_t(s.unresolved)});
    }
    return {};
  }

  // (the arguments, unit, plan, theta, step count and profiling: reducer/reducer_core.hpp)
  Exec exec_{};
  double call_sparsity_ = 0.0;  // the last call's theta (statistics)
  int wire_exp_ = 0;        // fp16: values travel as x * 2^wire_exp_ (agreed per call)

  // The stages, in the order a call runs them.
  agreement_stage agreement_;
  select_stage select_;
  index_stage index_;
  values_stage values_;
  decode_stage decode_;
  residual_stage residual_;
};

// A reducer whose values are packed (PackedPolicy, PackedBf16Policy, PackedFp16Policy):
// no decode policy to name, any execution space.
template <class Sparsify, class Index, class Values = PackedPolicy, class Exec = exec::host>
using PackedReducer = Reducer<Sparsify, Index, Values, DecodePolicy<>, Exec>;

TAGC_END_NAMESPACE
