#pragma once
// defines: tagc::Reducer<SparsifyPolicy, SharedIndexPolicy | PooledIndexPolicy |
//          GatheredIndexPolicy | RoutedIndexPolicy, PackedPolicy | PackedBf16Policy[, Decode, Exec]> — the reducer whose
//          selection is agreed across ranks before any value moves
//          (policy/shared_index.hpp), so its bytes per rank do not grow with the
//          number of ranks.
//
// One call, on every rank:
//
//   acc       acc = g + residual, into a buffer (the residual is untouched until the call commits)
//   check     all ranks agree on lengths, configuration, theta and the step (which
//             names the leader); nobody has NaN/Inf               (all-gather, 48 B/rank)
//   select    the leader, rank steps() mod N, takes its k largest |acc|; the
//             positions are broadcast (sorted list or bitmap)  (stage/shared_selection.hpp)
//             or, pooled, every rank takes its share of the picks (k times the
//             last call's overlap, so that the union comes near k; gathered: its
//             own k); the shares are all-gathered and their union is the selection;
//             routed, every rank takes its own k and exchanges no positions
//   values    every rank packs its acc at the selected positions (fp32 or bf16;
//             gathered: only at those it picked itself, zeros elsewhere) and the
//             values are summed by an all-reduce; a sharded call whose
//             selection holds over half the buffer lays them out in the buffer and
//             reduce-scatters it instead (fewer bytes, the same sums: buffer_exchange)
//             routed: every rank sends its picks as (offset, value) entries to
//             their shards' owners, which add them (stage/routed_exchange.hpp); an
//             all-reduce cuts the buffer into N owners' regions and each owner then
//             broadcasts its nonzero sums, so every rank writes the whole buffer
//   output    each rank writes its shard (or the whole buffer) from the sums, zeros elsewhere
//   residual  residual = acc, except where this rank sent (the shared positions;
//             gathered and routed: its own picks; theta 0: everywhere): acc - wire(acc)
//
// Why an all-reduce of the selection's values and not a reduce-scatter: the
// positions are not spread evenly over the shards (the largest embedding
// gradients all fall into one "hot" shard, issue 33), so a reduce-scatter would
// pad every shard's block to the fullest shard's count, up to k each, N k values
// in all; the all-reduce sends 2 (N-1)/N values per rank and selected position
// whatever the spread, and each rank keeps the part that falls into its shard.
// Once the selection holds over half the buffer, the buffer reduce-scattered costs
// less than that (buffer_exchange), spread or not.
//
// The same contract as every Reducer: can_implement, initialize(args, exec)
// allocates every workspace once (workspace_bytes()), the call allocates
// nothing, errors are statuses naming the unit and step, every rank returns the
// same verdict for bad input, and a refused call leaves the residual as it was.
// Over any number of calls, exactly up to float sums (and, with bf16 values, the
// collective's rounding of the summed values, which no rank sees):
//   sum of inputs over ranks and calls = sum delivered + sum of residuals.

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

#include <thrust/fill.h>

#include "comm/communicator.hpp"
#include "core/status.hpp"
#include "detail/launch.hpp"
#include "detail/shared_kernels.hpp"
#include "exec/host.hpp"
#include "policy/packed.hpp"
#include "policy/shared_index.hpp"
#include "policy/sparsify.hpp"
#include "reducer.hpp"
#include "reducer/call_stats.hpp"
#include "reducer/config_hash.hpp"
#include "reducer/entry_points.hpp"
#include "reducer/reducer_core.hpp"
#include "reducer/stage_clock.hpp"
#include "reducer/state_codec.hpp"
#include "reducer/theta_controller.hpp"
#include "reducer/unit_label.hpp"
#include "stage/agreement.hpp"
#include "stage/arguments.hpp"
#include "stage/plan.hpp"
#include "stage/routed_exchange.hpp"
#include "stage/select.hpp"
#include "stage/shared_selection.hpp"
#include "stats.hpp"

TAGC_BEGIN_NAMESPACE

template <class Residual, shared_pick Pick, class Value, decode_mode Mode, class Exec>
class Reducer<BasicSparsifyPolicy<Residual>, BasicSharedIndexPolicy<Pick>, PackedValuesPolicy<Value>, DecodePolicy<Mode>,
              Exec>
    : public reducer_entry_points<Reducer<BasicSparsifyPolicy<Residual>, BasicSharedIndexPolicy<Pick>,
                                          PackedValuesPolicy<Value>, DecodePolicy<Mode>, Exec>>,
      public reducer_core {
  static_assert(!wire_scaled<Value>,
                "tagc: a shared index sends fp32 or bf16 values (PackedPolicy, PackedBf16Policy); fp16 values "
                "(PackedFp16Policy) would need a range scale agreed every call, which it does not implement");
  using residual_t = Residual;
  using wire_t = Value;
  using agreement_stage = stage::Agreement<wire_t, Exec>;
  using selection_stage = stage::SharedSelection<Exec>;
  using routing_stage = stage::RoutedExchange<Value, Exec>;
  using state_format = shared_index_state_format;
  static constexpr double default_theta = default_sparsity(10);
  friend class reducer_entry_points<Reducer>;
  static constexpr const char* contract_name = "Reducer";
  static constexpr bool routed = Pick == shared_pick::routed;
  static constexpr bool pooled = Pick == shared_pick::pooled || Pick == shared_pick::gathered;
  static constexpr bool own_values = Pick == shared_pick::gathered;
  static constexpr bool follows_overlap = Pick == shared_pick::pooled;
  static constexpr stage::selection_rule rule = routed   ? stage::selection_rule::own
                                                : pooled ? stage::selection_rule::pool
                                                         : stage::selection_rule::leader;
  // The most picks per position of k the selection is sized for: none (the leader
  // selects; routed, each rank its own), the overlap's bound (pooled), or k from each of
  // the N ranks (gathered).
  static std::size_t picks_per_k(int world_size) {
    const std::size_t world = std::size_t(std::max(world_size, 1));
    if constexpr (!pooled) return 0;
    else if constexpr (follows_overlap) return selection_stage::pooled_picks_per_k(world);
    else return world;
  }

 public:
  using sparsify_policy = BasicSparsifyPolicy<Residual>;
  using index_policy = BasicSharedIndexPolicy<Pick>;
  using values_policy = PackedValuesPolicy<Value>;
  using decode_policy = DecodePolicy<Mode>;
  using exec_space = Exec;
  template <class T> using vector = typename Exec::template vector<T>;

  static status can_implement(const reducer_arguments& a) {
    TAGC_TRY(check_placement(a));
    TAGC_TRY(check_union_bound(a, routed && a.topo != topology::sharded));
    if (a.adapt.enabled)
      return {errc::invalid_argument, "adaptive sparsity steers a sketch's load; a shared index has none (set theta)"};
    TAGC_TRY(selection_stage::can_implement(a));
    if constexpr (routed) TAGC_TRY(routing_stage::can_implement(a));
    TAGC_TRY(stage::ThresholdSelect<residual_t, Exec>::can_implement(a));
    TAGC_TRY(agreement_stage::can_implement(a));
    return theta_controller::can_implement(a, default_theta);
  }

  status initialize(const reducer_arguments& args, Exec exec = {}) {
    TAGC_TRY(adopt(args, can_implement(args), default_theta, &plan_for));
    exec_ = exec;
    launch_ = {exec};
    const stage::reducer_plan& p = plan_;
    const std::size_t capacity = capacity_for(args);
    residual_.assign(args.length, residual_t(0.0f));
    acc_.assign(args.length, 0.0f);
    const std::size_t slots = most_slots(args, capacity);
    values_.assign(value_words(p, slots), wire_t(0.0f));
    shard_sums_.assign(sharded_buffer(p, slots) ? p.lay.shard_size : 0, wire_t(0.0f));
    counters_.assign(n_counters, 0ull);
    const auto initialize_stages = [&]() -> status {
      TAGC_TRY(agreement_.initialize(p, exec));
      TAGC_TRY(selection_.initialize(p, capacity, rule, picks_per_k(args.world_size), exec));
      if constexpr (routed) TAGC_TRY(routing_.initialize(p, routed_capacity(p, capacity), exec));
      // the statistics' counts (sums over the buffer and over the positions)
      TAGC_TRY(sums_.template reserve<unsigned long long>(exec, args.length, detail::above_threshold{}));
      TAGC_TRY(sums_.template reserve<unsigned long long>(exec, slots, detail::above_at_shared{}));
      return {};
    };
    if (status s = initialize_stages(); !s.ok()) return unit_(std::move(s));
    step_ = 0;
    overlap_ = 1.0;
    initialized_ = true;
    return {};
  }

  // Change theta between calls; refused when denser than initialize sized the workspaces for.
  status set_sparsity(double theta) {
    TAGC_TRY(unit_(theta_controller::check(theta)));
    TAGC_TRY(unit_(fits(theta)));
    theta_.set(theta);
    return {};
  }
  // set_profiling, plan, arguments, name, sparsity, next_sparsity, output_size, steps:
  // reducer/reducer_core.hpp.
  bool exact_index() const { return true; }
  // The leader of the next call (SharedIndexPolicy; a pooled index has none).
  int next_leader() const { return int(step_ % std::uint64_t(std::max(args_.world_size, 1))); }
  // The bytes initialize(args) allocates, before it does (see Reducer::workspace_bytes_for);
  // 0 for arguments can_implement refuses.
  static std::size_t workspace_bytes_for(const reducer_arguments& args) {
    if (!can_implement(args).ok()) return 0;
    const stage::reducer_plan p = plan_for(args);
    const std::size_t capacity = capacity_for(args);
    const std::size_t slots = most_slots(args, capacity);
    const std::size_t sums = sharded_buffer(p, slots) ? p.lay.shard_size : 0;
    return args.length * (sizeof(residual_t) + sizeof(float)) + (value_words(p, slots) + sums) * sizeof(wire_t) +
           n_counters * sizeof(unsigned long long) + agreement_stage::workspace_bytes_for(p) +
           selection_stage::workspace_bytes_for(p, capacity, rule, picks_per_k(args.world_size)) +
           (routed ? routing_stage::workspace_bytes_for(p, routed_capacity(p, capacity)) : 0);
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(residual_) + detail::buffer_bytes(acc_) + detail::buffer_bytes(values_) +
           detail::buffer_bytes(shard_sums_) + detail::buffer_bytes(counters_) + agreement_.workspace_bytes() + selection_.workspace_bytes() +
           routing_.workspace_bytes() + sums_.workspace_bytes();
  }

  // reduce_scatter and all_reduce: reducer/entry_points.hpp.

  // ---- state: the error-feedback residual, theta and the step (which names the leader) ----
  // Not the per-rank Reducer's "tagc": its states do not load here, nor these there.
  static constexpr std::uint32_t state_magic = state_format::magic;  // "tags"
  static constexpr std::uint32_t state_version = state_format::version;  // reducer/state_codec.hpp
  std::vector<float> residual_to_host() const {
    std::vector<residual_t> h(residual_.size());
    (void)exec_.copy_to_host(detail::raw(residual_), h.data(), h.size());
    if constexpr (std::is_same_v<residual_t, float>) {
      return h;
    } else {
      std::vector<float> f(h.size());
      for (std::size_t i = 0; i < h.size(); ++i) f[i] = float(h[i]);
      return f;
    }
  }
  std::size_t residual_bytes() const { return detail::buffer_bytes(residual_); }

  std::vector<std::byte> save_state() const {
    std::vector<residual_t> r(residual_.size());
    (void)exec_.copy_to_host(detail::raw(residual_), r.data(), r.size());
    return state_format::save<residual_t>(state_header(), {theta_.sparsity(), 0, 0, step_, overlap_}, r);
  }
  // Range-checked first; a refused state leaves the reducer as it was, with a status naming the field.
  status load_state(std::span<const std::byte> in) {
    if (!initialized_) return unit_({errc::invalid_argument, "load_state before initialize"});
    saved_reducer_state s;
    std::vector<residual_t> residual(residual_.size());
    const auto theta_fits = [this](double theta) -> status {
      if (status f = fits(theta); !f.ok()) return {f.code(), "reducer state holds " + f.message()};
      return {};
    };
    TAGC_TRY(unit_(state_format::load<residual_t>(in, state_header(), theta_fits, s, residual)));
    TAGC_TRY(unit_(exec_.copy_from_host(residual.data(), detail::raw(residual_), residual.size())));
    theta_.set(s.theta);
    step_ = s.step;
    overlap_ = std::min(s.overlap, most_overlap());  // a leader has none; fewer ranks reach less
    return {};
  }

 private:
  static constexpr std::size_t n_counters = 4;  // [0] NaN/Inf in acc, [1..3] count_positions
  std::size_t kept_at_most(double theta) const {
    return stage::ThresholdSelect<residual_t, Exec>::kept_at_most(theta, args_.length);
  }
  static stage::reducer_plan plan_for(const reducer_arguments& args) {
    stage::reducer_plan p;
    p.args = args;
    p.args.name = {};
    p.shards = args.topo == topology::sharded ? args.world_size : 1;
    p.own_shard = args.topo == topology::sharded ? std::size_t(args.rank) : 0;
    p.exact_index = true;  // every rank sends at exactly the shared positions
    p.lay = make_layout(args.length, p.shards, 1024, 1, 1);
    p.lay.dense = true;  // no sketch: only the shards' extent is used
    return p;
  }
  // Positions the workspaces hold: for the densest theta any call of the schedule
  // reaches (set_sparsity and load_state refuse a denser one).
  static std::size_t capacity_for(const reducer_arguments& args) {
    const double theta = theta_controller::configured(args, default_theta);
    const double densest = args.schedule.enabled() ? std::min(args.schedule.start, theta) : theta;
    return stage::ThresholdSelect<residual_t, Exec>::kept_at_most(densest, args.length);
  }
  // The most slots any call's selection holds (k, or a pooled union).
  static std::size_t most_slots(const reducer_arguments& args, std::size_t capacity) {
    return selection_stage::slots_for(capacity, args.length, picks_per_k(args.world_size));
  }
  // The reduce-scatter's buffer: every shard's extent, the last one padded.
  static std::size_t padded_length(const stage::reducer_plan& p) { return p.lay.shard_size * std::size_t(p.shards); }
  // A sharded call whose selection holds more than half the padded buffer sends its
  // values laid out in the buffer (zeros where nothing is selected: the selection is the
  // same on every rank, so those sums are zero) and reduce-scatters it: (N - 1) / N of
  // the buffer per rank, where the selection's all-reduce would send 2 (N - 1) / N of the
  // selection. What is delivered and held back does not change, only the transport
  // (measured: sending every position instead, nothing held back, made the transition
  // out of a dense-start warm-up cost quality, docs/results.md, Scaling). Every rank
  // decides alike from the selection's size. (An all-reduce of the buffer would cost
  // more than the selection's, which every rank sends at the same positions: replicated
  // calls of a leader's, pooled or gathered selection never do it.)
  // Routed, the picks travel as entries of 4 + sizeof(value) bytes instead (routed_capacity).
  static bool buffer_exchange(const stage::reducer_plan& p, std::size_t slots) {
    if constexpr (routed) return slots > routed_entries_at_most(p);
    if (p.args.topo != topology::sharded) return false;
    return 2 * slots > padded_length(p);
  }
  static bool sharded_buffer(const stage::reducer_plan& p, std::size_t slots) {
    return p.args.topo == topology::sharded && buffer_exchange(p, slots);
  }
  // The most picks a routed call sends as entries: beyond, its calls exchange the buffer.
  // Sharded, the entries and the buffer's reduce-scatter both send (N - 1) / N of theirs,
  // so entries while they are fewer bytes than the buffer. Replicated, the buffer is
  // all-reduced (2 (N - 1) / N of it) and the entries cost the picks and then the owners'
  // union (N - 1) / N, which is 1.7 to 6 times the picks (2 to 16 ranks, docs/results.md):
  // entries while the picks are under a quarter of the buffer's bytes.
  static std::size_t routed_entries_at_most(const stage::reducer_plan& p) {
    const std::size_t buffer = padded_length(p) * sizeof(wire_t);
    return p.args.topo == topology::sharded ? buffer / routing_stage::entry_bytes
                                            : buffer / (4 * routing_stage::entry_bytes);
  }
  static std::size_t routed_capacity(const stage::reducer_plan& p, std::size_t capacity) {
    return std::min(capacity, routed_entries_at_most(p));
  }
  // A call keeping k >= n selects every position: a sharded one needs no selection at all.
  bool dense_buffer_call(std::size_t k) const { return k >= args_.length && buffer_exchange(plan_, args_.length); }
  // values_: the selection's values, or the padded buffer when a call may exchange it.
  static std::size_t value_words(const stage::reducer_plan& p, std::size_t most) {
    return buffer_exchange(p, most) ? std::max(most, padded_length(p)) : most;
  }
  // Pooled: how many positions the ranks pick together for a call keeping k. Where
  // their picks overlap, k picks make a union under k (at 4 ranks on GPT-2, half of
  // it: docs/results.md, Scaling), so the picks are k times the overlap the last
  // call measured (picks / union), at most picks_per_k(N) k. Every rank computes it
  // alike from the same numbers. Gathered: k from every rank, N k.
  std::size_t picks_for(std::size_t k) const {
    if (k >= args_.length) return k;
    if constexpr (!follows_overlap) return k * picks_per_k(args_.world_size);
    const double want = std::ceil(double(k) * overlap_);
    return std::clamp(std::size_t(want), k, k * picks_per_k(args_.world_size));
  }
  // The overlap after a call for k whose ranks picked `picked` positions in all (fewer
  // than asked where a rank had fewer nonzero entries: counting what was asked would
  // read those as overlap) and pooled a union of `slots`: unchanged when the call was
  // dense or pooled nothing.
  double next_overlap(std::size_t k, std::size_t picked, std::size_t slots) const {
    if (k >= args_.length || slots == 0) return overlap_;
    return std::clamp(double(picked) / double(slots), 1.0, most_overlap());
  }
  // The most picks per union position: N ranks picking the same, at most the picks' bound
  // (1 where the picks do not follow the overlap).
  double most_overlap() const {
    if constexpr (!follows_overlap) return 1.0;
    return double(picks_per_k(args_.world_size));
  }
  std::string capacity_message(double theta) const {
    return "theta " + std::to_string(theta) + " keeps " + std::to_string(kept_at_most(theta)) +
           " positions, more than the " + std::to_string(selection_.capacity()) +
           " the shared index was sized for at initialize (its densest theta: the target or the schedule's start)";
  }
  status fits(double theta) const {
    if (kept_at_most(theta) > selection_.capacity()) return {errc::invalid_argument, capacity_message(theta)};
    return {};
  }
  state_format::header state_header() const {
    return state_format::header_of<wire_t, residual_t>(args_.length, plan_.shards, args_.rank, args_.topo);
  }
  template <communicator C>
  status run(C& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats) {
    TAGC_TRY(check_call(comm));
    const std::size_t n = args_.length;
    const bool sizes_ok = grad.size() == n && out.size() == output_size();
    if (!sizes_ok && !args_.check_inputs)
      return {errc::size_mismatch, "gradient has " + std::to_string(grad.size()) + " elements (expected " +
                                       std::to_string(n) + "), output " + std::to_string(out.size()) + " (expected " +
                                       std::to_string(output_size()) + ")"};
    // Every rank computes the same theta and k from the same step: the same verdict.
    const double theta = current_sparsity();
    const std::size_t k = kept_at_most(theta);
    if (k > selection_.capacity()) return {errc::invalid_argument, capacity_message(theta)};
    const std::size_t picks = pooled ? picks_for(k) : k;
    using S = reduce_stats::stage_seconds;
    seconds_ = {};
    stage_clock<Exec> clock{exec_, profiling_, seconds_};

    float* acc = detail::raw(acc_);
    unsigned long long* counters = detail::raw(counters_);
    thrust::fill(launch_.exec.policy(), counters_.begin(), counters_.end(), 0ull);
    if (sizes_ok) launch_(n, detail::shared_accumulate<residual_t>{grad.data(), detail::raw(residual_), acc, counters});
    clock.mark(&S::sparsify);
    if (args_.check_inputs) {
      unsigned long long nonfinite = 0;
      TAGC_TRY(exec_.copy_to_host(counters, &nonfinite, 1));
      typename agreement_stage::contribution mine{grad.size(), out.size(), std::uint32_t(std::min<unsigned long long>(nonfinite, 0xffffffffull)),
                                                  0u, shared_index_config_hash<wire_t>(args_.topo, args_.op, k, step_, pooled, picks, own_values, routed,
                                                                                   routed_forwards(k)), 0, 0};
      typename agreement_stage::verdict v;
      if (status s = agreement_.check(comm, mine, n, output_size(), 1, v); !s.ok()) {
        if (s.code() == errc::invalid_argument)  // a configuration mismatch: name what a shared index adds to it
          return {s.code(), s.message() + "; a shared index also needs the same theta, step counter and pick "
                                          "rule (shared, pooled, gathered or routed; pooled, the same overlap from "
                                          "a saved state) on every rank"};
        return s;
      }
      clock.mark(&S::check);
    }

    // The call's positions, on every rank: the leader's, or every rank's share pooled;
    // none for a sharded call that keeps every position.
    const bool dense = dense_buffer_call(k);
    if (!dense) {
      if constexpr (routed) {
        selection_.pick_own(acc, k);
      } else if constexpr (pooled) {
        TAGC_TRY(selection_.pool(comm, acc, k, picks, step_));
      } else {
        const int leader = int(step_ % std::uint64_t(args_.world_size));
        TAGC_TRY(selection_.select(comm, acc, k, leader));
      }
    }
    clock.mark(&S::index_exchange);
    const std::uint32_t* pos = dense ? nullptr : selection_.positions();
    const std::size_t slots = dense ? n : selection_.slots();
    // gathered: this rank's values only where it picked (above its own threshold)
    const std::uint32_t* own = own_values && !dense ? selection_.threshold_bits() : nullptr;

    // This rank's values there, summed over ranks: all-reduced, or laid out in the
    // padded buffer and reduce-scattered (buffer_exchange); routed, sent as entries to
    // their owners, which write their shards (out) from them.
    const bool in_buffer = buffer_exchange(plan_, slots);
    const float scale = args_.op == reduce_op::mean ? 1.0f / float(args_.world_size) : 1.0f;
    wire_t* values = detail::raw(values_);
    if (in_buffer) {
      const std::size_t padded = padded_length(plan_);
      if (dense) {
        launch_(padded, detail::pack_whole<wire_t>{acc, n, values});
      } else {
        thrust::fill(launch_.exec.policy(), values, values + padded, wire_t(0.0f));
        launch_(slots, detail::pack_in_buffer<wire_t>{acc, pos, n, values, own});
      }
      clock.mark(&S::sketch);
      if (args_.topo == topology::sharded)
        TAGC_TRY(detail::in_phase(comm.reduce_scatter(std::span<const wire_t>(values, padded),
                                                      std::span<wire_t>(detail::raw(shard_sums_), shard_sums_.size())),
                                  "value exchange (reduce-scatter of the buffer: the selection held over half of it)"));
      else  // routed: picks too many to send as entries
        TAGC_TRY(detail::in_phase(comm.all_reduce(std::span<const wire_t>(values, padded), std::span<wire_t>(values, padded)),
                                  "value exchange (all-reduce of the buffer: the picks held over a quarter of its bytes)"));
    } else if constexpr (routed) {
      clock.mark(&S::sketch);
      TAGC_TRY(route(comm, acc, pos, slots, out, scale));
    } else {
      launch_(slots, detail::pack_shared<wire_t>{acc, pos, n, values, own});
      clock.mark(&S::sketch);
      TAGC_TRY(detail::in_phase(comm.all_reduce(std::span<const wire_t>(values, slots), std::span<wire_t>(values, slots)),
                                "value exchange (all-reduce of the shared positions' values)"));
    }
    clock.mark(&S::value_exchange);
    // From here on the call cannot fail.

    const bool sharded = args_.topo == topology::sharded;
    const std::size_t first = sharded ? plan_.own_shard * plan_.lay.shard_size : 0;
    // Where this rank's values were delivered, which its residual settles: the
    // positions, or (a bounded routed all-reduce) the picks the owners forwarded.
    const std::uint32_t* delivered = routed && !dense && !in_buffer ? routing_.delivered(pos) : pos;
    std::size_t above = 0, above_shared = 0;
    if (stats && !dense) {  // dense: every position sent, nothing held back
      launch_(1, detail::count_positions{pos, slots, first, first + out.size(), counters + 1});
      above = sums_.template sum<unsigned long long>(launch_, n, detail::above_threshold{acc, selection_.threshold_bits()});
      above_shared = sums_.template sum<unsigned long long>(
          launch_, slots, detail::above_at_shared{acc, delivered, n, selection_.threshold_bits()});
    }
    if (in_buffer) {
      const wire_t* sums = sharded ? detail::raw(shard_sums_) : values;
      launch_(out.size(), detail::unpack_buffer<wire_t>{sums, scale, out.data()});
    } else if (!routed) {
      thrust::fill(launch_.exec.policy(), out.data(), out.data() + out.size(), 0.0f);
      launch_(slots, detail::unpack_shared<wire_t>{pos, values, n, first, out.size(), scale, out.data()});
    }
    clock.mark(&S::decode);

    // residual = acc, but acc - wire(acc) where this rank sent (dense: everywhere).
    const std::uint32_t seed = detail::residual_seed(step_, args_.rank);
    if constexpr (std::is_same_v<residual_t, float>) {
      residual_.swap(acc_);  // the residual becomes this call's acc: no copy
      float* r = detail::raw(residual_);
      if (dense)
        launch_(n, detail::settle_whole<wire_t, float>{r, r, seed});
      else
        launch_(slots, detail::settle_shared<wire_t, float>{delivered, r, r, n, seed, own});
    } else {
      residual_t* r = detail::raw(residual_);
      if (dense) {
        launch_(n, detail::settle_whole<wire_t, residual_t>{acc, r, seed});
      } else {
        launch_(n, detail::store_acc<residual_t>{acc, r, seed});
        launch_(slots, detail::settle_shared<wire_t, residual_t>{delivered, acc, r, n, seed, own});
      }
    }
    clock.mark(&S::residual);
    ++step_;
    if constexpr (follows_overlap)
      if (!dense) overlap_ = next_overlap(k, selection_.picked(), slots);

    if (stats)
      TAGC_TRY(fill_stats(*stats, {theta, k, picks, slots, dense, in_buffer, first, out.size(), above, above_shared}));
    return {};
  }

  // A routed all-reduce's bound on what each owner forwards (0: unbounded, and the other rules).
  std::size_t routed_forwards(std::size_t k) const {
    if constexpr (routed) return args_.union_bound > 0.0 ? routing_.forwarded_at_most(k) : 0;
    return 0;
  }

  // The routed exchange (stage/routed_exchange.hpp), on a communicator that can route.
  template <communicator C>
  status route(C& comm, const float* acc, const std::uint32_t* pos, std::size_t slots, std::span<float> out,
               float scale) {
    if constexpr (routing_communicator<C>)
      return routing_.exchange(comm, acc, pos, slots, out.data(), out.size(), scale);
    else
      return {errc::invalid_argument,
              "a routed index sends entries by all_to_all_v; this communicator has none (routing_communicator)"};
  }

  // What run() knows of a committed call that the statistics report.
  struct call_facts {
    double theta;
    std::size_t k, picks, slots;  // slots: the selection's positions
    bool dense;                   // every position, no selection (dense_buffer_call): the counts are
                                  // the buffer's and this rank's extent [first, first + extent)
    bool in_buffer;               // the values reduce-scattered (all-reduced) in the padded buffer (buffer_exchange)
    std::size_t first, extent;
    std::size_t above, above_shared;
  };
  status fill_stats(reduce_stats& s, const call_facts& c) const {
    const auto [theta, k, picks, slots, dense, in_buffer, first, extent, above, above_shared] = c;
    const bool selected = !dense;
    unsigned long long counts[n_counters];
    std::uint32_t threshold = 0;
    TAGC_TRY(exec_.copy_to_host(detail::raw(counters_), counts, n_counters));
    if (dense) {
      const std::size_t n = args_.length;
      counts[1] = n;
      counts[2] = std::min(first, n);
      counts[3] = std::min(first + extent, n);
    }
    if (selected) TAGC_TRY(exec_.copy_to_host(selection_.threshold_bits(), &threshold, 1));
    const int world = args_.world_size;
    // the shared positions: every rank sends a value at each
    s = summary_stats({args_.length, theta, counts[1], threshold, seconds_});
    // Held back: this rank's entries above the leader's threshold that were not shared
    // (they wait in its residual for a call that picks them); pooled, its own
    // threshold, above which everything was shared.
    s.deferred = above - std::min(above, above_shared);
    // bits per listed position, or per element of a bitmap; 0 where no positions are
    // sent (no selection, or a pooled call that keeps every position)
    const bool entries = routed && selected && !in_buffer;  // routed: the picks went as entries
    const bool positions_sent = selected && !(pooled && k >= args_.length) && !(routed && in_buffer);
    s.index_bits = !positions_sent                ? 0
                   : entries                      ? 32
                   : pooled                       ? (selection_.pools_lists(picks) ? 16 : 1)
                   : selection_.sends_list(k)     ? 32
                                                  : 1;
    s.exact_index = true;
    s.index_popcount = dense ? 0 : counts[1];  // the positions the selection named
    // what this rank's output holds: its shard's entries, or (replicated) every owner's sums
    s.support = !entries                           ? counts[3] - counts[2]
                : args_.topo == topology::sharded ? routing_.last().received
                                                   : routing_.last().shared;
    s.peeled = s.support;
    s.packed_slots = in_buffer ? padded_length(plan_) : slots;
    s.value_type_bytes = int(sizeof(wire_t));
    s.residual_bytes = residual_bytes();
    s.control_bytes = agreement_bytes_sent(args_.check_inputs, agreement_stage::bytes_per_rank(), world);
    s.index_bytes = !positions_sent ? 0.0 : entries ? routing_.index_bytes_sent() : selection_.index_bytes_sent(k, pooled, picks);
    const collective buffer_collective = args_.topo == topology::sharded ? collective::reduce_scatter : collective::all_reduce;
    s.value_bytes = in_buffer ? ring_bytes_sent(buffer_collective, double(padded_length(plan_) * sizeof(wire_t)), world)
                    : entries ? routing_.value_bytes_sent()
                              : ring_bytes_sent(collective::all_reduce, double(slots * sizeof(wire_t)), world);
    return {};
  }

  // (the arguments, unit, plan, theta, profiling and step count, which here also names
  // the leader: reducer/reducer_core.hpp)
  Exec exec_{};
  detail::launcher<Exec> launch_{};

  double overlap_ = 1.0;               // pooled: the last call's picks / union (the state; 1 for the others)
  vector<residual_t> residual_;       // [length] error feedback (the state)
  vector<float> acc_;                 // [length] g + residual of the current call
  vector<wire_t> values_;             // [most slots] this rank's values at the positions, then their sums
                                      // ([padded length] when a call may exchange the buffer: buffer_exchange)
  vector<wire_t> shard_sums_;         // [shard] the own shard's sums of a buffer exchange (else empty)
  vector<unsigned long long> counters_;
  agreement_stage agreement_;
  selection_stage selection_;
  routing_stage routing_;             // routed: the entries' exchange (unused otherwise)
  detail::sum_workspace<Exec> sums_;  // the statistics' counts
};

TAGC_END_NAMESPACE
