// Codec throughput of the Reducer, per stage and for the whole reduce_scatter call,
// as a fraction of a memcpy of the same bytes measured in the same run (so the
// ratio means something on a shared or throttled machine; issue 10's targets are
// stated in these ratios).
//
//   OMP_WAIT_POLICY=PASSIVE build/bench/tagc_bench_codec [--benchmark_filter=16M]
//
// Names: codec/<values>/w<ranks>/<elements>/omp<threads>. Ranks are threads over the
// in-process communicator (comm/local.hpp): each rank has its own Reducer and runs
// its calls with <threads> OpenMP threads (omp_set_num_threads in the rank's thread;
// 2 ranks x 2 threads oversubscribe a 2-core machine, which is what 2 ranks on one
// host look like). Every iteration: both ranks call reduce_scatter together, then,
// with the ranks idle, the main thread times a memcpy of the gradient and one of a
// shard, and then every rank times a memcpy of its gradient at once. Counters (x memcpy = memcpy time of the same bytes / stage time, 1.0 = as
// fast as a copy; the slower rank's time per iteration):
//   compress/memcpy  reduce_stats::stage_seconds::compress(): sparsify + index +
//                    sketch (values) + residual commit, over the gradient bytes
//   decode/memcpy    decode of the owner's shard (peeling or unpacking, and telling
//                    senders what it left), over the shard bytes
//   residual/memcpy  the residual commit alone (part of compress), gradient bytes
//   call/memcpy      the whole reduce_scatter call (exchanges included; local copies
//                    here), over the gradient bytes
//   *_ms             the stage times themselves (compress = sparsify + index + sketch
//                    + residual; exchange = the collectives); unresolved, load: rank 0's decode
//   best_*/memcpy    the same ratios from the fastest iteration of the stage and of
//                    the memcpy (a shared machine slows single calls by 20-40 %:
//                    the best of several is the steadier figure)
//   workspace_B_per_elem  Reducer::workspace_bytes() / elements (rank 0): every
//                    buffer allocated at initialize, the residual included
//   compress/memcpy_all  compress against a memcpy of the gradient that every rank
//                    runs at once (each its own; the slowest rank's time): with 2
//                    ranks on 2 cores, compress shares the memory bandwidth with the
//                    other rank's, and this copy shares it the same way
// Stage times come from the Reducer's own profiling (set_profiling(true),
// reduce_stats::seconds), so they are the library's figures; the whole call is timed
// around reduce_scatter.
//
// The matrix (issue 10): sketch ratios 2/4/10 with the paper's 1-bit index at 1M, 16M
// and 64M elements, 1 and 2 OpenMP threads, 2 ranks; at 16M only (the full matrix is
// slow at today's speed): packed fp32 values, bf16 sketch cells (ratio 10) and a
// 1-rank reference (ratio 10); and the PyTorch DDP hook's configuration (packed bf16,
// exact index, all-reduce) at GPT-2 d2's bucket size. Six Reducer instantiations in all.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <tagc/tagc.hpp>

#include "support/gradient.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
constexpr int memcpy_reps = 4;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// What one rank measured in one call.
struct rank_sample {
  double call = 0, compress = 0, decode = 0, residual = 0, sparsify = 0, index = 0, sketch = 0, exchange = 0;
  tagc::reduce_stats stats{};
  std::string error;
};

template <class R>
rank_sample one_call(R& red, tagc::local_communicator& comm, const std::vector<float>& g, std::vector<float>& out,
                     tagc::topology topo) {
  rank_sample s;
  const auto t0 = clock_type::now();
  const auto st = topo == tagc::topology::replicated
                      ? red.all_reduce(comm, std::span<const float>(g), std::span<float>(out), &s.stats)
                      : red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out), &s.stats);
  s.call = seconds_since(t0);
  if (!st.ok()) s.error = st.what();
  s.compress = s.stats.seconds.compress();
  s.decode = s.stats.seconds.decode;
  s.residual = s.stats.seconds.residual;
  s.sparsify = s.stats.seconds.sparsify;
  s.index = s.stats.seconds.index;
  s.sketch = s.stats.seconds.sketch;
  s.exchange = s.stats.seconds.exchange();
  return s;
}

// Values: the value policy; ranks: state.range(2); OpenMP threads per rank: state.range(1).
// Topo: sharded (reduce_scatter, FSDP's and the trainer's) or replicated (all_reduce,
// the PyTorch DDP hook's, python/tagc).
template <class Values, class Index = tagc::IndexPolicy<1>, tagc::topology Topo = tagc::topology::sharded>
void codec(benchmark::State& state) {
  using R = tagc::Reducer<tagc::SparsifyPolicy, Index, Values, tagc::DecodePolicy<>>;
  const auto n = std::size_t(state.range(0));
  const int threads = int(state.range(1));
  const int world_size = int(state.range(2));
  tagc::local_world world(world_size, std::chrono::seconds(600));

  std::vector<R> red(static_cast<std::size_t>(world_size));
  std::vector<std::vector<float>> grads, outs;
  for (int r = 0; r < world_size; ++r) {
    if (auto s = red[std::size_t(r)].initialize({.length = n, .world_size = world_size, .rank = r, .topo = Topo});
        !s.ok()) {
      state.SkipWithError(s.what().c_str());
      return;
    }
    red[std::size_t(r)].set_profiling(true);
    grads.push_back(tagc_bench::heavy_tailed_gradient(n, 1 + std::uint64_t(r)));
    outs.emplace_back(red[std::size_t(r)].output_size());
  }
  const std::size_t shard = red[0].output_size();
  std::vector<float> copy(n);

  // Persistent rank threads (their OpenMP pools live across iterations); the main
  // thread releases them for each call and waits for both before timing the memcpy.
  std::vector<rank_sample> samples(static_cast<std::size_t>(world_size));
  std::vector<std::vector<float>> copies(static_cast<std::size_t>(world_size), std::vector<float>(n));
  std::vector<double> copy_s(static_cast<std::size_t>(world_size));
  bool stop = false, copy_job = false;  // copy_job: the ranks' next job is a memcpy each, not a call
  std::barrier sync(world_size + 1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world_size; ++r)
    ranks.emplace_back([&, r] {
      omp_set_num_threads(threads);
      auto comm = world.communicator(r);
      for (;;) {
        sync.arrive_and_wait();  // start
        if (stop) return;
        if (copy_job) {
          const auto t0 = clock_type::now();
          std::memcpy(copies[std::size_t(r)].data(), grads[std::size_t(r)].data(), n * sizeof(float));
          benchmark::DoNotOptimize(copies[std::size_t(r)].data());
          copy_s[std::size_t(r)] = seconds_since(t0);
        } else {
          samples[std::size_t(r)] = one_call(red[std::size_t(r)], comm, grads[std::size_t(r)], outs[std::size_t(r)], Topo);
        }
        sync.arrive_and_wait();  // done
      }
    });
  const auto call_all = [&]() -> bool {
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    for (const auto& s : samples)
      if (!s.error.empty()) {
        state.SkipWithError(s.error.c_str());
        return false;
      }
    return true;
  };
  // Every rank copies its gradient at once; the slowest rank's seconds.
  const auto copy_all = [&] {
    copy_job = true;
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    copy_job = false;
    return *std::max_element(copy_s.begin(), copy_s.end());
  };
  const auto finish = [&] {
    stop = true;
    sync.arrive_and_wait();
    for (auto& t : ranks) t.join();
  };

  // Untimed warm-up: first touch of every workspace and of the copy targets.
  bool ok = call_all();
  std::memcpy(copy.data(), grads[0].data(), n * sizeof(float));
  (void)copy_all();
  double memcpy_all = 0;
  double call = 0, compress = 0, decode = 0, residual = 0, memcpy_grad = 0, memcpy_shard = 0;
  double sparsify = 0, index = 0, sketch = 0, exchange = 0;
  double best_call = 1e30, best_compress = 1e30, best_decode = 1e30, best_grad = 1e30, best_shard = 1e30;
  for (auto _ : state) {
    if (!ok || !(ok = call_all())) break;
    double c = 0, cp = 0, d = 0, r = 0, sp = 0, ix = 0, sk = 0, ex = 0;
    for (const auto& s : samples) {
      c = std::max(c, s.call);
      cp = std::max(cp, s.compress);
      d = std::max(d, s.decode);
      r = std::max(r, s.residual);
      sp = std::max(sp, s.sparsify);
      ix = std::max(ix, s.index);
      sk = std::max(sk, s.sketch);
      ex = std::max(ex, s.exchange);
    }
    sparsify += sp;
    index += ix;
    sketch += sk;
    exchange += ex;
    call += c;
    compress += cp;
    decode += d;
    residual += r;
    best_call = std::min(best_call, c);
    best_compress = std::min(best_compress, cp);
    best_decode = std::min(best_decode, d);
    // Several copies per call, averaged: a single short copy on a loaded machine is
    // often one descheduling away from a figure 10x off.
    for (int rep = 0; rep < memcpy_reps; ++rep) {
      auto t0 = clock_type::now();
      std::memcpy(copy.data(), grads[0].data(), n * sizeof(float));
      benchmark::DoNotOptimize(copy.data());
      const double grad_s = seconds_since(t0);
      memcpy_grad += grad_s / memcpy_reps;
      best_grad = std::min(best_grad, grad_s);
      t0 = clock_type::now();
      std::memcpy(copy.data(), grads[0].data(), shard * sizeof(float));
      benchmark::DoNotOptimize(copy.data());
      const double shard_s = seconds_since(t0);
      memcpy_shard += shard_s / memcpy_reps;
      best_shard = std::min(best_shard, shard_s);
      memcpy_all += copy_all() / memcpy_reps;
    }
  }
  finish();
  if (!ok) return;
  const double it = double(state.iterations());
  state.counters["compress/memcpy"] = memcpy_grad / compress;
  state.counters["compress/memcpy_all"] = memcpy_all / compress;
  state.counters["decode/memcpy"] = memcpy_shard / decode;
  state.counters["residual/memcpy"] = memcpy_grad / residual;
  state.counters["call/memcpy"] = memcpy_grad / call;
  state.counters["best_compress/memcpy"] = best_grad / best_compress;
  state.counters["best_decode/memcpy"] = best_shard / best_decode;
  state.counters["best_call/memcpy"] = best_grad / best_call;
  state.counters["compress_ms"] = 1e3 * compress / it;
  state.counters["decode_ms"] = 1e3 * decode / it;
  state.counters["residual_ms"] = 1e3 * residual / it;
  // compress = sparsify + index + sketch (the values stage) + residual; exchange: the collectives' waits
  state.counters["sparsify_ms"] = 1e3 * sparsify / it;
  state.counters["index_ms"] = 1e3 * index / it;
  state.counters["sketch_ms"] = 1e3 * sketch / it;
  state.counters["exchange_ms"] = 1e3 * exchange / it;
  state.counters["call_ms"] = 1e3 * call / it;
  state.counters["memcpy_GBps"] = double(n) * sizeof(float) * it / memcpy_grad / 1e9;
  // Throughputs for the cost model (bench/e2e/overhead.sh): gradient bytes / compress, shard bytes / decode.
  state.counters["compress_GBps"] = double(n) * sizeof(float) * it / compress / 1e9;
  state.counters["decode_GBps"] = double(shard) * sizeof(float) * it / decode / 1e9;
  // Memory (issue 10): every workspace rank 0's Reducer allocated at initialize, residual included, per element.
  state.counters["workspace_B_per_elem"] = double(red[0].workspace_bytes()) / double(n);
  state.counters["unresolved"] = double(samples[0].stats.unresolved);
  state.counters["load"] = samples[0].stats.load;
}

// Elements x OpenMP threads per rank x ranks. From 16M on a fixed number of timed
// calls (after an untimed one): 5 at 16M (10-300 ms each since issue 10), 1 at 64M.
// Run the program twice for a spread.
void sizes(benchmark::internal::Benchmark* b, std::vector<long> elements, int world_size) {
  for (long n : elements)
    for (long t : {1, 2}) b->Args({n, t, world_size});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

constexpr long M = 1 << 20;
#define TAGC_CODEC_SKETCH(R)                                                                            \
  BENCHMARK(codec<tagc::SketchPolicy<R>>)->Name("codec/index1_sketch" #R "x/w2")                         \
      ->Apply([](auto* b) { sizes(b, {M}, 2); })->MinTime(0.5);                                          \
  BENCHMARK(codec<tagc::SketchPolicy<R>>)->Name("codec/index1_sketch" #R "x/w2")                         \
      ->Apply([](auto* b) { sizes(b, {16 * M}, 2); })->Iterations(5);                                      \
  BENCHMARK(codec<tagc::SketchPolicy<R>>)->Name("codec/index1_sketch" #R "x/w2")                         \
      ->Apply([](auto* b) { sizes(b, {64 * M}, 2); })->Iterations(1)
TAGC_CODEC_SKETCH(2);
TAGC_CODEC_SKETCH(4);
TAGC_CODEC_SKETCH(10);

// 16M only: packed fp32 values, bf16 sketch cells, and the 1-rank reference.
BENCHMARK(codec<tagc::PackedPolicy>)->Name("codec/index1_packed/w2")
    ->Apply([](auto* b) { sizes(b, {16 * M}, 2); })->Iterations(5);
BENCHMARK(codec<tagc::SketchBf16Policy<10>>)->Name("codec/index1_sketch10x_bf16/w2")
    ->Apply([](auto* b) { sizes(b, {16 * M}, 2); })->Iterations(5);
BENCHMARK(codec<tagc::SketchPolicy<10>>)->Name("codec/index1_sketch10x/w1")
    ->Apply([](auto* b) { sizes(b, {16 * M}, 1); })->Iterations(5);

// The PyTorch DDP hook's best configuration (tagc-best: packed bf16 values, exact
// index, all-reduce) at the size of GPT-2 d2's large DDP bucket (bench/torch), so
// the hook's per-stage times (bench/torch/hook_breakdown.py) have a reference.
BENCHMARK(codec<tagc::PackedBf16Policy, tagc::ExactIndexPolicy, tagc::topology::replicated>)
    ->Name("codec/exact_packed_bf16_allreduce/w2")
    ->Apply([](auto* b) { sizes(b, {6702592}, 2); })->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
