#pragma once
// defines: tagc::Reducer<Sparsify, Index, Values, Decode, Exec>, tagc::reducer_arguments,
//          tagc::adaptive_sparsity, tagc::reduce_op.
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
// The contract is CUTLASS-like: can_implement(args), initialize(args, exec)
// sizes and allocates every workspace once from the layout; the step path
// (reduce_scatter / all_reduce) allocates nothing. Errors are returned as
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

#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/scan.h>
#include <thrust/transform_reduce.h>

#include "comm/communicator.hpp"
#include "core/status.hpp"
#include "exec/host.hpp"
#include "policy/decode.hpp"
#include "policy/index.hpp"
#include "policy/packed.hpp"
#include "policy/sketch.hpp"
#include "policy/sparsify.hpp"
#include "policy/sparsity_schedule.hpp"
#include "shard/layout.hpp"
#include "stats.hpp"

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
  sparsity_schedule schedule{};  // theta warm-up over the first calls (policy/sparsity_schedule.hpp)
};

template <class>
inline constexpr bool tagc_dependent_false = false;

template <class V> struct is_sketch_policy : std::false_type {};
template <int R, int L, class T> struct is_sketch_policy<SketchPolicy<R, L, T>> : std::true_type {};
template <class V> struct is_packed_policy : std::false_type {};
template <class T> struct is_packed_policy<PackedValuesPolicy<T>> : std::true_type {};

// Primary template: only the combinations specialised below exist.
template <class Sparsify, class Index, class Values, class Decode, class Exec = exec::host>
class Reducer {
  static_assert(tagc_dependent_false<Sparsify>,
                "tagc: no Reducer for this policy combination; expected Reducer<SparsifyPolicy, "
                "IndexPolicy<bits[, exchange]>, SketchPolicy<ratio> | PackedPolicy, DecodePolicy<mode>[, Exec]>");
};

template <class Residual, int Bits, index_exchange IX, class Values, decode_mode Mode, class Exec>
class Reducer<BasicSparsifyPolicy<Residual>, IndexPolicy<Bits, IX>, Values, DecodePolicy<Mode>, Exec> {
  static constexpr bool sketched = is_sketch_policy<Values>::value;
  static_assert(sketched || is_packed_policy<Values>::value,
                "tagc: the third Reducer policy is SketchPolicy<ratio[, lanes[, value]]> or "
                "PackedValuesPolicy<float|bfloat16|float16>");
  static_assert(sketched || IX == index_exchange::all_reduce,
                "tagc: PackedPolicy needs every rank to hold the whole reduced index: use index_exchange::all_reduce");

  template <class V> struct sketch_params { static constexpr int ratio = 1, lanes = 1024; };
  template <int R, int L, class T> struct sketch_params<SketchPolicy<R, L, T>> { static constexpr int ratio = R, lanes = L; };
  static constexpr int Ratio = sketch_params<Values>::ratio;
  static constexpr int Lanes = sketch_params<Values>::lanes;
  // The element type on the wire (sketch cells or packed values): float, bf16 or fp16.
  using wire_t = typename Values::value_type;
  static_assert(kernels::entry_unresolved == 1, "owe_estimates_stored (policy/sparsify.hpp) spells it as 1");
  static constexpr bool narrow_cells = sketched && !std::is_same_v<wire_t, float>;  // 16-bit sketch cells
  // The residual's storage type: float, or bf16 stored with stochastic rounding.
  using residual_t = Residual;

 public:
  using sparsify_policy = BasicSparsifyPolicy<Residual>;
  using index_policy = IndexPolicy<Bits, IX>;
  using values_policy = Values;
  using decode_policy = DecodePolicy<Mode>;
  using exec_space = Exec;
  template <class T> using vector = typename Exec::template vector<T>;

  static constexpr std::uint32_t state_magic = 0x74616763;  // "tagc"
  static constexpr std::uint32_t state_version = 4;  // 4: + residual type, step counter; 3 still loads (float residual)

  static status can_implement(const reducer_arguments& a) {
    if (a.world_size < 1) return {errc::invalid_argument, "world size " + std::to_string(a.world_size) + " < 1"};
    if (a.rank < 0 || a.rank >= a.world_size)
      return {errc::invalid_argument,
              "rank " + std::to_string(a.rank) + " outside [0, " + std::to_string(a.world_size) + ")"};
    const int width = index_policy::width_for(a.world_size);
    if (width == 0)
      return {errc::unsupported_world_size, "no byte-packed exact index counts " + std::to_string(a.world_size) +
                                                " ranks (at most 255)"};
    if (Bits >= 2 && !index_policy::exact(width, a.world_size))
      return {errc::unsupported_world_size,
              "IndexPolicy<" + std::to_string(Bits) + "> counts at most " + std::to_string((1 << Bits) - 1) +
                  " ranks per element, world size is " + std::to_string(a.world_size) +
                  "; its counters would overflow (use ExactIndexPolicy)"};
    if (IX == index_exchange::reduce_scatter && !index_policy::exact(width, a.world_size))
      return {errc::unsupported_world_size,
              "index_exchange::reduce_scatter needs an exact index, and IndexPolicy<1> is exact only up to 2 ranks "
              "(world size " + std::to_string(a.world_size) + ")"};
    if (a.length >= (std::size_t(1) << 32))
      return {errc::invalid_argument, "length " + std::to_string(a.length) + " >= 2^32 elements; split the unit"};
    if (a.sparsity > 1.0 || (a.sparsity >= 0.0 && std::isnan(a.sparsity)))
      return {errc::invalid_argument, "sparsity " + std::to_string(a.sparsity) + " outside [0, 1]"};
    if (wire_scaled<wire_t> && !a.check_inputs)
      return {errc::invalid_argument, "fp16 values agree their range scale through the agreement check: keep "
                                      "check_inputs (or use bf16 values, which need no scale)"};
    // sparsity schedule (issue 11): checked against the resolved target theta
    TAGC_TRY(check_sparsity_schedule(a.schedule, a.sparsity >= 0.0 ? a.sparsity : default_sparsity(sketched ? Ratio : 10)));
    if (a.adapt.enabled) {
      if (!sketched) return {errc::invalid_argument, "adaptive sparsity steers the sketch load; PackedPolicy has none"};
      if (!a.check_inputs)
        return {errc::invalid_argument, "adaptive sparsity publishes loads through the agreement check: keep check_inputs"};
      const auto& p = a.adapt;
      if (!(p.target_load > 0.0 && p.target_load < 0.82 && p.min_sparsity >= 0.0 && p.min_sparsity <= p.max_sparsity &&
            p.max_sparsity <= 1.0))
        return {errc::invalid_argument, "adaptive sparsity wants 0 < target_load < 0.82 and "
                                        "0 <= min_sparsity <= max_sparsity <= 1"};
    }
    return {};
  }

  Reducer() = default;

  status initialize(const reducer_arguments& args, Exec exec = {}) {
    TAGC_TRY(can_implement(args));
    args_ = args;
    exec_ = exec;
    sparsity_ = args.sparsity >= 0.0 ? args.sparsity : default_sparsity(sketched ? Ratio : 10);
    if (args.adapt.enabled) sparsity_ = std::clamp(sparsity_, args.adapt.min_sparsity, args.adapt.max_sparsity);
    target_sparsity_ = sparsity_;  // sparsity schedule: the ramp's end (adaptive steers a factor around it)
    const int shards = args.topo == topology::sharded ? args.world_size : 1;
    own_shard_ = args.topo == topology::sharded ? std::size_t(args.rank) : 0;
    const int width = index_policy::width_for(args.world_size);
    exact_index_ = index_policy::exact(width, args.world_size);
    pair_repair_ = width == 1 && args.world_size == 2;
    lay_ = make_layout(args.length, shards, std::size_t(Lanes), Ratio, width);
    if (!sketched) lay_.dense = true;  // no sketch cells; packed slots are sized per call

    const std::size_t index_all = lay_.index_bytes * std::size_t(shards);
    residual_.assign(lay_.length, residual_t(0.0f));
    step_ = 0;
    index_local_.assign(index_all, 0);
    index_.assign(scatter_index() ? lay_.index_bytes : index_all, 0);
    hist_.assign(std::size_t(kernels::hist_copies) * kernels::hist_bins, 0u);
    state_.resize(1);
    counters_.assign(n_counters, 0ull);
    control_send_.assign(control_words, 0);
    control_recv_.assign(control_words * std::size_t(args.world_size), 0);
    max_cell_terms_ = 1;  // a packed slot or a dense cell holds one value per rank
    if constexpr (sketched) {
      const std::size_t cells = lay_.dense ? lay_.shard_size : lay_.cells;
      if constexpr (narrow_cells)
        if (lay_.dense) sketch_f32_.assign(cells * std::size_t(shards), 0.0f);
      values_send_.assign(cells * std::size_t(shards), wire_t(0.0f));
      values_recv_.assign(cells, wire_t(0.0f));
      if (!lay_.dense) {
        count_.assign(lay_.cells, 0u);
        ids_.assign(lay_.cells, 0u);
        writer_.assign(lay_.cells, 0u);
        entry_state_.assign(lay_.shard_size, 0);
        mask_bytes_ = (lay_.shard_size + 7) / 8;
        unresolved_mask_.assign(mask_bytes_ * std::size_t(shards), 0);
        unresolved_total_.assign(1, 0);
        support_.assign(lay_.shard_size, 0u);
        edges_.assign(3 * lay_.shard_size, 0u);
        const auto b = kernels::make_sketch_buckets(lay_);
        max_cell_terms_ = b.max_row_blocks();
        if constexpr (narrow_cells) sketch_f32_.assign(lay_.cells * std::size_t(shards), 0.0f);
        bucket_start_.resize(b.start.size());
        bucket_order_.resize(b.order.size());
        TAGC_TRY(exec_.copy_from_host(b.start.data(), raw(bucket_start_), b.start.size()));
        TAGC_TRY(exec_.copy_from_host(b.order.data(), raw(bucket_order_), b.order.size()));
      }
    } else {
      // Worst case every entry of a shard is in the union: room for whole shards.
      values_send_.assign(lay_.padded(), wire_t(0.0f));
      values_recv_.assign(lay_.shard_size, wire_t(0.0f));
      offsets_.assign(index_all + 1, 0u);
      starts_.assign(std::size_t(shards) + 1, 0u);
    }
    last_load_ppm_ = 0;
    last_unresolved_ = 0;
    initialized_ = true;
    return {};
  }

  // Change theta between calls (draining residuals, an external schedule).
  status set_sparsity(double theta) {
    if (!(theta >= 0.0 && theta <= 1.0))
      return {errc::invalid_argument, "sparsity " + std::to_string(theta) + " outside [0, 1]"};
    sparsity_ = theta;
    return {};
  }

  // Time each stage (synchronising after it) and report it in reduce_stats::seconds.
  void set_profiling(bool on) { profiling_ = on; }

  const layout& plan() const { return lay_; }
  const reducer_arguments& arguments() const { return args_; }
  double sparsity() const { return sparsity_; }
  // Theta of the next call: sparsity() on the sparsity schedule's ramp at steps().
  double next_sparsity() const { return scheduled_sparsity(args_.schedule, target_sparsity_, sparsity_, step_); }
  bool exact_index() const { return exact_index_; }
  // Length of the shard a rank receives (sharded) or of the whole buffer (replicated).
  std::size_t output_size() const { return args_.topo == topology::sharded ? lay_.shard_size : lay_.length; }

  // ZeRO-3 / FSDP: rank r receives shard r (output_size() elements, tail padding 0).
  template <communicator C>
  status reduce_scatter(C& comm, std::span<const float> grad, std::span<float> shard, reduce_stats* stats = nullptr) {
    if (args_.topo != topology::sharded)
      return {errc::invalid_argument, "reduce_scatter on a Reducer initialised for topology::replicated"};
    return run(comm, grad, shard, stats);
  }

  // DDP: every rank receives the whole reduced gradient.
  template <communicator C>
  status all_reduce(C& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats = nullptr) {
    if (args_.topo != topology::replicated)
      return {errc::invalid_argument, "all_reduce on a Reducer initialised for topology::sharded"};
    return run(comm, grad, out, stats);
  }

  // ---- state: the error-feedback residual ----
  std::vector<float> residual_to_host() const {
    if constexpr (std::is_same_v<residual_t, float>) {
      return to_host(residual_);
    } else {
      const auto h = to_host(residual_);
      std::vector<float> f(h.size());
      for (std::size_t i = 0; i < h.size(); ++i) f[i] = float(h[i]);
      return f;
    }
  }
  // Bytes the residual occupies (bf16 storage: half of float's).
  std::size_t residual_bytes() const { return residual_.size() * sizeof(residual_t); }
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
    append(out, to_host(residual_).data(), residual_.size());
    return out;
  }

  status load_state(std::span<const std::byte> in) {
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
    TAGC_TRY(load(p, residual_));
    sparsity_ = theta;
    last_load_ppm_ = feedback[0];
    last_unresolved_ = feedback[1];
    step_ = step;
    return {};
  }

 private:
  static constexpr std::size_t n_counters = 3;     // kept, deferred, retransmitted
  // See check_agreement; fp16 values add the top histogram bin for their range scale.
  static constexpr std::size_t control_words = wire_scaled<wire_t> ? 7 : 6;
  static constexpr std::size_t header_words = 11;
  static constexpr std::size_t check_every = 4;    // peeling rounds between progress checks
  // Below this many calls a host launch runs inline: an OpenMP fork/join costs
  // more than the work (and a scheduler slice when the cores are shared).
  static constexpr std::size_t host_inline_below = std::size_t(1) << 15;

  bool scatter_index() const { return IX == index_exchange::reduce_scatter && args_.topo == topology::sharded; }
  std::array<std::uint64_t, header_words> header() const {
    return {state_magic, state_version, lay_.length, std::uint64_t(lay_.shards), std::uint64_t(args_.rank),
            std::uint64_t(lay_.index_bits), std::uint64_t(Ratio), std::uint64_t(Lanes), std::uint64_t(sketched),
            std::uint64_t(args_.topo), std::uint64_t(wire_type_id<residual_t>)};
  }

  // ---- launching (single source: the same functors on every execution space) ----
  template <class V> static auto raw(V& v) { return thrust::raw_pointer_cast(v.data()); }
  template <class V> static auto raw(const V& v) { return thrust::raw_pointer_cast(v.data()); }
  static auto range(std::size_t n) {
    return std::pair{thrust::counting_iterator<std::size_t>(0), thrust::counting_iterator<std::size_t>(n)};
  }
  template <class F> void launch(std::size_t n, F f) const {
    if (n == 0) return;
    if constexpr (!Exec::is_device) {
      if (n < host_inline_below) {
        for (std::size_t i = 0; i < n; ++i) f(i);
        return;
      }
    }
    auto [b, e] = range(n);
    thrust::for_each(exec_.policy(), b, e, f);
  }
  template <class F> unsigned long long sum_over(std::size_t n, F f) const {
    if (n == 0) return 0;
    if constexpr (!Exec::is_device) {
      if (n < host_inline_below) {
        unsigned long long s = 0;
        for (std::size_t i = 0; i < n; ++i) s += f(i);
        return s;
      }
    }
    auto [b, e] = range(n);
    return thrust::transform_reduce(exec_.policy(), b, e, f, 0ull, thrust::plus<unsigned long long>());
  }
  template <class F> unsigned long long sum_over_support(std::size_t m, F f) const {
    if (m == 0) return 0;
    if constexpr (!Exec::is_device) {
      if (m < host_inline_below) {
        unsigned long long s = 0;
        for (std::size_t i = 0; i < m; ++i) s += f(support_[i]);
        return s;
      }
    }
    return thrust::transform_reduce(exec_.policy(), support_.begin(), support_.begin() + std::ptrdiff_t(m), f, 0ull,
                                    thrust::plus<unsigned long long>());
  }
  template <class T> std::vector<T> to_host(const vector<T>& v) const {
    std::vector<T> h(v.size());
    (void)exec_.copy_to_host(raw(v), h.data(), v.size());
    return h;
  }
  template <class T> static void append(std::vector<std::byte>& out, const T* p, std::size_t n) {
    // resize + memcpy, not insert: GCC 12 warns falsely (-Wstringop-overflow) on the inlined insert
    const std::size_t at = out.size();
    out.resize(at + n * sizeof(T));
    if (n) std::memcpy(out.data() + at, p, n * sizeof(T));
  }
  template <class T> status load(const std::byte*& p, vector<T>& v) {
    std::vector<T> h(v.size());
    if (!h.empty()) std::memcpy(h.data(), p, h.size() * sizeof(T));
    p += h.size() * sizeof(T);
    return exec_.copy_from_host(h.data(), raw(v), h.size());
  }
  // The owner's summed cells in fp32, as peeling consumes them: the received
  // cells themselves, or their fp32 widening when they travel in 16 bits.
  float* decode_cells() {
    if constexpr (narrow_cells) return raw(sketch_f32_);
    else return raw(values_recv_);
  }

  // Lanes per sketch-building call: the execution space's tuning, 1 if it has none.
  std::size_t sketch_chunk() const {
    std::size_t c = 1;
    if constexpr (requires { Exec::sketch_lanes_per_call; }) c = Exec::sketch_lanes_per_call;
    return std::max<std::size_t>(1, std::min(c, lay_.lanes));
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

  // Every rank contributes {grad length, output length, non-finite count, config,
  // load of its last decode (ppm), entries it left unresolved} and every rank
  // reaches the same verdict, and the same adaptive theta, from the gathered table.
  template <communicator C>
  status check_agreement(C& comm, std::size_t grad_len, std::size_t out_len, std::uint32_t nonfinite,
                         std::uint32_t top_bin) {
    const std::int64_t config = std::int64_t(lay_.index_bits) * 1000003 + std::int64_t(IX) * 100003 +
                                Ratio * 1009 + int(args_.topo) * 7 + int(args_.op) + (sketched ? 0 : 500009) +
                                std::int64_t(wire_type_id<wire_t>) * 50021;
    std::int64_t mine[control_words] = {std::int64_t(grad_len), std::int64_t(out_len), std::int64_t(nonfinite),
                                        config, last_load_ppm_, last_unresolved_};
    if constexpr (wire_scaled<wire_t>) mine[6] = std::int64_t(top_bin);
    else (void)top_bin;
    TAGC_TRY(exec_.copy_from_host(mine, raw(control_send_), control_words));
    TAGC_TRY(comm.all_gather(std::span<const std::int64_t>(raw(control_send_), control_words),
                             std::span<std::int64_t>(raw(control_recv_), control_recv_.size())));
    const auto all = to_host(control_recv_);
    const auto at = [&](int r, int w) { return all[std::size_t(r) * control_words + std::size_t(w)]; };
    const int n = args_.world_size;
    for (int r = 0; r < n; ++r) {
      if (at(r, 0) != std::int64_t(lay_.length))
        return {errc::size_mismatch, "rank " + std::to_string(r) + " passed a gradient of " +
                                         std::to_string(at(r, 0)) + " elements, the reducer was planned for " +
                                         std::to_string(lay_.length)};
      if (at(r, 1) != std::int64_t(output_size()))
        return {errc::size_mismatch, "rank " + std::to_string(r) + " passed an output of " +
                                         std::to_string(at(r, 1)) + " elements, expected " +
                                         std::to_string(output_size())};
      if (at(r, 3) != at(0, 3))
        return {errc::invalid_argument, "rank " + std::to_string(r) +
                                            " uses a different reducer configuration (index, values policy, "
                                            "topology or op) than rank 0"};
    }
    std::string bad;
    for (int r = 0; r < n; ++r)
      if (at(r, 2) != 0)
        bad += (bad.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " has " +
               std::to_string(at(r, 2)) + " NaN/Inf entries";
    if (!bad.empty()) return {errc::non_finite, "gradient + residual is not finite: " + bad + "; residual left unchanged"};
    if constexpr (wire_scaled<wire_t>) {
      std::int64_t top = 0;
      for (int r = 0; r < n; ++r) top = std::max(top, at(r, 6));
      const std::uint64_t terms = std::uint64_t(n) * max_cell_terms_;
      if (!fp16_scale_fits(std::uint32_t(top), terms))
        return {errc::invalid_argument, "fp16 values cannot carry this call: max |gradient + residual| is near float's "
                                        "largest values and " + std::to_string(terms) +
                                        " of them may be summed; use bf16 values; residual left unchanged"};
      wire_exp_ = fp16_scale_exponent(std::uint32_t(top), terms);
    }
    if (args_.adapt.enabled) {
      std::int64_t load = 0, unresolved = 0;
      for (int r = 0; r < n; ++r) {
        load = std::max(load, at(r, 4));
        unresolved += at(r, 5);
      }
      adapt_sparsity(double(load) * 1e-6, unresolved);
    }
    return {};
  }

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
    const bool sizes_ok = grad.size() == lay_.length && out.size() == output_size();
    if (!sizes_ok && !args_.check_inputs)
      return {errc::size_mismatch, "gradient has " + std::to_string(grad.size()) + " elements (expected " +
                                       std::to_string(lay_.length) + "), output " + std::to_string(out.size()) +
                                       " (expected " + std::to_string(output_size()) + ")"};
    const std::size_t n = lay_.length;
    const float* g = grad.data();
    residual_t* r = raw(residual_);
    auto* st = raw(state_);
    auto* cnt = raw(counters_);
    using S = reduce_stats::stage_seconds;
    seconds_ = {};
    last_unfed_rounding_ = 0.0;
    stage_clock clock{this};

    // 1. Check (and, with adaptive theta, agree on theta) before anything changes.
    // The histogram starts clean every call: a call refused after its first pass (the
    // check below, or a failed collective) leaves counts behind, which would skew the
    // next call's threshold and fp16 scale (NaN/Inf bins).
    thrust::fill(exec_.policy(), hist_.begin(), hist_.end(), 0u);
    launch(1, kernels::init_select{st, cnt, n_counters, 0u, 0u});
    if (sizes_ok) launch(n, kernels::histogram_pass<residual_t>{g, r, raw(hist_), st, 0});  // counts NaN/Inf, histograms too
    if (wire_scaled<wire_t> && sizes_ok) launch(1, kernels::find_top_bin{raw(hist_), st});  // max |acc| for the fp16 scale
    clock.mark(&S::sparsify);
    if (args_.check_inputs) {
      kernels::select_state h{};
      TAGC_TRY(exec_.copy_to_host(st, &h, 1));
      TAGC_TRY(check_agreement(comm, grad.size(), out.size(), sizes_ok ? h.nonfinite : 0u, h.top_bin));
      clock.mark(&S::check);
    }

    // 2. Threshold: the (k+1)-th largest |acc|, k = most entries that may be kept.
    call_sparsity_ = next_sparsity();  // sparsity schedule hook (adaptive moved sparsity_ just above)
    const auto k = static_cast<std::size_t>(std::floor((1.0 - call_sparsity_) * double(n)));
    if (k == 0 || k >= n) {
      launch(1, kernels::fix_threshold{st, k == 0 ? inf_bits : 0u});  // keep nothing / every nonzero
    } else {
      launch(1, kernels::start_select{st, std::uint32_t(k + 1)});
      for (int pass = 0; pass < kernels::select_passes; ++pass) {
        if (pass > 0) launch(n, kernels::histogram_pass<residual_t>{g, r, raw(hist_), st, pass});
        launch(1, kernels::select_digit{raw(hist_), st, pass});
      }
    }
    clock.mark(&S::sparsify);

    // 3. Index: local marks, summed across ranks.
    const std::size_t index_all = index_local_.size();
    std::uint8_t* local = raw(index_local_);
    std::uint8_t* idx = raw(index_);
    launch(index_all, kernels::build_index<residual_t>{g, r, st, local, cnt + 0, lay_});
    clock.mark(&S::index);
    const std::span<const std::uint8_t> index_send(local, index_all);
    if (scatter_index()) TAGC_TRY(comm.reduce_scatter(index_send, std::span<std::uint8_t>(idx, index_.size())));
    else TAGC_TRY(comm.all_reduce(index_send, std::span<std::uint8_t>(idx, index_.size())));
    if (pair_repair_) {
      const std::uint8_t* mine = scatter_index() ? local + own_shard_ * lay_.index_bytes : local;
      launch(index_.size(), kernels::repair_pair_index{mine, idx});
    }
    clock.mark(&S::index_exchange);
    // What the owner decodes with, and what senders check their entries against
    // (nothing, when the index is exact: every kept entry is then marked).
    const std::uint8_t* own_index = scatter_index() ? idx : idx + own_shard_ * lay_.index_bytes;
    const std::uint8_t* sender_check = exact_index_ ? nullptr : idx;
    const kernels::contribution<residual_t> value{g, r, sender_check, st, lay_};
    const float scale = args_.op == reduce_op::mean ? 1.0f / float(args_.world_size) : 1.0f;
    // Low precision: values travel as wire_t(acc * 2^k) (k = 0 but for fp16), and
    // a bf16 residual rounds stochastically with this call's seed.
    const float wire_scale = kernels::pow2(wire_exp_), wire_unscale = kernels::pow2(-wire_exp_);
    const std::uint32_t seed = kernels::residual_seed(step_, args_.rank);
    using update_t = kernels::update_residual<wire_t, residual_t>;
    float* o = out.data();

    // 4. Values, exchanged to the owner(s); then commit the residual and decode.
    if constexpr (sketched) {
      const std::size_t chunk = sketch_chunk();
      using build_t = kernels::build_sketch<wire_t, kernels::contribution<residual_t>>;
      if constexpr (narrow_cells) {
        // Cells are summed in fp32 from values already rounded to wire_t (that
        // rounding goes back to the residual), then rounded once for the wire.
        launch(build_t::calls(lay_, chunk),
               build_t{value, raw(bucket_start_), raw(bucket_order_), raw(sketch_f32_), chunk, wire_scale});
        launch(values_send_.size(), kernels::round_cells<wire_t>{raw(sketch_f32_), raw(values_send_)});
        if (stats) {  // this rank's cell roundings, which no residual gets back
          auto [b, e] = range(values_send_.size());
          last_unfed_rounding_ = double(wire_unscale) *
              thrust::transform_reduce(exec_.policy(), b, e, kernels::cell_rounding<wire_t>{raw(sketch_f32_), raw(values_send_)},
                                       0.0, thrust::plus<double>());
        }
      } else {
        launch(build_t::calls(lay_, chunk),
               build_t{value, raw(bucket_start_), raw(bucket_order_), raw(values_send_), chunk, wire_scale});
      }
      clock.mark(&S::sketch);
      TAGC_TRY(exchange_values(comm, values_send_.size(), values_recv_.size()));
      clock.mark(&S::value_exchange);
      if constexpr (narrow_cells)  // decode in fp32: widen (and unscale) the owner's summed cells
        launch(values_recv_.size(), kernels::widen_cells<wire_t>{raw(values_recv_), raw(sketch_f32_), wire_unscale});
      const std::uint8_t* retransmit = nullptr;
      if (lay_.dense) {
        launch(lay_.shard_size, kernels::decode_dense{decode_cells(), o, 1.0f});
        last_decode_ = {};
        retransmit_sent_ = 0.0;
      } else {
        decode(o, own_index);
        clock.mark(&S::decode);
        TAGC_TRY(publish_unresolved(comm, retransmit));
        clock.mark(&S::value_exchange);
      }
      // From here on the step cannot fail.
      launch(n, update_t{g, r, sender_check, retransmit, st, cnt, lay_, wire_scale, wire_unscale, seed});
      if (last_decode_.unresolved && decode_policy::estimates && owes_estimates()) {
        if constexpr (std::is_same_v<residual_t, float>)
          launch(lay_.shard_size, kernels::owe_estimates{raw(entry_state_), o, r, own_shard_ * lay_.shard_size, n});
        else  // (owe_estimates_stored tests the decode state against entry_unresolved == 1)
          launch(lay_.shard_size, kernels::owe_estimates_stored<residual_t>{raw(entry_state_), o, r,
                                                                            own_shard_ * lay_.shard_size, n, seed});
      }
      if (scale != 1.0f) launch(lay_.shard_size, kernels::scale_output{o, scale});
    } else {
      // Slots per shard = marks in it; every rank computes all of them alike.
      const auto marks = thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0),
                                                         kernels::marks_in_byte{idx, lay_, index_all});
      thrust::exclusive_scan(exec_.policy(), marks, marks + std::ptrdiff_t(index_all + 1), offsets_.begin(), 0u);
      launch(starts_.size(), kernels::shard_starts{raw(offsets_), raw(starts_), lay_.index_bytes});
      std::vector<std::uint32_t> starts(starts_.size());
      TAGC_TRY(exec_.copy_to_host(raw(starts_), starts.data(), starts.size()));
      std::size_t slots = 0;
      for (std::size_t s = 0; s + 1 < starts.size(); ++s) slots = std::max<std::size_t>(slots, starts[s + 1] - starts[s]);
      const std::size_t shards = std::size_t(lay_.shards);
      launch(shards * slots, kernels::zero_padding_slots<wire_t>{raw(starts_), raw(values_send_), slots});
      launch(index_all, kernels::pack_values<wire_t, kernels::contribution<residual_t>>{
                            value, idx, raw(offsets_), raw(starts_), raw(values_send_), slots, wire_scale});
      clock.mark(&S::sketch);
      TAGC_TRY(exchange_values(comm, shards * slots, slots));
      clock.mark(&S::value_exchange);
      launch(n, update_t{g, r, sender_check, nullptr, st, cnt, lay_, wire_scale, wire_unscale, seed});
      launch(lay_.index_bytes, kernels::unpack_values<wire_t>{idx, raw(offsets_), raw(starts_), raw(values_recv_), o,
                                                      scale * wire_unscale,
                                                      lay_, own_shard_});
      last_slots_ = slots;
    }
    clock.mark(&S::decode);  // includes committing the residual
    ++step_;                 // committed: the next call rounds a bf16 residual with fresh bits

    if (stats || args_.adapt.enabled) {
      reduce_stats local_stats;
      reduce_stats& s = stats ? *stats : local_stats;
      TAGC_TRY(fill_stats(comm.size(), s, own_index));
      last_load_ppm_ = std::int64_t(std::llround(s.load * 1e6));
      last_unresolved_ = std::int64_t(s.unresolved);
    }
    return {};
  }

  template <communicator C>
  status exchange_values(C& comm, std::size_t send_count, std::size_t recv_count) {
    last_value_bytes_ = send_count * sizeof(wire_t);
    const std::span<const wire_t> send(raw(values_send_), send_count);
    const std::span<wire_t> recv(raw(values_recv_), recv_count);
    if (args_.topo == topology::sharded) return comm.reduce_scatter(send, recv);
    return comm.all_reduce(send, recv);
  }

  // In replicated mode every rank decodes the same shard to the same bits, so
  // one rank (0) stands for "the owner" when estimates are owed.
  bool owes_estimates() const { return args_.topo == topology::sharded || args_.rank == 0; }

  // Tell every sender which entries of which shard were not resolved: a tiny
  // all-reduce of the count, then (only when it is not zero) an all-gather of
  // one bitmap per shard. Replicated: every rank already knows.
  template <communicator C>
  status publish_unresolved(C& comm, const std::uint8_t*& retransmit) {
    retransmit = nullptr;
    retransmit_sent_ = 0.0;
    std::uint8_t* mine = raw(unresolved_mask_) + (args_.topo == topology::sharded ? own_shard_ * mask_bytes_ : 0);
    std::int64_t total = std::int64_t(last_decode_.unresolved);
    if (args_.topo == topology::sharded && args_.world_size > 1) {
      TAGC_TRY(exec_.copy_from_host(&total, raw(unresolved_total_), 1));
      const std::span<std::int64_t> t(raw(unresolved_total_), 1);
      TAGC_TRY(comm.all_reduce(std::span<const std::int64_t>(t), t));
      TAGC_TRY(exec_.copy_to_host(raw(unresolved_total_), &total, 1));
      retransmit_sent_ = ring_bytes_sent(collective::all_reduce, 8.0, args_.world_size);
    }
    if (total == 0) return {};
    launch(mask_bytes_, kernels::unresolved_bitmap{raw(entry_state_), mine, lay_.shard_size});
    if (args_.topo == topology::sharded && args_.world_size > 1) {
      TAGC_TRY(comm.all_gather(std::span<const std::uint8_t>(mine, mask_bytes_),
                               std::span<std::uint8_t>(raw(unresolved_mask_), unresolved_mask_.size())));
      retransmit_sent_ += ring_bytes_sent(collective::all_gather, double(unresolved_mask_.size()), args_.world_size);
    }
    retransmit = raw(unresolved_mask_);
    return {};
  }

  // ---- peeling driver (kernels in policy/decode.hpp) ----
  // Serialised subtraction rounds until every resolved entry has been subtracted
  // from its cells, or nothing moves any more.
  void apply_rounds(const kernels::decode_view& v, std::size_t m) {
    unsigned long long before = sum_over_support(m, kernels::work_left{v});
    const std::size_t max_rounds = 2 * m + 8;  // each productive round retires at least one unit of work
    for (std::size_t round = 0; before != 0 && round < max_rounds; ++round) {
      launch(m, kernels::peel_round{v});
      launch(m, kernels::claim_cells{v});
      launch(m, kernels::apply_resolved{v});
      launch(m, kernels::release_cells{v});
      if (round % check_every == check_every - 1) {  // not every round: each check is a host round trip on a GPU
        const unsigned long long now = sum_over_support(m, kernels::work_left{v});
        // Only unresolved entries with no lone cell left: a stopping set.
        if (now == before && sum_over_support(m, kernels::count_state{v, kernels::entry_resolved}) == 0) break;
        before = now;
      }
    }
  }

  // Peel (and estimate) the owner's shard into `out`, unscaled; entry_state_
  // tells afterwards which entries stayed unresolved.
  void decode(float* out, const std::uint8_t* own_index) {
    const std::size_t S = lay_.shard_size, C = lay_.cells;
    const kernels::decode_view v{lay_,      own_shard_,   own_index,         decode_cells(),    raw(count_),
                                 raw(ids_), raw(writer_), raw(entry_state_), raw(support_),     raw(edges_),
                                 out};
    decode_result d;
    launch(S, kernels::mark_support{v});
    const auto last = thrust::copy_if(exec_.policy(), thrust::counting_iterator<std::uint32_t>(0),
                                      thrust::counting_iterator<std::uint32_t>(std::uint32_t(S)), support_.begin(),
                                      kernels::is_support_entry{raw(entry_state_)});
    const std::size_t m = std::size_t(last - support_.begin());
    launch(C, kernels::reset_cells{v});
    launch(m, kernels::add_edges{v});
    if constexpr (decode_policy::peels) apply_rounds(v, m);
    d.support = m;
    d.unresolved = sum_over_support(m, kernels::count_state{v, kernels::entry_unresolved});
    d.peeled = m - d.unresolved;
    if constexpr (decode_policy::estimates)
      if (d.unresolved) launch(m, kernels::estimate_round{v});
    last_decode_ = d;
  }

  status fill_stats(int world, reduce_stats& s, const std::uint8_t* own_index) const {
    unsigned long long c[n_counters];
    kernels::select_state st{};
    TAGC_TRY(exec_.copy_to_host(raw(counters_), c, n_counters));
    TAGC_TRY(exec_.copy_to_host(raw(state_), &st, 1));
    s = reduce_stats{};
    s.elements = lay_.length;
    s.theta = call_sparsity_;
    s.kept = c[0];
    s.deferred = c[1];
    s.retransmitted = c[2];
    s.sparsity = lay_.length ? 1.0 - double(s.kept) / double(lay_.length) : 1.0;
    s.threshold = float_from_bits(st.threshold);
    s.index_bits = lay_.index_bits;
    s.exact_index = exact_index_;
    // Marks in what this rank received: the whole index, or its shard's part.
    const std::size_t first_shard = scatter_index() ? own_shard_ : 0;
    s.index_popcount = sum_over(index_.size(), kernels::count_marks{raw(index_), lay_, first_shard});
    s.seconds = seconds_;
    s.dense = lay_.dense;
    if (!sketched) {
      s.support = sum_over(lay_.index_bytes, kernels::count_marks{own_index, lay_, own_shard_});
      s.peeled = s.support;
      s.packed_slots = last_slots_;
    } else if (!lay_.dense) {
      s.support = last_decode_.support;
      s.peeled = last_decode_.peeled;
      s.unresolved = last_decode_.unresolved;
      s.load = lay_.cells ? double(s.support) / double(lay_.cells) : 0.0;
    }
    s.control_bytes = args_.check_inputs
        ? ring_bytes_sent(collective::all_gather, double(control_words * 8 * std::size_t(world)), world) : 0.0;
    s.index_bytes = ring_bytes_sent(scatter_index() ? collective::reduce_scatter : collective::all_reduce,
                                    double(index_local_.size()), world);
    s.value_bytes = ring_bytes_sent(
        args_.topo == topology::sharded ? collective::reduce_scatter : collective::all_reduce,
        double(last_value_bytes_), world);
    s.retransmit_bytes = retransmit_sent_;
    s.value_type_bytes = int(sizeof(wire_t));
    s.value_scale_exponent = wire_exp_;
    s.unfed_rounding = last_unfed_rounding_;
    s.residual_bytes = residual_.size() * sizeof(residual_t);
    return {};
  }

  reducer_arguments args_{};
  Exec exec_{};
  double sparsity_ = 0.0;
  double target_sparsity_ = 0.0, call_sparsity_ = 0.0;  // sparsity schedule: ramp end, last call's theta
  std::size_t own_shard_ = 0;
  layout lay_{};
  bool exact_index_ = false;  // the reduced index is the union (senders need not check it)
  bool pair_repair_ = false;  // 1-bit index at N = 2: repaired to the exact union
  bool initialized_ = false;
  bool profiling_ = false;
  reduce_stats::stage_seconds seconds_{};
  std::int64_t last_load_ppm_ = 0, last_unresolved_ = 0;  // published for adaptive theta
  std::uint64_t step_ = 0;           // successful calls (stochastic-rounding seed; checkpointed)
  int wire_exp_ = 0;                 // fp16: values travel as x * 2^wire_exp_ (agreed per call)
  std::size_t max_cell_terms_ = 1;   // most values one rank adds into one cell / slot
  double last_unfed_rounding_ = 0.0; // this call's sketch-cell rounding (not fed back)
  std::size_t last_value_bytes_ = 0, last_slots_ = 0, mask_bytes_ = 0;
  double retransmit_sent_ = 0.0;

  vector<residual_t> residual_;        // [length]   error feedback (the state): float or bf16
  vector<std::uint8_t> index_local_;   // [shards][index_bytes] this rank's marks
  vector<std::uint8_t> index_;         // summed: all shards, or this shard's (index reduce-scatter)
  vector<wire_t> values_send_;         // sketch [shards][cells] or packed [shards][slots]
  vector<wire_t> values_recv_;         // this shard's summed cells or slots
  vector<std::uint32_t> hist_;         // radix-select histograms
  vector<kernels::select_state> state_;
  vector<unsigned long long> counters_;
  vector<std::int64_t> control_send_, control_recv_;
  vector<std::uint32_t> count_, ids_, writer_;  // peeling workspace [cells]
  vector<std::uint8_t> unresolved_mask_;       // [shards][mask_bytes] entries to retransmit
  vector<std::int64_t> unresolved_total_;       // [1]
  vector<std::uint8_t> entry_state_;            // [shard]
  vector<std::uint32_t> support_;               // [shard] compacted support list
  vector<std::uint32_t> edges_;                 // [3 * shard] cached cells and signs of the support
  vector<std::uint32_t> bucket_start_, bucket_order_;  // sketch gather map (constant)
  vector<std::uint32_t> offsets_, starts_;      // packed: scan over index bytes, shard starts
  vector<float> sketch_f32_;                    // 16-bit sketch cells: fp32 sums before rounding; then the owner's widened cells
  struct decode_result {
    std::size_t support = 0, peeled = 0, unresolved = 0;
  } last_decode_;
};

TAGC_END_NAMESPACE
