// gpt2_step_bench: milliseconds per GPT-2 training step (forward + backward + AdamW) on the
// CPU, single process, through the per-unit API the sharded trainer uses.
//   gpt2_step_bench [--d12] [--steps N] [--B n] [--T n]
// Always runs d2; --d12 adds d12 (slow). Reference (llm.c train_gpt2.c on the same 2-core
// machines): d2 B=4 T=64 ~520 ms/step, d12 ~7500 ms/step.
#include "gpt2/init.hpp"
#include "gpt2/layout.hpp"
#include "gpt2/model.hpp"
#include "gpt2/optim.hpp"

#include <omp.h>
#ifdef GPT2_BENCH_OPENBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace {

// CPU time of the whole process (all threads): on a machine shared with other jobs the
// wall time swings, this shows what the step itself costs.
double cpu_now_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

void run(const char* name, int B, int T, int steps) {
  const gpt2::Config c = gpt2::parse_config(name);
  const size_t n = gpt2::num_parameters(c);
  std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f);
  gpt2::init_params(c, 1, p);
  std::mt19937 r(0);
  std::uniform_int_distribution<int> tok(0, c.vocab_size - 1);
  std::vector<int> in(B * T), tg(B * T);
  gpt2::Gpt2 model(c, B, T);
  gpt2::AdamW opt;
  opt.lr = 1e-4f;
  opt.weight_decay = 0.0f;
  std::vector<double> ms, cpu_ms;
  float loss = 0;
  for (int s = 0; s <= steps; ++s) {  // step 0 is warm-up (page faults of m, v, grads)
    for (int i = 0; i < B * T; ++i) { in[i] = tok(r); tg[i] = tok(r); }
    const double c0 = cpu_now_ms();
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(g.begin(), g.end(), 0.0f);
    loss = model.forward(p.data(), in.data(), tg.data());
    model.backward(p.data(), g.data());
    gpt2::adamw_update(p, g, m, v, opt, s + 1);
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = cpu_now_ms();
    if (s > 0) {
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      cpu_ms.push_back(c1 - c0);
    }
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu_ms.begin(), cpu_ms.end());
  double mean = 0;
  for (double x : ms) mean += x;
  mean /= ms.size();
  std::printf("%-4s B=%d T=%d params=%zu threads=%d steps=%d: median %.1f ms/step, mean %.1f, min %.1f;"
              " CPU time median %.1f ms/step (loss %.3f)\n",
              name, B, T, n, omp_get_max_threads(), steps, ms[ms.size() / 2], mean, ms.front(),
              cpu_ms[cpu_ms.size() / 2], loss);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
#ifdef GPT2_BENCH_OPENBLAS
  // OpenBLAS's kernels matter: on these AVX-512 Xeons OPENBLAS_CORETYPE=SkylakeX makes
  // sgemm ~1.5x faster than the Haswell kernels (what OPENBLAS_CORETYPE=Haswell selects).
  std::printf("OpenBLAS: core %s, %d threads (OPENBLAS_CORETYPE=%s)\n", openblas_get_corename(),
              openblas_get_num_threads(), std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "unset");
#endif
  bool d12 = false;
  int steps = 10, B = 4, T = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--d12") d12 = true;
    else if (a == "--steps" && i + 1 < argc) steps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--B" && i + 1 < argc) B = std::atoi(argv[++i]);
    else if (a == "--T" && i + 1 < argc) T = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--d12] [--steps N] [--B n] [--T n]\n", argv[0]);
      return 2;
    }
  }
  std::printf("OpenMP threads: %d (OMP_NUM_THREADS=%s)\n", omp_get_max_threads(),
              std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset");
  try {
    run("d2", B, T, steps);
    if (d12) run("d12", B, T, std::min(steps, 5));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
