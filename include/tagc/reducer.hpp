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
// workspace_bytes()); the step path (reduce_scatter / all_reduce) allocates
// nothing. Errors are returned as
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

template <class V> struct is_sketch_policy : std::false_type {};
template <int R, int L, class T> struct is_sketch_policy<SketchPolicy<R, L, T>> : std::true_type {};
template <class V> struct is_packed_policy : std::false_type {};
template <class T> struct is_packed_policy<PackedValuesPolicy<T>> : std::true_type {};

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
class Reducer<BasicSparsifyPolicy<Residual>, IndexPolicy<Bits, IX>, Values, DecodePolicy<Mode>, Exec> {
  static constexpr bool sketched = is_sketch_policy<Values>::value;
  static_assert(sketched || is_packed_policy<Values>::value,
                "tagc: the third Reducer policy is SketchPolicy<ratio[, lanes[, value]]> or "
                "PackedValuesPolicy<float|bfloat16|float16>");
  static_assert(sketched || IX == index_exchange::all_reduce,
                "tagc: PackedPolicy needs every rank to hold the whole reduced index: use index_exchange::all_reduce");

  // The residual's storage type: float, or bf16 stored with stochastic rounding.
  using residual_t = Residual;
  // The stages this reducer is composed of (include/tagc/stage/).
  using agreement_stage = stage::Agreement<typename Values::value_type, Exec>;
  using select_stage = stage::ThresholdSelect<residual_t, Exec>;
  using index_stage = stage::IndexExchange<IndexPolicy<Bits, IX>, residual_t, Exec>;
  using values_stage = stage::Values<Values, residual_t, Exec>;
  using decode_stage = stage::Decode<DecodePolicy<Mode>, Exec>;
  using residual_stage = stage::ResidualStore<residual_t, Exec>;
  static constexpr int Ratio = values_stage::ratio;
  static constexpr int Lanes = values_stage::lanes;
  // The element type on the wire (sketch cells or packed values): float, bf16 or fp16.
  using wire_t = typename Values::value_type;

 public:
  using sparsify_policy = BasicSparsifyPolicy<Residual>;
  using index_policy = IndexPolicy<Bits, IX>;
  using values_policy = Values;
  using decode_policy = DecodePolicy<Mode>;
  using exec_space = Exec;
  template <class T> using vector = typename Exec::template vector<T>;

  static constexpr std::uint32_t state_magic = 0x74616763;  // "tagc"
  static constexpr std::uint32_t state_version = 4;  // 4: + residual type, step counter; 3 still loads (float residual)

  // The AND of the stages' (and the reducer's own: ranks, length).
  static status can_implement(const reducer_arguments& a) {
    if (a.world_size < 1) return {errc::invalid_argument, "world size " + std::to_string(a.world_size) + " < 1"};
    if (a.rank < 0 || a.rank >= a.world_size)
      return {errc::invalid_argument,
              "rank " + std::to_string(a.rank) + " outside [0, " + std::to_string(a.world_size) + ")"};
    TAGC_TRY(index_stage::can_implement(a));
    if (a.length >= (std::size_t(1) << 32))
      return {errc::invalid_argument, "length " + std::to_string(a.length) + " >= 2^32 elements; split the unit"};
    TAGC_TRY(select_stage::can_implement(a));
    TAGC_TRY(agreement_stage::can_implement(a));
    TAGC_TRY(values_stage::can_implement(a));
    TAGC_TRY(decode_stage::can_implement(a));
    TAGC_TRY(residual_stage::can_implement(a));
    // sparsity schedule (issue 11): checked against the resolved target theta
    TAGC_TRY(check_sparsity_schedule(a.schedule, a.sparsity >= 0.0 ? a.sparsity : default_sparsity(sketched ? Ratio : 10)));
    return {};
  }

  Reducer() = default;

  status initialize(const reducer_arguments& args, Exec exec = {}) {
    name_.assign(args.name.data(), args.name.size());
    if (auto s = can_implement(args); !s.ok()) return annotate(std::move(s), false);
    args_ = args;
    args_.name = {};  // the reducer keeps its own copy (name()): a moved reducer must not view a moved string
    exec_ = exec;
    sparsity_ = args.sparsity >= 0.0 ? args.sparsity : default_sparsity(sketched ? Ratio : 10);
    if (args.adapt.enabled) sparsity_ = std::clamp(sparsity_, args.adapt.min_sparsity, args.adapt.max_sparsity);
    target_sparsity_ = sparsity_;  // sparsity schedule: the ramp's end (adaptive steers a factor around it)
    stage::reducer_plan& p = plan_;
    p.args = args;
    p.shards = args.topo == topology::sharded ? args.world_size : 1;
    p.own_shard = args.topo == topology::sharded ? std::size_t(args.rank) : 0;
    const int width = index_policy::width_for(args.world_size);
    p.exact_index = index_policy::exact(width, args.world_size);
    p.pair_repair = width == 1 && args.world_size == 2;
    p.scatter_index = IX == index_exchange::reduce_scatter && args.topo == topology::sharded;
    p.lay = values_stage::make_plan_layout(args.length, p.shards, width);

    p.args.name = {};  // stages do not keep the caller's string
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
    if (status s = initialize_stages(); !s.ok()) return annotate(std::move(s), false);
    step_ = 0;
    last_load_ppm_ = 0;
    last_unresolved_ = 0;
    initialized_ = true;
    return {};
  }

  // Change theta between calls (draining residuals, an external schedule).
  status set_sparsity(double theta) {
    if (!(theta >= 0.0 && theta <= 1.0))
      return annotate({errc::invalid_argument, "sparsity " + std::to_string(theta) + " outside [0, 1]"}, false);
    sparsity_ = theta;
    return {};
  }

  // Time each stage (synchronising after it) and report it in reduce_stats::seconds.
  void set_profiling(bool on) { profiling_ = on; }

  const layout& plan() const { return plan_.lay; }
  const reducer_arguments& arguments() const { return args_; }  // (its name is empty: see name())
  std::string_view name() const { return name_; }
  double sparsity() const { return sparsity_; }
  // Theta of the next call: sparsity() on the sparsity schedule's ramp at steps().
  double next_sparsity() const { return current_sparsity(); }
  bool exact_index() const { return plan_.exact_index; }
  // Length of the shard a rank receives (sharded) or of the whole buffer (replicated).
  std::size_t output_size() const {
    return args_.topo == topology::sharded ? plan_.lay.shard_size : plan_.lay.length;
  }
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

  // ZeRO-3 / FSDP: rank r receives shard r (output_size() elements, tail padding 0).
  template <communicator C>
  status reduce_scatter(C& comm, std::span<const float> grad, std::span<float> shard, reduce_stats* stats = nullptr) {
    if (args_.topo != topology::sharded)
      return annotate({errc::invalid_argument, "reduce_scatter on a Reducer initialised for topology::replicated"});
    return annotate(run(comm, grad, shard, stats));
  }

  // DDP: every rank receives the whole reduced gradient.
  template <communicator C>
  status all_reduce(C& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats = nullptr) {
    if (args_.topo != topology::replicated)
      return annotate({errc::invalid_argument, "all_reduce on a Reducer initialised for topology::sharded"});
    return annotate(run(comm, grad, out, stats));
  }

  // ---- state: the error-feedback residual ----
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
  // Successful calls so far (seeds the stochastic rounding of a bf16 residual; checkpointed).
  std::uint64_t steps() const { return step_; }

  // Checkpoint: everything a resumed run needs to continue exactly (the
  // residual, theta and the loads adaptive theta steers by).
  std::vector<std::byte> save_state() const {
    std::vector<std::byte> out;
    out.reserve(header_words * 8 + sizeof(double) + 2 * 8 + 8 + residual_.size() * sizeof(residual_t));
    const auto h = header();
    append(out, h.data(), h.size());
    const double theta = sparsity_;
    append(out, &theta, 1);
    const std::int64_t feedback[2] = {last_load_ppm_, last_unresolved_};
    append(out, feedback, 2);
    const std::uint64_t step = step_;
    append(out, &step, 1);
    append(out, residual_.to_host().data(), residual_.size());
    return out;
  }

  // Everything restored is range-checked first (theta, the adaptive-theta
  // feedback, the step counter, every residual entry); a refused state leaves
  // the reducer as it was, with a status naming the field.
  status load_state(std::span<const std::byte> in) { return annotate(load_state_checked(in), false); }

 private:
  status load_state_checked(std::span<const std::byte> in) {
    if (!initialized_) return {errc::invalid_argument, "load_state before initialize"};
    const auto want = header();
    std::uint64_t h[header_words];
    // Version 3 (before bf16 residuals): 10 header words, no step counter, a
    // float residual. It still loads into a float-residual reducer.
    constexpr std::size_t v3_words = 10;
    if (in.size() < v3_words * sizeof(std::uint64_t))
      return {errc::io, "reducer state truncated: " + std::to_string(in.size()) + " bytes"};
    std::memcpy(h, in.data(), v3_words * sizeof(std::uint64_t));
    const bool v3 = h[0] == state_magic && h[1] == 3;
    if (h[0] != state_magic || (h[1] != state_version && !v3))
      return {errc::io, "not a tagc reducer state of version " + std::to_string(state_version) +
                            " or 3 (bad magic or version)"};
    const std::size_t words = v3 ? v3_words : header_words;
    if (!v3) {
      if (in.size() < sizeof h) return {errc::io, "reducer state truncated: " + std::to_string(in.size()) + " bytes"};
      std::memcpy(h, in.data(), sizeof h);
    } else {
      h[header_words - 1] = wire_type_id<float>;  // version 3 residuals are float
    }
    static const char* names[] = {"magic", "version", "length", "shards", "rank", "index bits", "sketch ratio",
                                  "lanes", "values policy", "topology", "residual type"};
    static_assert(sizeof names / sizeof names[0] == header_words);
    for (std::size_t i = 2; i < header_words; ++i) {
      if (h[i] == want[i]) continue;
      if (i == header_words - 1)
        return {errc::size_mismatch, std::string("reducer state holds a ") + wire_type_name(std::int64_t(h[i])) +
                                         " residual, this reducer stores a " + wire_type_name(std::int64_t(want[i])) +
                                         " residual (SparsifyPolicy vs SparsifyBf16ResidualPolicy); convert it "
                                         "explicitly, it is not reinterpreted"};
      return {errc::size_mismatch, std::string("reducer state was saved with ") + names[i] + " " +
                                       std::to_string(h[i]) + ", this reducer has " + std::to_string(want[i])};
    }
    const std::size_t need = words * sizeof(std::uint64_t) + sizeof(double) + 2 * sizeof(std::int64_t) +
                             (v3 ? 0 : sizeof(std::uint64_t)) + residual_.size() * sizeof(residual_t);
    if (in.size() != need)
      return {errc::io, "reducer state has " + std::to_string(in.size()) + " bytes, expected " + std::to_string(need)};
    const std::byte* p = in.data() + words * sizeof(std::uint64_t);
    double theta;
    std::memcpy(&theta, p, sizeof theta);
    p += sizeof theta;
    std::int64_t feedback[2];
    std::memcpy(feedback, p, sizeof feedback);
    p += sizeof feedback;
    std::uint64_t step = 0;
    if (!v3) {
      std::memcpy(&step, p, sizeof step);
      p += sizeof step;
    }
    if (!(theta >= 0.0 && theta <= 1.0))
      return {errc::io, "reducer state holds theta " + std::to_string(theta) + ", outside [0, 1] (damaged state?)"};
    const layout& l = plan_.lay;
    // Load of the last decode (ppm): support / cells, support <= shard size.
    const double max_load_ppm = 1e6 * double(l.shard_size) / double(l.cells ? l.cells : 1) + 1.0;
    if (feedback[0] < 0 || double(feedback[0]) > max_load_ppm)
      return {errc::io, "reducer state holds a last decode load of " + std::to_string(feedback[0]) +
                            " ppm, outside [0, " + std::to_string(std::int64_t(max_load_ppm)) + "] (damaged state?)"};
    if (feedback[1] < 0 || std::uint64_t(feedback[1]) > l.shard_size)
      return {errc::io, "reducer state holds " + std::to_string(feedback[1]) +
                            " unresolved entries, outside [0, shard size " + std::to_string(l.shard_size) +
                            "] (damaged state?)"};
    if (step >= (std::uint64_t(1) << 53))
      return {errc::io, "reducer state holds step counter " + std::to_string(step) + ", beyond 2^53 calls (damaged state?)"};
    std::vector<residual_t> residual(residual_.size());
    if (!residual.empty()) std::memcpy(residual.data(), p, residual.size() * sizeof(residual_t));
    for (std::size_t i = 0; i < residual.size(); ++i)
      if (!std::isfinite(float(residual[i])))
        return {errc::io, "reducer state holds a non-finite residual at element " + std::to_string(i) +
                              " (damaged state?)"};
    TAGC_TRY(residual_.from_host(residual.data()));
    sparsity_ = theta;
    last_load_ppm_ = feedback[0];
    last_unresolved_ = feedback[1];
    step_ = step;
    return {};
  }

  static constexpr std::size_t header_words = 11;

  std::array<std::uint64_t, header_words> header() const {
    const layout& l = plan_.lay;
    return {state_magic, state_version, l.length, std::uint64_t(l.shards), std::uint64_t(args_.rank),
            std::uint64_t(l.index_bits), std::uint64_t(Ratio), std::uint64_t(Lanes), std::uint64_t(sketched),
            std::uint64_t(args_.topo), std::uint64_t(wire_type_id<residual_t>)};
  }
  template <class T> static void append(std::vector<std::byte>& out, const T* p, std::size_t n) {
    // resize + memcpy, not insert: GCC 12 warns falsely (-Wstringop-overflow) on the inlined insert
    const std::size_t at = out.size();
    out.resize(at + n * sizeof(T));
    if (n) std::memcpy(out.data() + at, p, n * sizeof(T));
  }

  // Marks stage boundaries when profiling: synchronise, then charge the time since
  // the previous mark to `slot`.
  struct stage_clock {
    Reducer* self;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    void mark(double reduce_stats::stage_seconds::*slot) {
      if (!self->profiling_) return;
      (void)self->exec_.synchronize();
      const auto now = std::chrono::steady_clock::now();
      self->seconds_.*slot += std::chrono::duration<double>(now - last).count();
      last = now;
    }
  };

  // The policies and options every rank must share, hashed (unsigned: it wraps, never overflows).
  std::uint64_t config_hash() const {
    return std::uint64_t(plan_.lay.index_bits) * 1000003u + std::uint64_t(IX) * 100003u +
           std::uint64_t(Ratio) * 1009u + std::uint64_t(args_.topo) * 7u + std::uint64_t(args_.op) +
           (sketched ? 0u : 500009u) + std::uint64_t(wire_type_id<wire_t>) * 50021u;
  }

  // Every status the reducer returns names its unit and, for a call, the step
  // (the reducer's own count of completed calls): "unit 'mlp.fc' (step 12): ...".
  status annotate(status s, bool with_step = true) const {
    if (s.ok()) return s;
    std::string prefix = name_.empty() ? std::string("reducer") : "unit '" + name_ + "'";
    if (with_step) prefix += " (step " + std::to_string(step_) + ")";
    return {s.code(), prefix + ": " + s.message()};
  }

  // Theta for this call: the one place it is read (adaptive theta and
  // set_sparsity move it between calls).
  double current_sparsity() const { return scheduled_sparsity(args_.schedule, target_sparsity_, sparsity_, step_); }

  // Density d = 1 - theta scales the union load roughly linearly: aim the largest
  // load at the target, at most halving or doubling d per step, and cut harder
  // while anything went unresolved.
  void adapt_sparsity(double max_load, std::int64_t unresolved) {
    if (max_load <= 0.0) return;  // nothing measured yet
    const auto& p = args_.adapt;
    double d = 1.0 - sparsity_;
    double f = std::clamp(p.target_load / max_load, 0.5, 2.0);
    if (unresolved > 0) f = std::min(f, 0.7);
    d = std::max(d * f, 1e-7);
    sparsity_ = std::clamp(1.0 - d, p.min_sparsity, p.max_sparsity);
  }

  template <communicator C>
  status run(C& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats) {
    if (!initialized_) return {errc::invalid_argument, "Reducer used before initialize()"};
    if (comm.size() != args_.world_size || comm.rank() != args_.rank)
      return {errc::invalid_argument, "communicator is rank " + std::to_string(comm.rank()) + " of " +
                                          std::to_string(comm.size()) + ", the reducer was planned for rank " +
                                          std::to_string(args_.rank) + " of " + std::to_string(args_.world_size)};
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
    stage_clock clock{this};

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
                                                  config_hash(), last_load_ppm_, last_unresolved_};
      typename agreement_stage::verdict v;
      TAGC_TRY(agreement_.check(comm, mine, lay.length, output_size(), values_.max_cell_terms(), v));
      if constexpr (wire_scaled<wire_t>) wire_exp_ = v.wire_exp;
      if (args_.adapt.enabled) adapt_sparsity(double(v.max_load_ppm) * 1e-6, v.unresolved);
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
      TAGC_TRY(fill_stats(comm.size(), s, c));
      last_load_ppm_ = std::int64_t(std::llround(s.load * 1e6));
      last_unresolved_ = std::int64_t(s.unresolved);
    }
    return {};
  }

  status fill_stats(int world, reduce_stats& s, const stage::call_view<residual_t>& c) const {
    unsigned long long cnt[select_stage::n_counters];
    detail::select_state st{};
    TAGC_TRY(select_.read_counters(cnt));
    TAGC_TRY(select_.read_state(st));
    const layout& lay = plan_.lay;
    s = reduce_stats{};
    s.elements = lay.length;
    s.theta = call_sparsity_;
    s.kept = cnt[0];
    s.deferred = cnt[1];
    s.retransmitted = cnt[2];
    s.sparsity = lay.length ? 1.0 - double(s.kept) / double(lay.length) : 1.0;
    s.threshold = float_from_bits(st.threshold);
    s.index_bits = lay.index_bits;
    s.exact_index = plan_.exact_index;
    s.seconds = seconds_;
    s.dense = lay.dense;
    values_.fill_stats(s, c, decode_);
    // A reduce-scattered index is the owner's shard alone: its marks are the support
    // the values stage counted already (no second pass over the index).
    s.index_popcount = plan_.scatter_index && !lay.dense ? s.support : index_.received_marks();
    s.control_bytes = args_.check_inputs
        ? ring_bytes_sent(collective::all_gather, double(agreement_stage::bytes_per_rank() * std::size_t(world)), world)
        : 0.0;
    s.index_bytes = ring_bytes_sent(plan_.scatter_index ? collective::reduce_scatter : collective::all_reduce,
                                    double(index_.local_bytes()), world);
    s.value_bytes = ring_bytes_sent(values_.value_collective(), double(values_.value_bytes_sent()), world);
    s.retransmit_bytes = decode_.retransmit_bytes_sent();
    s.value_type_bytes = int(sizeof(wire_t));
    s.value_scale_exponent = wire_exp_;
    s.unfed_rounding = values_.unfed_rounding();
    s.residual_bytes = residual_.residual_bytes();
    return {};
  }

  reducer_arguments args_{};  // name left empty: see name_
  std::string name_;
  Exec exec_{};
  stage::reducer_plan plan_{};
  double sparsity_ = 0.0;
  double target_sparsity_ = 0.0, call_sparsity_ = 0.0;  // sparsity schedule: ramp end, last call's theta
  bool initialized_ = false;
  bool profiling_ = false;
  reduce_stats::stage_seconds seconds_{};
  std::int64_t last_load_ppm_ = 0, last_unresolved_ = 0;  // published for adaptive theta
  std::uint64_t step_ = 0;  // successful calls (stochastic-rounding seed; checkpointed)
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
