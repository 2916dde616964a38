// Compress and decode throughput of every Reducer configuration, in bytes of
// fp32 gradient per second, beside a memcpy of the same bytes measured in the
// same run (so the ratio is meaningful on a shared or throttled machine).
//
//   build/bench/tagc_bench_codec [--benchmark_filter=16M]
//   OMP_NUM_THREADS=1 build/bench/tagc_bench_codec --benchmark_out=codec.json --benchmark_out_format=json
//
// Sizes 1M, 4M, 16M, 64M elements (64M = 256 MB of fp32; one timed iteration from 16M on,
// the codec runs at tens of MB/s per thread). Per stage (the Reducer's own profiling,
// reduce_stats::seconds): sparsify (threshold + error feedback), index (bitmap build),
// sketch (count-sketch values), decode (residual commit + peeling), each as GB/s of the
// fp32 gradient bytes it covers (decode: the shard, = the whole gradient at world 1) and
// as x memcpy = memcpy time of the same bytes / stage time (1.0 = as fast as a copy).
// bench/e2e/overhead.sh turns compress/decode GB/s into the communication-time
// break-even at each link bandwidth (tagc::estimate_reduce_scatter).
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

// Values: the value policy (16-bit sketch cells / packed values); Sparsify: the
// residual storage (float, or bf16 with stochastic rounding).
template <int Bits, class Values, class Sparsify = tagc::SparsifyPolicy>
void codec(benchmark::State& state) {
  using R = tagc::Reducer<Sparsify, tagc::IndexPolicy<Bits>, Values, tagc::DecodePolicy<>>;
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
  double compress = 0, decode = 0, memcpy_s = 0, sparsify = 0, index = 0, sketch = 0;
  tagc::reduce_stats st;
  // Untimed warm-up: first-touch of the Reducer's buffers and of the copy target.
  if (auto s = red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out), &st); !s.ok()) {
    state.SkipWithError(s.what().c_str());
    return;
  }
  std::memcpy(copy.data(), g.data(), n * sizeof(float));
  for (auto _ : state) {
    if (auto s = red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out), &st); !s.ok()) {
      state.SkipWithError(s.what().c_str());
      return;
    }
    compress += st.seconds.compress();
    decode += st.seconds.decode;
    sparsify += st.seconds.sparsify;
    index += st.seconds.index;
    sketch += st.seconds.sketch;
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
  state.counters["sparsify_GBps"] = bytes / sparsify / 1e9;
  state.counters["index_GBps"] = bytes / index / 1e9;
  state.counters["sketch_GBps"] = bytes / sketch / 1e9;
  state.counters["sparsify/memcpy"] = memcpy_s / sparsify;
  state.counters["index/memcpy"] = memcpy_s / index;
  state.counters["sketch/memcpy"] = memcpy_s / sketch;
  state.counters["unresolved"] = double(st.unresolved);
  state.counters["bits/param"] = (st.index_bytes + st.value_bytes) * 8.0 / double(n);  // 0 at world 1: no traffic
}

}  // namespace

#define TAGC_CODEC_BENCH(B, R)                                                   \
  BENCHMARK(codec<B, tagc::SketchPolicy<R>>)->Name("codec/index" #B "/sketch" #R "x")                \
      ->Arg(1 << 20)->Arg(1 << 22)->Unit(benchmark::kMillisecond)->UseRealTime();     \
  BENCHMARK(codec<B, tagc::SketchPolicy<R>>)->Name("codec/index" #B "/sketch" #R "x")                \
      ->Arg(1 << 24)->Arg(1 << 26)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime()
TAGC_CODEC_BENCH(1, 2);
TAGC_CODEC_BENCH(1, 4);
TAGC_CODEC_BENCH(1, 10);
TAGC_CODEC_BENCH(4, 2);
TAGC_CODEC_BENCH(4, 4);
TAGC_CODEC_BENCH(4, 10);

// Low precision at 1M and 4M (docs/design.md, "Low precision"): 16-bit sketch
// cells add a rounding pass over the cells and a widening one before decoding;
// a bf16 residual adds a hash per stored element.
#define TAGC_CODEC_LOWPREC(NAME, ...)                                            \
  BENCHMARK(codec<4, __VA_ARGS__>)->Name("codec/index4/" NAME)                    \
      ->Arg(1 << 20)->Arg(1 << 22)->Unit(benchmark::kMillisecond)->UseRealTime()
TAGC_CODEC_LOWPREC("sketch10x_bf16", tagc::SketchBf16Policy<10>);
TAGC_CODEC_LOWPREC("sketch10x_fp16", tagc::SketchFp16Policy<10>);
TAGC_CODEC_LOWPREC("sketch10x_bf16residual", tagc::SketchPolicy<10>, tagc::SparsifyBf16ResidualPolicy);
TAGC_CODEC_LOWPREC("packed", tagc::PackedPolicy);
TAGC_CODEC_LOWPREC("packed_bf16", tagc::PackedBf16Policy);
TAGC_CODEC_LOWPREC("packed_fp16", tagc::PackedFp16Policy);

BENCHMARK_MAIN();
