// gpt2_step_bench: milliseconds per GPT-2 training step (forward + backward + AdamW) on the
// CPU, single process, through the model the sharded trainer drives:
// gpt2::DeviceModel<tagc::exec::host> (the single-source model, on the host).
//   gpt2_step_bench [--model d2|d12|...] [--d12] [--steps N] [--B n] [--T n]
//                   [--init-from model.bin] [--data tokens.bin] [--val tokens.bin] [--save-llmc out.bin]
// --init-from starts from an llm.c checkpoint (its config wins over --model); --data reads
// the batches from an llm.c token shard in file order (batch i = tokens [i*B*T, (i+1)*B*T]),
// i.e. what llm.c's train_gpt2.c sees with shuffling off; without it the tokens are random.
// --val prints the mean loss over the first 5 batches of a shard before training, as llm.c's
// train_gpt2.c prints "val loss" at step 0 (a check that both compute the same model).
// --save-llmc writes the initial parameters as an llm.c checkpoint and exits, so a side-by-side
// run (bench/llmc_side_by_side.sh) starts both trainers from the same weights.
// Step s uses AdamW t = s + 1 with llm.c's train_gpt2.c settings (lr 1e-4, betas 0.9/0.999,
// eps 1e-8, no weight decay). Step 0 is a warm-up (first touch of grads and moments) and is
// not counted; every step's loss is printed so the first can be compared with llm.c's.
// The last line, "RESULT ...", is what the side-by-side script parses.
#include "gpt2/checkpoint.hpp"
#include "gpt2/device_model.hpp"
#include "gpt2/init.hpp"
#include "gpt2/layout.hpp"
#include "gpt2/optim.hpp"

#include <tagc/exec/host.hpp>

#include <omp.h>
#ifdef GPT2_BENCH_OPENBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <stdexcept>
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

// llm.c token shard: 256 int32 header (magic 20240520, version 1, token count), then uint16.
std::vector<int> read_token_shard(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("--data: cannot open " + path);
  int32_t h[256];
  if (!f.read(reinterpret_cast<char*>(h), sizeof h)) throw std::runtime_error("--data: " + path + " is shorter than its header");
  if (h[0] != 20240520 || h[1] != 1)
    throw std::runtime_error("--data: " + path + " is not an llm.c token shard (magic " + std::to_string(h[0]) +
                             ", version " + std::to_string(h[1]) + ")");
  std::vector<uint16_t> raw(static_cast<size_t>(h[2]));
  if (!f.read(reinterpret_cast<char*>(raw.data()), raw.size() * sizeof(uint16_t)))
    throw std::runtime_error("--data: " + path + " holds fewer tokens than its header says (" + std::to_string(h[2]) + ")");
  return {raw.begin(), raw.end()};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Options {
  std::string model = "d2", init_from, data, val, save_llmc;
  bool d12 = false;
  int steps = 10, B = 4, T = 64;
};

void run(const Options& o, const std::string& name) {
  gpt2::Config c;
  std::vector<float> p;
  if (!o.init_from.empty()) {
    gpt2::Checkpoint ck = gpt2::load_checkpoint(o.init_from);
    c = ck.config;
    p = std::move(ck.params);
  } else {
    c = gpt2::parse_config(name);
    p.resize(gpt2::num_parameters(c));
    gpt2::init_params(c, 1, p);
  }
  const size_t n = gpt2::num_parameters(c);
  if (!o.save_llmc.empty()) {
    gpt2::save_checkpoint(o.save_llmc, c, p);
    std::printf("wrote %s (%s, %zu parameters, llm.c format)\n", o.save_llmc.c_str(), name.c_str(), n);
    return;
  }
  const int B = o.B, T = o.T, BT = B * T;
  std::vector<int> tokens;
  if (!o.data.empty()) {
    tokens = read_token_shard(o.data);
    if (tokens.size() < static_cast<size_t>(BT) * (o.steps + 1) + 1)
      throw std::runtime_error("--data: " + o.data + " has too few tokens for " + std::to_string(o.steps + 1) +
                               " batches of B*T = " + std::to_string(BT));
  }
  std::vector<float> g(n), m(n, 0.0f), v(n, 0.0f);
  std::mt19937 r(0);
  std::uniform_int_distribution<int> tok(0, c.vocab_size - 1);
  std::vector<int> in(BT), tg(BT);
  gpt2::DeviceModel<tagc::exec::host> model(c, B, T);
  gpt2::AdamW opt;  // llm.c train_gpt2.c: lr 1e-4, betas 0.9/0.999, eps 1e-8, no weight decay
  opt.lr = 1e-4f;
  opt.weight_decay = 0.0f;
  std::vector<double> ms, cpu_ms;
  std::printf("%-4s B=%d T=%d params=%zu threads=%d\n", name.c_str(), B, T, n, omp_get_max_threads());
  if (!o.val.empty()) {
    const std::vector<int> vt = read_token_shard(o.val);
    constexpr int kValBatches = 5;  // llm.c train_gpt2.c: val_num_batches
    if (vt.size() < static_cast<size_t>(BT) * kValBatches + 1)
      throw std::runtime_error("--val: " + o.val + " has fewer than 5 batches of B*T = " + std::to_string(BT));
    double sum = 0;
    for (int b = 0; b < kValBatches; ++b) {
      std::copy_n(vt.begin() + static_cast<size_t>(b) * BT, BT, in.begin());
      std::copy_n(vt.begin() + static_cast<size_t>(b) * BT + 1, BT, tg.begin());
      sum += model.forward(p.data(), in.data(), tg.data());
    }
    std::printf("val loss %f\n", sum / kValBatches);
  }
  for (int s = 0; s <= o.steps; ++s) {  // step 0 is warm-up (page faults of m, v, grads)
    if (tokens.empty()) {
      for (int i = 0; i < BT; ++i) { in[i] = tok(r); tg[i] = tok(r); }
    } else {
      std::copy_n(tokens.begin() + static_cast<size_t>(s) * BT, BT, in.begin());
      std::copy_n(tokens.begin() + static_cast<size_t>(s) * BT + 1, BT, tg.begin());
    }
    const double c0 = cpu_now_ms();
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(g.begin(), g.end(), 0.0f);
    const float loss = model.forward(p.data(), in.data(), tg.data());
    model.backward(p.data(), g.data());
    gpt2::adamw_update(p, g, m, v, opt, s + 1);
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = cpu_now_ms();
    const double wall = std::chrono::duration<double, std::milli>(t1 - t0).count();
    std::printf("step %d: train loss %f (took %.3f ms, cpu %.3f ms)\n", s, loss, wall, c1 - c0);
    if (s > 0) {
      ms.push_back(wall);
      cpu_ms.push_back(c1 - c0);
    }
  }
  std::printf("RESULT model=%s B=%d T=%d threads=%d steps=%d wall_median_ms=%.2f wall_min_ms=%.2f cpu_median_ms=%.2f\n",
              name.c_str(), B, T, omp_get_max_threads(), o.steps, median(ms),
              *std::min_element(ms.begin(), ms.end()), median(cpu_ms));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
#ifdef GPT2_BENCH_OPENBLAS
  std::printf("OpenBLAS: core %s (OPENBLAS_CORETYPE=%s)\n", openblas_get_corename(),
              std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "unset");
#endif
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--d12") o.d12 = true;
    else if (a == "--model" && has) o.model = argv[++i];
    else if (a == "--steps" && has) o.steps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--B" && has) o.B = std::atoi(argv[++i]);
    else if (a == "--T" && has) o.T = std::atoi(argv[++i]);
    else if (a == "--init-from" && has) o.init_from = argv[++i];
    else if (a == "--data" && has) o.data = argv[++i];
    else if (a == "--val" && has) o.val = argv[++i];
    else if (a == "--save-llmc" && has) o.save_llmc = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--model d2|d12|...] [--d12] [--steps N] [--B n] [--T n] [--init-from model.bin]"
                   " [--data tokens.bin] [--val tokens.bin] [--save-llmc out.bin]\n", argv[0]);
      return 2;
    }
  }
  std::printf("OpenMP threads: %d (OMP_NUM_THREADS=%s)\n", omp_get_max_threads(),
              std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset");
  try {
    run(o, o.model);
    if (o.d12 && o.model != "d12") {
      Options d = o;
      d.steps = std::min(o.steps, 5);
      run(d, "d12");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
