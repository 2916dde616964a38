#pragma once
// defines: tagc::Reducer<Sparsify, Index, Sketch, Decode, Exec>, tagc::reducer_arguments,
//          tagc::reduce_op.
//
// The TAGC pipeline for one flat gradient buffer (one FSDP unit), composed at
// compile time from its policies:
//
//   check    all ranks agree on lengths, nobody has NaN/Inf   (all-gather, 32 B/rank)
//   sparsify acc = g + residual; threshold = (k+1)-th largest |acc|     (no host sync)
//   index    bitmap of kept entries, summed across ranks          (all-reduce, uint8)
//   sketch   count sketch per shard of the entries the *reduced* index marks
//   exchange sum of sketches to each shard's owner                (reduce-scatter)
//   residual residual = acc where nothing was sent, else 0
//   decode   owner peels its shard (and estimates / carries what is left)
//
// The contract is CUTLASS-like: can_implement(args), initialize(args, exec)
// sizes and allocates every workspace once from the layout; the step path
// (reduce_scatter / all_reduce) allocates nothing. Errors are returned as
// tagc::status; whenever one is returned, the residual is as it was before the
// call. Every rank returns the same verdict for bad input (mismatched lengths,
// NaN/Inf on any rank), so no rank is left waiting in a collective.
//
// When peeling succeeds, the result equals a dense reduce-scatter of the
// sparsified gradients (to float-sum tolerance). Unresolved remainders are
// carried by the owner to later steps (policy/decode.hpp), so over any number of
// steps: sum of inputs = sum delivered + residuals + carried remainders.

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
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>
#include <thrust/functional.h>

#include "comm/communicator.hpp"
#include "core/status.hpp"
#include "exec/host.hpp"
#include "policy/decode.hpp"
#include "policy/index.hpp"
#include "policy/sketch.hpp"
#include "policy/sparsify.hpp"
#include "shard/layout.hpp"
#include "stats.hpp"

TAGC_BEGIN_NAMESPACE

enum class reduce_op { sum, mean };

struct reducer_arguments {
  std::size_t length = 0;   // elements of the local (full, unsharded) gradient
  int world_size = 1;
  int rank = 0;
  topology topo = topology::sharded;
  reduce_op op = reduce_op::sum;
  double sparsity = -1.0;   // theta; < 0 picks the paper's pairing for the sketch ratio
  bool check_inputs = true; // agreement + NaN/Inf check before every call (one tiny all-gather)
};

template <class>
inline constexpr bool tagc_dependent_false = false;

// Primary template: only the combinations specialised below exist.
template <class Sparsify, class Index, class Sketch, class Decode, class Exec = exec::host>
class Reducer {
  static_assert(tagc_dependent_false<Sparsify>,
                "tagc: no Reducer for this policy combination; expected "
                "Reducer<SparsifyPolicy, IndexPolicy<1|4>, SketchPolicy<ratio>, DecodePolicy<mode>[, Exec]>");
};

template <int Bits, int Ratio, int Lanes, decode_mode Mode, class Exec>
class Reducer<SparsifyPolicy, IndexPolicy<Bits>, SketchPolicy<Ratio, Lanes>, DecodePolicy<Mode>, Exec> {
 public:
  using sparsify_policy = SparsifyPolicy;
  using index_policy = IndexPolicy<Bits>;
  using sketch_policy = SketchPolicy<Ratio, Lanes>;
  using decode_policy = DecodePolicy<Mode>;
  using exec_space = Exec;
  template <class T> using vector = typename Exec::template vector<T>;

  static constexpr std::uint32_t state_magic = 0x74616763;  // "tagc"
  static constexpr std::uint32_t state_version = 1;

  static status can_implement(const reducer_arguments& a) {
    if (a.world_size < 1) return {errc::invalid_argument, "world size " + std::to_string(a.world_size) + " < 1"};
    if (a.rank < 0 || a.rank >= a.world_size)
      return {errc::invalid_argument,
              "rank " + std::to_string(a.rank) + " outside [0, " + std::to_string(a.world_size) + ")"};
    if (index_policy::max_exact_world && a.world_size > index_policy::max_exact_world)
      return {errc::unsupported_world_size,
              "IndexPolicy<" + std::to_string(Bits) + "> counts at most " +
                  std::to_string(index_policy::max_exact_world) + " ranks per element, world size is " +
                  std::to_string(a.world_size) + "; its counters would overflow"};
    if (a.length >= (std::size_t(1) << 32))
      return {errc::invalid_argument, "length " + std::to_string(a.length) + " >= 2^32 elements; split the unit"};
    if (a.sparsity > 1.0 || (a.sparsity >= 0.0 && std::isnan(a.sparsity)))
      return {errc::invalid_argument, "sparsity " + std::to_string(a.sparsity) + " outside [0, 1]"};
    return {};
  }

  Reducer() = default;

  status initialize(const reducer_arguments& args, Exec exec = {}) {
    TAGC_TRY(can_implement(args));
    args_ = args;
    exec_ = exec;
    sparsity_ = args.sparsity >= 0.0 ? args.sparsity : default_sparsity(Ratio);
    const int shards = args.topo == topology::sharded ? args.world_size : 1;
    own_shard_ = args.topo == topology::sharded ? std::size_t(args.rank) : 0;
    lay_ = make_layout(args.length, shards, std::size_t(Lanes), Ratio, Bits);

    residual_.assign(lay_.length, 0.0f);
    index_.assign(lay_.index_bytes * std::size_t(shards), 0);
    sketch_send_.assign(lay_.cells * std::size_t(shards), 0.0f);
    sketch_recv_.assign(lay_.cells, 0.0f);
    hist_.assign(std::size_t(kernels::hist_copies) * kernels::hist_bins, 0u);
    state_.resize(1);
    counters_.assign(n_counters, 0ull);
    control_send_.assign(control_words, 0);
    control_recv_.assign(control_words * std::size_t(args.world_size), 0);
    if (!lay_.dense) {
      carry_.assign(lay_.cells, 0.0f);
      pending_.assign(lay_.shard_size, 0);
      count_.assign(lay_.cells, 0u);
      ids_.assign(lay_.cells, 0u);
      writer_.assign(lay_.cells, 0u);
      keep_.assign(lay_.cells, 0);
      entry_state_.assign(lay_.shard_size, 0);
      support_.assign(lay_.shard_size, 0u);
      const auto b = kernels::make_sketch_buckets(lay_);
      bucket_start_.resize(b.start.size());
      bucket_order_.resize(b.order.size());
      TAGC_TRY(exec_.copy_from_host(b.start.data(), raw(bucket_start_), b.start.size()));
      TAGC_TRY(exec_.copy_from_host(b.order.data(), raw(bucket_order_), b.order.size()));
    }
    initialized_ = true;
    return {};
  }

  // Change theta between calls (adaptive sparsity, draining residuals).
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

  // ---- state: error-feedback residual and the owner's carried remainders ----
  std::vector<float> residual_to_host() const { return to_host(residual_); }
  std::vector<float> carry_to_host() const { return to_host(carry_); }
  std::vector<std::uint8_t> pending_to_host() const { return to_host(pending_); }
  std::size_t pending_count() const {
    const auto p = to_host(pending_);
    std::size_t c = 0;
    for (auto v : p) c += v;
    return c;
  }

  // Checkpoint: everything a resumed run needs to continue exactly.
  std::vector<std::byte> save_state() const {
    std::vector<std::byte> out;
    const std::uint64_t header[] = {state_magic, state_version, lay_.length, std::uint64_t(lay_.shards),
                                    std::uint64_t(args_.rank), std::uint64_t(Bits), std::uint64_t(Ratio),
                                    std::uint64_t(Lanes), carry_.size(), pending_.size()};
    append(out, header, std::size(header));
    append(out, to_host(residual_).data(), residual_.size());
    append(out, to_host(carry_).data(), carry_.size());
    append(out, to_host(pending_).data(), pending_.size());
    return out;
  }

  status load_state(std::span<const std::byte> in) {
    if (!initialized_) return {errc::invalid_argument, "load_state before initialize"};
    std::uint64_t h[10];
    if (in.size() < sizeof h) return {errc::io, "reducer state truncated: " + std::to_string(in.size()) + " bytes"};
    std::memcpy(h, in.data(), sizeof h);
    if (h[0] != state_magic || h[1] != state_version)
      return {errc::io, "not a tagc reducer state (bad magic or version)"};
    const std::uint64_t want[] = {state_magic, state_version, lay_.length, std::uint64_t(lay_.shards),
                                  std::uint64_t(args_.rank), std::uint64_t(Bits), std::uint64_t(Ratio),
                                  std::uint64_t(Lanes), carry_.size(), pending_.size()};
    static const char* names[] = {"magic", "version", "length", "shards", "rank", "index bits", "sketch ratio",
                                  "lanes", "carry size", "pending size"};
    for (int i = 2; i < 10; ++i)
      if (h[i] != want[i])
        return {errc::size_mismatch, std::string("reducer state was saved with ") + names[i] + " " +
                                         std::to_string(h[i]) + ", this reducer has " + std::to_string(want[i])};
    const std::size_t need = sizeof h + residual_.size() * 4 + carry_.size() * 4 + pending_.size();
    if (in.size() != need)
      return {errc::io, "reducer state has " + std::to_string(in.size()) + " bytes, expected " + std::to_string(need)};
    const std::byte* p = in.data() + sizeof h;
    TAGC_TRY(load(p, residual_));
    TAGC_TRY(load(p, carry_));
    TAGC_TRY(load(p, pending_));
    return {};
  }

 private:
  static constexpr std::size_t n_counters = 2;  // kept, deferred
  static constexpr std::size_t control_words = 4;
  static constexpr std::size_t check_every = 4;  // peeling rounds between progress checks

  // Lanes per sketch-building call: the execution space's tuning, 1 if it has none.
  std::size_t sketch_chunk() const {
    std::size_t c = 1;
    if constexpr (requires { Exec::sketch_lanes_per_call; }) c = Exec::sketch_lanes_per_call;
    return std::max<std::size_t>(1, std::min(c, lay_.lanes));
  }
  template <class V> static auto raw(V& v) { return thrust::raw_pointer_cast(v.data()); }
  template <class V> static auto raw(const V& v) { return thrust::raw_pointer_cast(v.data()); }
  auto range(std::size_t n) const {
    return std::pair{thrust::counting_iterator<std::size_t>(0), thrust::counting_iterator<std::size_t>(n)};
  }
  // Below this many calls a host launch runs inline: an OpenMP fork/join costs
  // more than the work (and a scheduler slice when the cores are shared).
  static constexpr std::size_t host_inline_below = std::size_t(1) << 15;
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
  template <class T> std::vector<T> to_host(const vector<T>& v) const {
    std::vector<T> h(v.size());
    (void)exec_.copy_to_host(raw(v), h.data(), v.size());
    return h;
  }
  template <class T> static void append(std::vector<std::byte>& out, const T* p, std::size_t n) {
    const auto* b = reinterpret_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n * sizeof(T));
  }
  template <class T> status load(const std::byte*& p, vector<T>& v) {
    std::vector<T> h(v.size());
    if (!h.empty()) std::memcpy(h.data(), p, h.size() * sizeof(T));
    p += h.size() * sizeof(T);
    return exec_.copy_from_host(h.data(), raw(v), h.size());
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

  // Every rank contributes {grad length, output length, non-finite count, config}
  // and every rank reaches the same verdict from the gathered table.
  template <communicator C>
  status check_agreement(C& comm, std::size_t grad_len, std::size_t out_len, std::uint32_t nonfinite) {
    std::int64_t mine[control_words] = {std::int64_t(grad_len), std::int64_t(out_len), std::int64_t(nonfinite),
                                        std::int64_t(Bits * 1000003 + Ratio * 1009 + int(args_.topo) * 7 +
                                                     int(args_.op))};
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
                                            " uses a different reducer configuration (index bits, ratio, topology "
                                            "or op) than rank 0"};
    }
    std::string bad;
    for (int r = 0; r < n; ++r)
      if (at(r, 2) != 0)
        bad += (bad.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " has " +
               std::to_string(at(r, 2)) + " NaN/Inf entries";
    if (!bad.empty()) return {errc::non_finite, "gradient + residual is not finite: " + bad + "; residual left unchanged"};
    return {};
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
    float* r = raw(residual_);
    auto* st = raw(state_);
    auto* cnt = raw(counters_);

    // k = most entries that may be kept. Search for the (k+1)-th largest |acc|.
    const auto k = static_cast<std::size_t>(std::floor((1.0 - sparsity_) * double(n)));
    std::uint32_t remaining = 0, fixed_threshold = 0;
    if (k == 0) fixed_threshold = inf_bits;          // keep nothing
    else if (k >= n) fixed_threshold = 0;            // keep every nonzero
    else remaining = std::uint32_t(k + 1);
    using S = reduce_stats::stage_seconds;
    seconds_ = {};
    stage_clock clock{this};
    launch(1, kernels::init_select{st, cnt, n_counters, remaining, fixed_threshold});
    if (sizes_ok) launch(n, kernels::histogram_pass{g, r, raw(hist_), st, 0});  // also counts NaN/Inf
    clock.mark(&S::sparsify);

    if (args_.check_inputs) {
      kernels::select_state h{};
      TAGC_TRY(exec_.copy_to_host(st, &h, 1));
      TAGC_TRY(check_agreement(comm, grad.size(), out.size(), sizes_ok ? h.nonfinite : 0u));
      clock.mark(&S::check);
    }

    // Threshold, no host round trip.
    if (remaining != 0) {
      for (int pass = 0; pass < kernels::select_passes; ++pass) {
        if (pass > 0) launch(n, kernels::histogram_pass{g, r, raw(hist_), st, pass});
        launch(1, kernels::select_digit{raw(hist_), st, pass});
      }
    } else {
      // Keep the histogram clean for the next call.
      thrust::fill(exec_.policy(), hist_.begin(), hist_.end(), 0u);
    }
    clock.mark(&S::sparsify);

    // Index: local marks (+ the owner's pending entries), summed across ranks.
    std::uint8_t* idx = raw(index_);
    launch(index_.size(), kernels::build_index<Bits>{g, r, st, lay_.dense ? nullptr : raw(pending_), idx, cnt + 0,
                                                     lay_, own_shard_});
    clock.mark(&S::index);
    TAGC_TRY(comm.all_reduce(std::span<const std::uint8_t>(idx, index_.size()), std::span<std::uint8_t>(idx, index_.size())));
    clock.mark(&S::index_exchange);

    // Sketch of what the reduced index marks, exchanged to the owner(s).
    const kernels::contribution<Bits> value{g, r, idx, st, lay_};
    const std::size_t chunk = sketch_chunk();
    launch(kernels::build_sketch<Bits>::calls(lay_, chunk),
           kernels::build_sketch<Bits>{value, raw(bucket_start_), raw(bucket_order_), raw(sketch_send_), chunk});
    clock.mark(&S::sketch);
    const std::span<const float> send(raw(sketch_send_), sketch_send_.size());
    const std::span<float> recv(raw(sketch_recv_), sketch_recv_.size());
    if (args_.topo == topology::sharded) TAGC_TRY(comm.reduce_scatter(send, recv));
    else TAGC_TRY(comm.all_reduce(send, recv));
    clock.mark(&S::value_exchange);

    // From here on the step cannot fail: commit the residual, then decode.
    launch(n, kernels::update_residual<Bits>{g, r, idx, st, cnt + 1, lay_});
    const float scale = args_.op == reduce_op::mean ? 1.0f / float(args_.world_size) : 1.0f;
    float* o = out.data();
    const std::size_t shard_len = lay_.shard_size;
    if (lay_.dense) launch(shard_len, kernels::decode_dense{raw(sketch_recv_), o, scale});
    else TAGC_TRY(decode(o, scale, idx));
    clock.mark(&S::decode);  // includes committing the residual

    if (stats) TAGC_TRY(fill_stats(comm.size(), *stats));
    return {};
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
  // Serialised subtraction rounds (see policy/decode.hpp) until every resolved
  // entry has been subtracted from its cells, or nothing moves any more.
  void apply_rounds(const kernels::decode_view<Bits>& v, std::size_t m, bool peel) {
    unsigned long long before = sum_over_support(m, kernels::work_left<Bits>{v});
    const std::size_t max_rounds = 2 * m + 8;  // each productive round retires at least one unit of work
    for (std::size_t round = 0; before != 0 && round < max_rounds; ++round) {
      if (peel) launch(m, kernels::peel_round<Bits>{v});
      launch(m, kernels::claim_cells<Bits>{v});
      launch(m, kernels::apply_resolved<Bits>{v});
      launch(m, kernels::release_cells<Bits>{v});
      if (round % check_every == check_every - 1) {  // not every round: each check is a host round trip on a GPU
        const unsigned long long now = sum_over_support(m, kernels::work_left<Bits>{v});
        if (now == before && !peel) break;
        if (now == before) {
          // Only unresolved entries with no lone cell left: a stopping set.
          if (sum_over_support(m, kernels::count_state<Bits>{v, kernels::entry_resolved}) == 0) break;
        }
        before = now;
      }
    }
  }

  status decode(float* out, float scale, const std::uint8_t* idx) {
    const std::size_t S = lay_.shard_size, C = lay_.cells;
    const kernels::decode_view<Bits> v{lay_,        own_shard_,       idx,          raw(sketch_recv_),
                                       raw(carry_), raw(pending_),    raw(count_),  raw(ids_),
                                       raw(writer_), raw(keep_),      raw(entry_state_), raw(support_),
                                       out};
    decode_result d;
    launch(S, kernels::mark_support<Bits>{v});
    // The carry can be added only if the reduced index marks every pending entry.
    if (sum_over(S, kernels::pending_unmarked<Bits>{v}) == 0) {
      launch(C, kernels::apply_carry<Bits>{v});
      thrust::fill(exec_.policy(), pending_.begin(), pending_.end(), std::uint8_t(0));
    } else {
      d.waiting = 1;
    }
    const auto last = thrust::copy_if(exec_.policy(), thrust::counting_iterator<std::uint32_t>(0),
                                      thrust::counting_iterator<std::uint32_t>(std::uint32_t(S)), support_.begin(),
                                      kernels::is_support_entry{raw(entry_state_)});
    const std::size_t m = std::size_t(last - support_.begin());
    launch(C, kernels::reset_cells<Bits>{v});
    launch(m, kernels::add_edges<Bits>{v});
    if constexpr (decode_policy::peels) apply_rounds(v, m, true);
    d.support = m;
    d.unresolved = sum_over_support(m, kernels::count_state<Bits>{v, kernels::entry_unresolved});
    d.peeled = m - d.unresolved;
    if (d.unresolved) {
      launch(m, kernels::mark_pending<Bits>{v});
      launch(C, kernels::mark_keep<Bits>{v});
      if constexpr (decode_policy::estimates) {
        launch(m, kernels::estimate_round<Bits>{v});
        apply_rounds(v, m, false);  // subtract the estimates: the carry keeps what is still owed
      }
      launch(C, kernels::carry_leftover<Bits>{v});
    }
    if (scale != 1.0f) launch(S, kernels::scale_output{out, scale});
    d.pending = thrust::transform_reduce(exec_.policy(), pending_.begin(), pending_.end(),
                                         kernels::widen{}, 0ull,
                                         thrust::plus<unsigned long long>());
    last_decode_ = d;
    return {};
  }

  status fill_stats(int world, reduce_stats& s) const {
    unsigned long long c[n_counters];
    kernels::select_state st{};
    TAGC_TRY(exec_.copy_to_host(raw(counters_), c, n_counters));
    TAGC_TRY(exec_.copy_to_host(raw(state_), &st, 1));
    s = reduce_stats{};
    s.elements = lay_.length;
    s.kept = c[0];
    s.deferred = c[1];
    s.sparsity = lay_.length ? 1.0 - double(s.kept) / double(lay_.length) : 1.0;
    s.threshold = float_from_bits(st.threshold);
    auto [b, e] = range(index_.size());
    s.index_popcount = index_.empty() ? 0
        : thrust::transform_reduce(exec_.policy(), b, e, kernels::count_marks<Bits>{raw(index_), lay_}, 0ull,
                                   thrust::plus<unsigned long long>());
    s.seconds = seconds_;
    s.dense = lay_.dense;
    if (lay_.dense) {
      s.support = s.peeled = 0;
    } else {
      s.support = last_decode_.support;
      s.peeled = last_decode_.peeled;
      s.unresolved = last_decode_.unresolved;
      s.pending = last_decode_.pending;
      s.carry_waiting = last_decode_.waiting != 0;
      s.load = lay_.cells ? double(s.support) / double(lay_.cells) : 0.0;
    }
    s.control_bytes = args_.check_inputs
        ? ring_bytes_sent(collective::all_gather, double(control_words * 8 * std::size_t(world)), world) : 0.0;
    s.index_bytes = ring_bytes_sent(collective::all_reduce, double(index_.size()), world);
    s.value_bytes = ring_bytes_sent(
        args_.topo == topology::sharded ? collective::reduce_scatter : collective::all_reduce,
        double(sketch_send_.size() * sizeof(float)), world);
    return {};
  }

  reducer_arguments args_{};
  Exec exec_{};
  double sparsity_ = 0.0;
  std::size_t own_shard_ = 0;
  layout lay_{};
  bool initialized_ = false;
  bool profiling_ = false;
  reduce_stats::stage_seconds seconds_{};

  vector<float> residual_;           // [length]   error feedback (state)
  vector<float> carry_;              // [cells]    owner's unpeeled remainder (state)
  vector<std::uint8_t> pending_;     // [shard]    entries whose remainder is in carry_ (state)
  vector<std::uint8_t> index_;       // [shards][index_bytes]
  vector<float> sketch_send_;        // [shards][cells]
  vector<float> sketch_recv_;        // [cells]
  vector<std::uint32_t> hist_;       // radix-select histograms
  vector<kernels::select_state> state_;
  vector<unsigned long long> counters_;
  vector<std::int64_t> control_send_, control_recv_;
  vector<std::uint32_t> count_, ids_, writer_;  // peeling workspace [cells]
  vector<std::uint8_t> keep_;                   // [cells]
  vector<std::uint8_t> entry_state_;            // [shard]
  vector<std::uint32_t> support_;               // [shard] compacted support list
  struct decode_result {
    std::size_t support = 0, peeled = 0, unresolved = 0, pending = 0, waiting = 0;
  } last_decode_;
  vector<std::uint32_t> bucket_start_, bucket_order_;  // sketch gather map (constant)
};

TAGC_END_NAMESPACE
