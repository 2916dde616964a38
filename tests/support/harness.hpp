#pragma once
// defines: helpers shared by the reducer tests — deterministic per-rank
//          gradients, a multi-rank driver over the in-process communicator, and
//          double-precision host references (sparsify, index, sketch).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include <tagc/tagc.hpp>

namespace tagc_test {

// Heavy-tailed, sign-symmetric values like real gradients; fixed seed per (seed, rank, step).
inline std::vector<float> gradient(std::size_t n, std::uint64_t seed, int rank, int step, double density = 1.0) {
  std::mt19937_64 rng(seed * 1000003ull + std::uint64_t(rank) * 7919ull + std::uint64_t(step) * 104729ull);
  std::student_t_distribution<float> t(3.0f);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<float> g(n);
  for (auto& x : g) x = u(rng) < density ? 1e-3f * t(rng) : 0.0f;
  return g;
}

// The exact threshold rule of SparsifyPolicy: keep |acc| strictly above the
// (k+1)-th largest |acc|, k = floor((1 - theta) n).
inline std::vector<bool> reference_keep(const std::vector<float>& acc, double theta) {
  const std::size_t n = acc.size();
  const auto k = static_cast<std::size_t>(std::floor((1.0 - theta) * double(n)));
  std::vector<bool> keep(n, false);
  if (k == 0) return keep;
  float t = 0.0f;
  if (k < n) {
    std::vector<float> mag(n);
    for (std::size_t i = 0; i < n; ++i) mag[i] = std::fabs(acc[i]);
    std::nth_element(mag.begin(), mag.begin() + std::ptrdiff_t(k), mag.end(), std::greater<float>());
    t = mag[k];
  }
  for (std::size_t i = 0; i < n; ++i) keep[i] = std::fabs(acc[i]) > t;
  return keep;
}

// What every rank of a multi-rank run saw and produced.
struct rank_result {
  tagc::status status;
  std::vector<float> out;
  tagc::reduce_stats stats;
};

// Run `body(comm)` on N in-process ranks.
template <class Body>
void on_ranks(int n, Body&& body, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  tagc::local_world world(n, timeout);
  world.run([&](tagc::local_communicator& comm) { body(comm); });
}

// Run `body(comm) -> std::optional<status>` on N in-process ranks; returns the statuses
// the ranks returned (in no set order), leaving out ranks that returned std::nullopt.
template <class Body>
std::vector<tagc::status> statuses_on_ranks(int n, Body&& body,
                                            std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  std::mutex m;
  std::vector<tagc::status> got;
  on_ranks(n, [&](tagc::local_communicator& comm) {
    std::optional<tagc::status> s = body(comm);
    std::lock_guard lk(m);
    if (s) got.push_back(std::move(*s));
  }, timeout);
  return got;
}

using namespace tagc;

// Everything a run produced, per rank and step.
struct run_record {
  std::vector<std::vector<std::vector<float>>> in, out;  // [rank][step][...]
  std::vector<std::vector<reduce_stats>> stats;          // [rank][step]
  std::vector<std::vector<float>> residual;             // [rank] at the end
  std::vector<status> failures;
  layout lay;
};

using input_fn = std::function<std::vector<float>(int rank, int step)>;

template <class R>
run_record simulate(int world, std::size_t n, double theta, int steps, const input_fn& input,
                    topology topo = topology::sharded, reduce_op op = reduce_op::sum,
                    const std::function<void(reducer_arguments&)>& tweak = {}) {
  run_record rec;
  rec.in.resize(world); rec.out.resize(world); rec.stats.resize(world);
  rec.residual.resize(world);
  std::mutex m;
  on_ranks(world, [&](local_communicator& comm) {
    const int r = comm.rank();
    R red;
    reducer_arguments args{.length = n, .world_size = world, .rank = r, .topo = topo, .op = op, .sparsity = theta};
    if (tweak) tweak(args);
    status s = red.initialize(args);
    if (s.ok()) {
      for (int t = 0; t < steps && s.ok(); ++t) {
        auto g = input(r, t);
        std::vector<float> out(red.output_size(), -1.0f);
        reduce_stats st;
        const std::span<const float> in(g);
        s = topo == topology::sharded ? red.reduce_scatter(comm, in, std::span<float>(out), &st)
                                      : red.all_reduce(comm, in, std::span<float>(out), &st);
        rec.in[r].push_back(std::move(g));
        rec.out[r].push_back(std::move(out));
        rec.stats[r].push_back(st);
      }
      rec.residual[r] = red.residual_to_host();
    }
    std::lock_guard lk(m);
    if (r == 0) rec.lay = red.plan();
    if (!s.ok()) rec.failures.push_back(s);
  });
  return rec;
}

// Dense reference of one step at world size N with an exact (4-bit) index:
// the sum over ranks of the sparsified accumulated gradients.
struct dense_reference {
  std::vector<std::vector<float>> residual;  // [rank]
  std::vector<double> step(const std::vector<std::vector<float>>& g, double theta) {
    const std::size_t n = g[0].size();
    if (residual.empty()) residual.assign(g.size(), std::vector<float>(n, 0.0f));
    std::vector<double> sum(n, 0.0);
    for (std::size_t r = 0; r < g.size(); ++r) {
      std::vector<float> acc(n);
      for (std::size_t i = 0; i < n; ++i) acc[i] = g[r][i] + residual[r][i];
      const auto keep = tagc_test::reference_keep(acc, theta);
      for (std::size_t i = 0; i < n; ++i) {
        if (keep[i]) sum[i] += acc[i];
        residual[r][i] = keep[i] ? 0.0f : acc[i];
      }
    }
    return sum;
  }
};

// The gradient of `rank` at `step` from `seed` (gradient()), as simulate() takes it.
inline input_fn random_input(std::size_t n, std::uint64_t seed) {
  return [n, seed](int r, int t) { return gradient(n, seed, r, t); };
}

// Sum over ranks of what a simulate() run delivered at `step`, as the whole buffer
// (sharded: the shards laid end to end; replicated: rank 0's output).
inline std::vector<double> delivered_at(const run_record& rec, int world, std::size_t n, int step,
                                        topology topo = topology::sharded) {
  std::vector<double> d(n, 0.0);
  if (topo == topology::replicated) {
    for (std::size_t i = 0; i < n; ++i) d[i] = rec.out[0][std::size_t(step)][i];
    return d;
  }
  for (int r = 0; r < world; ++r)
    for (std::size_t e = 0; e < rec.lay.shard_size; ++e) {
      const std::size_t i = std::size_t(r) * rec.lay.shard_size + e;
      if (i < n) d[i] = rec.out[std::size_t(r)][std::size_t(step)][e];
    }
  return d;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// The paper's policy family, by index bits, sketch ratio and decoder.
template <int Bits, int Ratio, decode_mode Mode = decode_mode::peel_then_estimate>
using reducer_t = Reducer<SparsifyPolicy, IndexPolicy<Bits>, SketchPolicy<Ratio>, DecodePolicy<Mode>>;

// Checks a run with an exact index against the dense reference: every kept
// entry arrives, step by step, and the residuals match exactly.
inline void expect_dense_sum(const run_record& rec, int world, std::size_t n, double theta, int steps) {
  dense_reference ref;
  for (int t = 0; t < steps; ++t) {
    std::vector<std::vector<float>> g(world);
    for (int r = 0; r < world; ++r) g[r] = rec.in[r][t];
    const auto want = ref.step(g, theta);
    const double tol = 1e-5 * std::max(max_abs(want), 1e-30);
    const std::size_t shard = rec.lay.shard_size;
    for (int r = 0; r < world; ++r) {
      REQUIRE(rec.stats[r][t].unresolved == 0);
      REQUIRE(rec.stats[r][t].deferred == 0);
      REQUIRE(rec.out[r][t].size() == shard);
      for (std::size_t e = 0; e < shard; ++e) {
        const std::size_t gi = std::size_t(r) * shard + e;
        const double w = gi < n ? want[gi] : 0.0;  // padding delivers 0
        if (std::fabs(rec.out[r][t][e] - w) > tol)
          FAIL("rank " << r << " step " << t << " entry " << e << ": " << rec.out[r][t][e] << " vs " << w);
      }
    }
  }
  // The residual is exactly the reference's (same float arithmetic).
  for (int r = 0; r < world; ++r) CHECK(rec.residual[r] == ref.residual[r]);
}

// Two runs delivered the same bits on every rank at every call and left the same
// residuals (host = portable paths, a loose bound = none, ...).
inline void expect_same_runs(const run_record& a, const run_record& b) {
  REQUIRE(a.out.size() == b.out.size());
  for (std::size_t r = 0; r < a.out.size(); ++r) {
    CAPTURE(r);
    CHECK(a.out[r] == b.out[r]);
    CHECK(a.residual[r] == b.residual[r]);
  }
}

// A reducer's run of first + second calls on every rank, whole (one reducer) and split
// (a second reducer's state saved after `first` calls, loaded into a third that makes the
// rest), on gradient(n, seed, rank, step): what each delivered last, their residuals, and
// every rank's saved state.
struct resume_record {
  std::vector<std::vector<float>> whole_out, split_out, whole_res, split_res;  // [rank]
  std::vector<std::vector<std::byte>> saved;                                   // [rank]
  std::vector<std::uint64_t> steps_after_load;                                 // [rank]
};

template <class R>
resume_record resume_in_the_middle(int world, const std::function<reducer_arguments(int rank)>& args_for, int first,
                                   int second, std::uint64_t seed) {
  resume_record rec;
  for (auto* v : {&rec.whole_out, &rec.split_out, &rec.whole_res, &rec.split_res}) v->resize(std::size_t(world));
  rec.saved.resize(std::size_t(world));
  rec.steps_after_load.resize(std::size_t(world));
  std::mutex m;
  on_ranks(world, [&](local_communicator& comm) {
    const int r = comm.rank();
    const reducer_arguments args = args_for(r);
    R whole, before, after;
    REQUIRE(whole.initialize(args).ok());
    REQUIRE(before.initialize(args).ok());
    REQUIRE(after.initialize(args).ok());
    std::vector<float> out(whole.output_size()), last_whole, last_split;
    // the arguments' collective: a reduce-scatter, or an all-reduce for a replicated reducer
    const auto call = [&](R& red, int t) {
      const auto g = gradient(args.length, seed, r, t);
      return args.topo == topology::sharded ? red.reduce_scatter(comm, g, out) : red.all_reduce(comm, g, out);
    };
    for (int t = 0; t < first + second; ++t) {
      REQUIRE(call(whole, t).ok());
      last_whole = out;
    }
    for (int t = 0; t < first; ++t) REQUIRE(call(before, t).ok());
    auto state = before.save_state();
    REQUIRE(after.load_state(state).ok());
    CHECK(after.next_sparsity() == before.next_sparsity());
    const std::uint64_t steps = after.steps();
    for (int t = first; t < first + second; ++t) {
      REQUIRE(call(after, t).ok());
      last_split = out;
    }
    std::lock_guard lk(m);
    const std::size_t i = std::size_t(r);
    rec.whole_out[i] = std::move(last_whole);
    rec.split_out[i] = std::move(last_split);
    rec.whole_res[i] = whole.residual_to_host();
    rec.split_res[i] = after.residual_to_host();
    rec.saved[i] = std::move(state);
    rec.steps_after_load[i] = steps;
  });
  return rec;
}

// The split run continued exactly: the step count it loaded, and the last outputs and
// residuals bit for bit the whole run's, on every rank.
inline void expect_resumed_exactly(const resume_record& rec, int first) {
  for (std::size_t r = 0; r < rec.whole_out.size(); ++r) {
    CAPTURE(r);
    CHECK(rec.steps_after_load[r] == std::uint64_t(first));
    REQUIRE(rec.whole_out[r].size() == rec.split_out[r].size());
    REQUIRE(rec.whole_res[r].size() == rec.split_res[r].size());
    CHECK(std::memcmp(rec.whole_out[r].data(), rec.split_out[r].data(), rec.whole_out[r].size() * 4) == 0);
    CHECK(std::memcmp(rec.whole_res[r].data(), rec.split_res[r].data(), rec.whole_res[r].size() * 4) == 0);
  }
}

}  // namespace tagc_test
