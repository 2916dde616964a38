// Compress and decode throughput of every Reducer configuration, in bytes of
// fp32 gradient per second, beside a memcpy of the same bytes measured in the
// same run (so the ratio is meaningful on a shared or throttled machine).
//
//   build/bench/tagc_bench_codec [--benchmark_filter=16M]
//
// One rank (the in-process communicator with a world of 1): compress = sparsify
// + index + sketch over the whole gradient, decode = peeling the shard; the
// exchange is a local copy and is not counted. Stage times come from the
// Reducer's own profiling (set_profiling), so they are the library's figures.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include <tagc/tagc.hpp>

namespace {

std::vector<float> make_gradient(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = 1e-3f * t(rng);
  return g;
}

template <int Bits, int Ratio>
void codec(benchmark::State& state) {
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<Bits>, tagc::SketchPolicy<Ratio>, tagc::DecodePolicy<>>;
  const auto n = std::size_t(state.range(0));
  tagc::local_world world(1);
  auto comm = world.communicator(0);
  R red;
  if (auto s = red.initialize({.length = n, .world_size = 1, .rank = 0}); !s.ok()) {
    state.SkipWithError(s.what().c_str());
    return;
  }
  red.set_profiling(true);
  const auto g = make_gradient(n, 1);
  std::vector<float> out(red.output_size()), copy(n);
  double compress = 0, decode = 0, memcpy_s = 0;
  tagc::reduce_stats st;
  for (auto _ : state) {
    if (auto s = red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out), &st); !s.ok()) {
      state.SkipWithError(s.what().c_str());
      return;
    }
    compress += st.seconds.compress();
    decode += st.seconds.decode;
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(copy.data(), g.data(), n * sizeof(float));
    benchmark::DoNotOptimize(copy.data());
    memcpy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double bytes = double(n) * sizeof(float) * double(state.iterations());
  state.counters["compress_GBps"] = bytes / compress / 1e9;
  state.counters["decode_GBps"] = bytes / decode / 1e9;
  state.counters["memcpy_GBps"] = bytes / memcpy_s / 1e9;
  state.counters["compress/memcpy"] = memcpy_s / compress;
  state.counters["decode/memcpy"] = memcpy_s / decode;
  state.counters["unresolved"] = double(st.unresolved);
  state.counters["bits/param"] = (st.index_bytes + st.value_bytes) * 8.0 / double(n);  // 0 at world 1: no traffic
}

}  // namespace

#define TAGC_CODEC_BENCH(B, R)                                                   \
  BENCHMARK(codec<B, R>)->Name("codec/index" #B "/sketch" #R "x")                \
      ->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime()
TAGC_CODEC_BENCH(1, 2);
TAGC_CODEC_BENCH(1, 4);
TAGC_CODEC_BENCH(1, 10);
TAGC_CODEC_BENCH(4, 2);
TAGC_CODEC_BENCH(4, 4);
TAGC_CODEC_BENCH(4, 10);

BENCHMARK_MAIN();
