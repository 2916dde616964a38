// gpt2_device_step_bench: one training step (forward + backward + AdamW) of
// DeviceModel<exec::host> next to gpt2::Model<float>, same parameters and tokens,
// alternating the two so that a loaded machine slows both alike.
//   gpt2_device_step_bench [--model d2] [--B 4] [--T 64] [--steps 5]
// Not built by default (EXCLUDE_FROM_ALL): `cmake --build <dir> --target gpt2_device_step_bench`.
#include <tagc/exec/host.hpp>

#include "gpt2/device_model.hpp"
#include "gpt2/init.hpp"
#include "gpt2/model.hpp"
#include "gpt2/optim.hpp"

#include <omp.h>

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

double cpu_now_ms() {  // CPU time of the process: what the step costs, whatever the load
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

struct Timing {
  std::vector<double> wall, cpu;
  void add(double w, double c) { wall.push_back(w); cpu.push_back(c); }
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

template <class Step>
void time_step(Timing& t, bool record, Step step) {
  const double c0 = cpu_now_ms();
  const auto w0 = std::chrono::steady_clock::now();
  step();
  const auto w1 = std::chrono::steady_clock::now();
  const double c1 = cpu_now_ms();
  if (record) t.add(std::chrono::duration<double, std::milli>(w1 - w0).count(), c1 - c0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string name = "d2";
  int B = 4, T = 64, steps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model") name = argv[i + 1];
    else if (a == "--B") B = std::atoi(argv[i + 1]);
    else if (a == "--T") T = std::atoi(argv[i + 1]);
    else if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const gpt2::Config c = gpt2::parse_config(name);
  const size_t n = gpt2::num_parameters(c);
  std::vector<float> p0(n);
  gpt2::init_params(c, 1, p0);
  std::vector<float> pc = p0, gc(n), mc(n, 0.0f), vc(n, 0.0f);
  std::vector<float> pd = p0, gd(n), md(n, 0.0f), vd(n, 0.0f);
  std::mt19937 r(0);
  std::uniform_int_distribution<int> tok(0, c.vocab_size - 1);
  std::vector<int> in(B * T), tg(B * T);
  gpt2::Model<float> cpu(c, B, T);
  const tagc::exec::host exec;
  gpt2::DeviceModel<tagc::exec::host> dev(c, B, T, exec);
  gpt2::AdamW opt;
  opt.lr = 1e-4f;
  Timing tc, td;
  float lc = 0, ld = 0;
  for (int s = 0; s <= steps; ++s) {  // step 0: warm-up
    for (int i = 0; i < B * T; ++i) { in[i] = tok(r); tg[i] = tok(r); }
    time_step(tc, s > 0, [&] {
      std::fill(gc.begin(), gc.end(), 0.0f);
      lc = cpu.forward(pc.data(), in.data(), tg.data());
      cpu.backward(pc.data(), gc.data());
      gpt2::adamw_update(pc, gc, mc, vc, opt, s + 1);
    });
    time_step(td, s > 0, [&] {
      std::fill(gd.begin(), gd.end(), 0.0f);
      ld = dev.forward(pd.data(), in.data(), tg.data());
      dev.backward(pd.data(), gd.data());
      gpt2::adamw_update(exec, pd.data(), gd.data(), md.data(), vd.data(), n, opt, s + 1);
    });
  }
  std::printf("%s B=%d T=%d, %d OpenMP thread(s), %d steps (median):\n", name.c_str(), B, T, omp_get_max_threads(),
              steps);
  std::printf("  gpt2::Model<float>                 %8.1f ms/step wall, %8.1f ms CPU  (last loss %.4f)\n",
              Timing::median(tc.wall), Timing::median(tc.cpu), lc);
  std::printf("  gpt2::DeviceModel<exec::host>      %8.1f ms/step wall, %8.1f ms CPU  (last loss %.4f)\n",
              Timing::median(td.wall), Timing::median(td.cpu), ld);
  return 0;
}
