// One GPT-2 forward + backward of the two models side by side, per phase:
// gpt2::Model<float> (the CPU-only model, "ref") and gpt2::DeviceModel<exec::host> (the
// single-source model on the host execution space, "dev"), same weights, same batch, in
// one process. Every iteration runs both, alternating which goes first, so a loaded
// machine slows both alike; the figures to read are the ratios.
//
//   OMP_WAIT_POLICY=PASSIVE build/bench/tagc_bench_gpt2_models [--benchmark_filter=d2]
//       [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
//
// Names: gpt2_models/<model>/B<b>/T<t>/omp<threads>. Counters (milliseconds per
// forward + backward, mean over the iterations; gradients are zeroed outside the timing):
//   ref_ms, dev_ms        wall time of the whole forward + backward of each model
//   dev/ref               dev_ms / ref_ms (< 1: the device model is faster)
//   ref_cpu, dev_cpu      process CPU time of the same (what the step costs, whatever the load)
//   <m>_<phase>           wall time per phase: embed, attn (all layers), mlp (all layers),
//                         lnf, head (logits + softmax + loss); _f forward, _b backward
//   |dloss|               |loss_ref - loss_dev| of the last iteration (a sanity check)
// AdamW is not timed (the trainer runs it on its shard, outside the model).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <tagc/exec/host.hpp>

#include "gpt2/device_model.hpp"
#include "gpt2/init.hpp"
#include "gpt2/layout.hpp"
#include "gpt2/model.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

enum Phase { embed_f, attn_f, mlp_f, lnf_f, head_f, head_b, lnf_b, mlp_b, attn_b, embed_b, kPhases };
constexpr std::array<const char*, kPhases> kPhaseNames = {"embed_f", "attn_f", "mlp_f", "lnf_f",  "head_f",
                                                          "head_b",  "lnf_b",  "mlp_b", "attn_b", "embed_b"};

struct Times {
  std::array<double, kPhases> phase{};
  double wall = 0, cpu = 0;
};

Phase unit_phase(const gpt2::Config& c, int u, bool forward) {
  if (u == 0) return forward ? embed_f : embed_b;
  if (u == gpt2::lnf_unit(c)) return forward ? lnf_f : lnf_b;
  if ((u - 1) % 2 == 0) return forward ? attn_f : attn_b;
  return forward ? mlp_f : mlp_b;
}

// One forward + backward through the per-unit API (what the trainer calls), each call
// timed into its phase. Both models have the same per-unit interface.
template <class M>
float step(M& m, const gpt2::Config& c, const std::vector<size_t>& off, const float* p, float* g, const int* in,
           const int* tg, Times& t) {
  const double c0 = cpu_ms();
  const auto w0 = Clock::now();
  for (int u = 0; u < m.num_units(); ++u) {
    const auto t0 = Clock::now();
    m.forward_unit(u, p + off[u], u == 0 ? in : nullptr);
    t.phase[unit_phase(c, u, true)] += ms_since(t0);
  }
  auto t0 = Clock::now();
  const float loss = m.forward_head(p, tg);
  t.phase[head_f] += ms_since(t0);
  t0 = Clock::now();
  m.backward_head(p, g);
  t.phase[head_b] += ms_since(t0);
  for (int u = m.num_units() - 1; u >= 0; --u) {
    const auto t1 = Clock::now();
    m.backward_unit(u, p + off[u], g + off[u]);
    t.phase[unit_phase(c, u, false)] += ms_since(t1);
  }
  t.wall += ms_since(w0);
  t.cpu += cpu_ms() - c0;
  return loss;
}

void gpt2_models(benchmark::State& state, const std::string& name) {
  const int B = static_cast<int>(state.range(0)), T = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  omp_set_num_threads(threads);
  const gpt2::Config c = gpt2::parse_config(name);
  const size_t n = gpt2::num_parameters(c);
  const std::vector<size_t> off = gpt2::unit_offsets(gpt2::units(c));
  std::vector<float> params(n), grads(n);
  gpt2::init_params(c, 1, params);
  std::mt19937 rng(0);
  std::uniform_int_distribution<int> tok(0, c.vocab_size - 1);
  std::vector<int> in(static_cast<size_t>(B) * T), tg(in.size());
  for (size_t i = 0; i < in.size(); ++i) { in[i] = tok(rng); tg[i] = tok(rng); }

  gpt2::Model<float> ref(c, B, T);
  gpt2::DeviceModel<tagc::exec::host> dev(c, B, T);
  Times warm, tr, td;
  // warm-up: first touch of the activations and the gradients
  step(ref, c, off, params.data(), grads.data(), in.data(), tg.data(), warm);
  step(dev, c, off, params.data(), grads.data(), in.data(), tg.data(), warm);
  float lr = 0, ld = 0;
  long it = 0;
  for (auto _ : state) {
    const bool ref_first = it++ % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      std::fill(grads.begin(), grads.end(), 0.0f);
      if ((k == 0) == ref_first) lr = step(ref, c, off, params.data(), grads.data(), in.data(), tg.data(), tr);
      else ld = step(dev, c, off, params.data(), grads.data(), in.data(), tg.data(), td);
    }
  }
  const auto avg = benchmark::Counter::kAvgIterations;
  state.counters["ref_ms"] = benchmark::Counter(tr.wall, avg);
  state.counters["dev_ms"] = benchmark::Counter(td.wall, avg);
  state.counters["dev/ref"] = td.wall / tr.wall;
  state.counters["ref_cpu"] = benchmark::Counter(tr.cpu, avg);
  state.counters["dev_cpu"] = benchmark::Counter(td.cpu, avg);
  for (int p = 0; p < kPhases; ++p) {
    state.counters[std::string("ref_") + kPhaseNames[p]] = benchmark::Counter(tr.phase[p], avg);
    state.counters[std::string("dev_") + kPhaseNames[p]] = benchmark::Counter(td.phase[p], avg);
  }
  state.counters["|dloss|"] = std::fabs(lr - ld);
}

// d2 at the trainer's test shape; d12 (llm.c's 124M) with a small batch so it stays quick.
BENCHMARK_CAPTURE(gpt2_models, d2, std::string("d2"))
    ->ArgsProduct({{4}, {64}, {1, 2}})
    ->ArgNames({"B", "T", "omp"})
    ->Iterations(10)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(gpt2_models, d12, std::string("d12"))
    ->ArgsProduct({{1}, {64}, {1, 2}})
    ->ArgNames({"B", "T", "omp"})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
