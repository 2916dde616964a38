// Tests for gpt2_device_model on tagc::exec::host: DeviceModel<exec::host> (Thrust
// functors + CBLAS, the code the CUDA build compiles for the GPU) against the CPU model
// gpt2::Model<float> — loss, every gradient tensor, the per-unit sequence with separate
// buffers, loss_scale and += accumulation, the step-order and token checks — and the
// exec-space AdamW / sum of squares against gpt2/optim.hpp.
//
// exec::host memory is host memory, so plain std::vector buffers stand in for the
// "Exec memory" the interface asks for.
#include <doctest/doctest.h>

#include <tagc/exec/host.hpp>

#include "device_model_check.hpp"
#include "gpt2/device_model.hpp"
#include "gpt2/init.hpp"
#include "gpt2/layout.hpp"
#include "gpt2/model.hpp"
#include "gpt2/optim.hpp"
#include "per_unit_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using HostModel = gpt2::DeviceModel<tagc::exec::host>;
using namespace gpt2_test;

}  // namespace

// Differences between the two models are fp32 rounding only: the attention products run
// as gemms here and as loops in the CPU model, the column sums in row chunks (different
// summation orders), and the rest is the same arithmetic (exp/tanh are the same
// polynomial, fast_math.hpp). Each gradient element is a sum of O(B*T) products
// of O(C) sums, so the expected scale-relative error is ~1e-6 (measured: see the MESSAGE
// lines, max 1.2e-6); 1e-4 leaves two orders of magnitude, while a wrong index, a missing
// bias or an overwritten accumulation gives errors of order 1.
TEST_CASE("gpt2_device_model on exec::host matches gpt2::Model<float>: loss, every gradient, loss_scale, +=") {
  constexpr double kGradTol = 1e-4;
  constexpr double kLossTol = 1e-5;  // relative; the loss is ~ln V
  for (const DeviceCase& k : device_cases()) {
    CAPTURE(k.name);
    const MicroBatches m = make_micro_batches(k);
    const StepResult ref = run_reference(k, m);

    // One buffer per unit, as the sharded trainer's gathered parameters / gradients.
    auto P = unit_buffers(k.cfg, m.params), G = unit_buffers(k.cfg, m.grads0);
    HostModel dev(k.cfg, k.B, k.T);
    REQUIRE(dev.num_units() == static_cast<int>(P.size()));
    CHECK(dev.batch() == k.B);
    CHECK(dev.seq_len() == k.T);
    CHECK(dev.config() == k.cfg);
    auto params_of = [&](int u) { return P[u].data(); };
    auto grads_of = [&](int u) { return G[u].data(); };
    StepResult got;
    got.loss1 = run_per_unit(dev, params_of, grads_of, m.in1.data(), m.tg1.data(), m.scale1);
    got.loss2 = run_per_unit(dev, params_of, grads_of, m.in2.data(), m.tg2.data(), m.scale2);
    for (const auto& g : G) got.grads.insert(got.grads.end(), g.begin(), g.end());

    const double worst = check_against_reference(k, m, ref, got, kGradTol, kLossTol);
    MESSAGE(k.name, ": loss cpu ", ref.loss1, " / ", ref.loss2, ", exec::host ", got.loss1, " / ", got.loss2,
            "; max scale-relative gradient error ", worst);
  }
}

TEST_CASE("gpt2_device_model whole-model forward/backward == per-unit steps, bit for bit; deterministic") {
  const gpt2::Config c = small_config(2, 64, 4, 97, 16);
  const int B = 2, T = 12;
  const auto in = random_tokens(B * T, c.vocab_size, 5), tg = random_tokens(B * T, c.vocab_size, 6);
  check_per_unit_matches_whole<HostModel>(c, B, T, noisy_params(c, 3), in, tg);
}

// exec::host launches column kernels with a block of columns per thread and small loops
// on the calling thread; exec::host_portable with the GPU's shapes (one column or element
// per thread, every launch through Thrust). Each column is summed over the same rows in
// the same order either way, so the two agree bit for bit: a launch shape that changed
// the arithmetic (or an index mistake in one of them) shows here.
TEST_CASE("gpt2_device_model: host launch shapes == the GPU's (exec::host_portable), bit for bit") {
  for (const DeviceCase& k : device_cases()) {
    CAPTURE(k.name);
    const MicroBatches m = make_micro_batches(k);
    const size_t n = gpt2::num_parameters(k.cfg);
    HostModel host(k.cfg, k.B, k.T);
    gpt2::DeviceModel<tagc::exec::host_portable> portable(k.cfg, k.B, k.T);
    std::vector<float> gh = m.grads0, gp = m.grads0;
    float lh = host.forward(m.params.data(), m.in1.data(), m.tg1.data());
    float lp = portable.forward(m.params.data(), m.in1.data(), m.tg1.data());
    CHECK(lh == lp);
    host.backward(m.params.data(), gh.data(), m.scale1);
    portable.backward(m.params.data(), gp.data(), m.scale1);
    lh = host.forward(m.params.data(), m.in2.data(), m.tg2.data());
    lp = portable.forward(m.params.data(), m.in2.data(), m.tg2.data());
    CHECK(lh == lp);
    host.backward(m.params.data(), gh.data(), m.scale2);
    portable.backward(m.params.data(), gp.data(), m.scale2);
    REQUIRE(gh.size() == n);
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) differ += gh[i] != gp[i];
    CHECK(differ == 0);
  }
}

TEST_CASE("gpt2_device_model checks the step order, token ids and shapes as the CPU model does") {
  const gpt2::Config c = small_config(1, 64, 4, 97, 16);
  const int B = 2, T = 8;
  const auto p = noisy_params(c, 1);
  std::vector<float> g(p.size(), 0.0f);
  const auto in = random_tokens(B * T, c.vocab_size, 5), tg = random_tokens(B * T, c.vocab_size, 6);
  const auto us = gpt2::units(c);
  const auto off = gpt2::unit_offsets(us);
  auto P = [&](int u) { return p.data() + off[u]; };
  auto G = [&](int u) { return g.data() + off[u]; };

  CHECK_THROWS_AS(HostModel(c, 0, T), std::invalid_argument);
  CHECK_THROWS_AS(HostModel(c, B, 17), std::invalid_argument);
  gpt2::Config bad_cfg = c;
  bad_cfg.num_heads = 5;  // 64 % 5 != 0
  CHECK_THROWS_WITH_AS(HostModel(bad_cfg, B, T), doctest::Contains("num_heads"), std::invalid_argument);

  HostModel m(c, B, T);
  CHECK_THROWS_WITH_AS(m.forward_unit(1, P(1)), doctest::Contains("expected forward_unit(0)"), std::logic_error);
  CHECK_THROWS_AS(m.forward_unit(0, P(0), nullptr), std::invalid_argument);
  m.forward_unit(0, P(0), in.data());
  CHECK_THROWS_AS(m.forward_head(P(0), tg.data()), std::logic_error);
  CHECK_THROWS_AS(m.backward_unit(0, P(0), G(0)), std::logic_error);
  CHECK_THROWS_AS(m.forward_unit(2, P(2)), std::logic_error);  // skipping unit 1
  for (int u = 1; u < m.num_units(); ++u) m.forward_unit(u, P(u));
  CHECK_THROWS_WITH_AS(m.backward_head(P(0), G(0)), doctest::Contains("expected forward_head"), std::logic_error);
  CHECK(m.forward_head(P(0), nullptr) == 0.0f);  // no targets: no loss...
  CHECK_THROWS_WITH_AS(m.backward_head(P(0), G(0)), doctest::Contains("no targets"), std::logic_error);  // ...no backward
  CHECK(m.forward_head(P(0), tg.data()) > 0.0f);  // the head may be re-run
  m.backward_head(P(0), G(0));
  CHECK_THROWS_WITH_AS(m.backward_unit(0, P(0), G(0)), doctest::Contains("expected backward_unit(3)"),
                       std::logic_error);
  for (int u = m.num_units() - 1; u >= 0; --u) m.backward_unit(u, P(u), G(u));
  CHECK_THROWS_AS(m.backward_unit(0, P(0), G(0)), std::logic_error);  // the step is over

  // Token ids outside [0, V): the message names the array, the position and the value.
  std::vector<int> bad = in;
  bad[3] = c.vocab_size;
  CHECK_THROWS_WITH_AS(m.forward_unit(0, P(0), bad.data()), doctest::Contains("inputs[3] = 97"), std::out_of_range);
  bad = in;
  bad[B * T - 1] = -1;
  CHECK_THROWS_WITH_AS(m.forward_unit(0, P(0), bad.data()), doctest::Contains("inputs[15] = -1"), std::out_of_range);
  for (int u = 0; u < m.num_units(); ++u) m.forward_unit(u, P(u), u == 0 ? in.data() : nullptr);  // restart at 0
  bad = tg;
  bad[0] = 1000;
  CHECK_THROWS_WITH_AS(m.forward_head(P(0), bad.data()), doctest::Contains("targets[0] = 1000"), std::out_of_range);
}

// What `tagc-gpt2 sample` reads: the softmax of the last forward_head. Against the CPU
// model's probs() (same kernels, other summation orders in the attention and column sums:
// fp32 rounding only, measured max 9.4e-7 of the row's largest probability; a wrong row,
// a stale buffer or dlogits instead of probabilities is off by O(1)), with and without
// targets; copy_probs copies row (b, t) exactly; outside forward_head..backward_head and
// for positions outside [0,B)x[0,T) it refuses.
TEST_CASE("gpt2_device_model probs/copy_probs after forward_head match gpt2::Model<float>::probs") {
  for (const DeviceCase& k : device_cases()) {
    CAPTURE(k.name);
    const MicroBatches m = make_micro_batches(k);
    gpt2::Model<float> cpu(k.cfg, k.B, k.T);
    HostModel dev(k.cfg, k.B, k.T);
    CHECK_THROWS_WITH_AS(dev.probs(), doctest::Contains("from forward_head until backward_head"), std::logic_error);
    double worst = 0;
    size_t copies_differ = 0;
    for (const int* tg : {static_cast<const int*>(nullptr), m.tg1.data()}) {
      cpu.forward(m.params.data(), m.in1.data(), tg);
      dev.forward(m.params.data(), m.in1.data(), tg);
      // probs() rows, each also fetched through copy_probs (which must copy it exactly)
      const double e = max_probs_error(k, cpu, [&](int b, int t, float* out) {
        const float* p = dev.probs() + (static_cast<size_t>(b) * k.T + t) * k.cfg.padded_vocab_size;
        std::copy_n(p, k.cfg.vocab_size, out);
        std::vector<float> copied(static_cast<size_t>(k.cfg.vocab_size));
        dev.copy_probs(b, t, copied.data());
        copies_differ += std::memcmp(copied.data(), p, copied.size() * sizeof(float)) != 0;
      });
      CHECK(e <= 1e-5);
      worst = std::max(worst, e);
    }
    CHECK(copies_differ == 0);
    std::vector<float> row(static_cast<size_t>(k.cfg.vocab_size));
    CHECK_THROWS_AS(dev.copy_probs(k.B, 0, row.data()), std::out_of_range);
    CHECK_THROWS_WITH_AS(dev.copy_probs(0, -1, row.data()), doctest::Contains("outside [0, B=2) x [0, T="),
                         std::out_of_range);
    std::vector<float> g = m.grads0;
    dev.backward_head(m.params.data(), g.data());  // probabilities -> dlogits in place
    CHECK_THROWS_AS(dev.probs(), std::logic_error);
    CHECK_THROWS_AS(dev.copy_probs(0, 0, row.data()), std::logic_error);
    MESSAGE(k.name, ": max probability difference to the CPU model (relative to the row's largest) ", worst);
  }
}

TEST_CASE("gpt2_device_model adamw_update and sum_of_squares on exec::host match gpt2/optim.hpp") {
  const tagc::exec::host exec;
  const size_t n = 100003;  // odd, and above optim.cpp's OpenMP thresholds
  const auto p0 = random_floats(n, 0.5f, 1), grads = random_floats(n, 0.1f, 2);
  gpt2::AdamW opt;
  opt.lr = 1e-3f;
  opt.weight_decay = 0.1f;
  std::vector<float> pr = p0, mr(n, 0.0f), vr(n, 0.0f);  // reference (optim.hpp)
  std::vector<float> pd = p0, md(n, 0.0f), vd(n, 0.0f);  // exec::host
  for (int t = 1; t <= 3; ++t) {
    gpt2::adamw_update(pr, grads, mr, vr, opt, t);
    gpt2::adamw_update(exec, pd.data(), grads.data(), md.data(), vd.data(), n, opt, t);
  }
  // The same float formula; only FMA contraction may differ between the two loops.
  CHECK(tensor_error(pd.data(), pr.data(), n) <= 1e-6);
  CHECK(tensor_error(md.data(), mr.data(), n) <= 1e-6);
  CHECK(tensor_error(vd.data(), vr.data(), n) <= 1e-6);
  CHECK(tensor_error(pd.data(), p0.data(), n) > 1e-4);  // and the parameters did move
  CHECK_THROWS_AS(gpt2::adamw_update(exec, pd.data(), grads.data(), md.data(), vd.data(), n, opt, 0),
                  std::invalid_argument);

  const double ref = gpt2::sum_of_squares(grads);
  const double got = gpt2::sum_of_squares(exec, grads.data(), n);
  CHECK(std::fabs(got - ref) <= 1e-12 * ref);  // double sums of floats, different order
  CHECK(gpt2::sum_of_squares(exec, grads.data(), 0) == 0.0);
}
