// Tests for gpt2_model: config validation, unit layout, gradients (finite differences in
// double), init, determinism, per-unit == whole-model, checkpoints, AdamW.
#include <doctest/doctest.h>

#include "gpt2/checkpoint.hpp"
#include "gpt2/init.hpp"
#include "gpt2/layout.hpp"
#include "gpt2/model.hpp"
#include "gpt2/optim.hpp"
#include "kernels.hpp"  // private: the gemm splitter
#include "per_unit_check.hpp"

#include <omp.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

gpt2::Config tiny_config() {
  gpt2::Config c;
  c.max_seq_len = 16;
  c.num_layers = 2;
  c.channels = 32;
  c.num_heads = 4;
  c.with_vocab(50);  // Vp = 128
  return c;
}

// GPT-2's initial weights for c, from seed (flat layout).
std::vector<float> initial_params(const gpt2::Config& c, uint64_t seed) {
  std::vector<float> p(gpt2::num_parameters(c));
  gpt2::init_params(c, seed, p);
  return p;
}

std::vector<int> random_tokens(size_t n, int V, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(0, V - 1);
  std::vector<int> t(n);
  for (int& x : t) x = d(g);
  return t;
}

// llm.c's parameter count, written out independently of layout.cpp.
size_t llmc_param_count(const gpt2::Config& c) {
  const size_t C = c.channels, L = c.num_layers;
  return c.padded_vocab_size * C + c.max_seq_len * C +
         L * (C + C + 3 * C * C + 3 * C + C * C + C + C + C + 4 * C * C + 4 * C + C * 4 * C + C) + 2 * C;
}

// An independent, deliberately naive GPT-2 forward in double (straight from the paper's
// definition, looking tensors up by name), to check that the fast forward IS GPT-2 —
// the gradient check only shows that the backward matches whatever the forward does.
double reference_loss(const gpt2::Config& c, const std::vector<double>& flat, const std::vector<int>& in,
                      const std::vector<int>& tg, int B, int T) {
  const auto us = gpt2::units(c);
  const auto off = gpt2::unit_offsets(us);
  auto W = [&](const std::string& name) -> const double* {
    for (size_t u = 0; u < us.size(); ++u)
      for (const auto& t : us[u].tensors)
        if (t.name == name) return flat.data() + off[u] + t.offset;
    throw std::logic_error("no tensor " + name);
  };
  const int C = c.channels, NH = c.num_heads, hs = C / NH, V = c.vocab_size;
  using Mat = std::vector<std::vector<double>>;  // [T][dim]
  auto layernorm = [&](const Mat& x, const double* w, const double* b) {
    Mat y = x;
    for (int t = 0; t < T; ++t) {
      double m = 0, v = 0;
      for (int i = 0; i < C; ++i) m += x[t][i] / C;
      for (int i = 0; i < C; ++i) v += (x[t][i] - m) * (x[t][i] - m) / C;
      for (int i = 0; i < C; ++i) y[t][i] = (x[t][i] - m) / std::sqrt(v + 1e-5) * w[i] + b[i];
    }
    return y;
  };
  auto linear = [&](const Mat& x, const double* w, const double* b, int out) {  // x @ w^T + b
    Mat y(T, std::vector<double>(out, 0.0));
    const int in_dim = static_cast<int>(x[0].size());
    for (int t = 0; t < T; ++t)
      for (int o = 0; o < out; ++o) {
        double s = b ? b[o] : 0.0;
        for (int i = 0; i < in_dim; ++i) s += x[t][i] * w[static_cast<size_t>(o) * in_dim + i];
        y[t][o] = s;
      }
    return y;
  };
  double total = 0;
  for (int b = 0; b < B; ++b) {
    Mat x(T, std::vector<double>(C));
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < C; ++i) x[t][i] = W("wte")[size_t(in[b * T + t]) * C + i] + W("wpe")[size_t(t) * C + i];
    for (int l = 0; l < c.num_layers; ++l) {
      const std::string h = "h" + std::to_string(l) + ".";
      const Mat qkv = linear(layernorm(x, W(h + "ln1w"), W(h + "ln1b")), W(h + "qkvw"), W(h + "qkvb"), 3 * C);
      Mat y(T, std::vector<double>(C, 0.0));
      for (int hd = 0; hd < NH; ++hd)
        for (int t = 0; t < T; ++t) {
          std::vector<double> s(t + 1);
          double mx = -1e300, z = 0;
          for (int u = 0; u <= t; ++u) {  // causal: only u <= t
            double d = 0;
            for (int i = 0; i < hs; ++i) d += qkv[t][hd * hs + i] * qkv[u][C + hd * hs + i];
            s[u] = d / std::sqrt(double(hs));
            mx = std::max(mx, s[u]);
          }
          for (int u = 0; u <= t; ++u) z += std::exp(s[u] - mx);
          for (int u = 0; u <= t; ++u)
            for (int i = 0; i < hs; ++i) y[t][hd * hs + i] += std::exp(s[u] - mx) / z * qkv[u][2 * C + hd * hs + i];
        }
      const Mat a = linear(y, W(h + "attprojw"), W(h + "attprojb"), C);
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < C; ++i) x[t][i] += a[t][i];
      Mat f = linear(layernorm(x, W(h + "ln2w"), W(h + "ln2b")), W(h + "fcw"), W(h + "fcb"), 4 * C);
      for (auto& row : f)
        for (double& v : row) v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      const Mat m = linear(f, W(h + "fcprojw"), W(h + "fcprojb"), C);
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < C; ++i) x[t][i] += m[t][i];
    }
    const Mat xf = layernorm(x, W("lnfw"), W("lnfb"));
    for (int t = 0; t < T; ++t) {
      std::vector<double> logit(V);
      double mx = -1e300, z = 0;
      for (int v = 0; v < V; ++v) {
        double d = 0;
        for (int i = 0; i < C; ++i) d += xf[t][i] * W("wte")[size_t(v) * C + i];
        logit[v] = d;
        mx = std::max(mx, d);
      }
      for (int v = 0; v < V; ++v) z += std::exp(logit[v] - mx);
      total += -(logit[tg[b * T + t]] - mx - std::log(z));
    }
  }
  return total / (B * T);
}

std::string temp_path(const char* name) { return std::string("/tmp/gpt2_model_test_") + name + ".bin"; }

}  // namespace

TEST_CASE("gpt2_model config: presets and validation messages name the field") {
  const gpt2::Config d12 = gpt2::parse_config("d12");
  CHECK(d12.num_layers == 12);
  CHECK(d12.channels == 768);
  CHECK(d12.num_heads == 12);
  CHECK(d12.vocab_size == 50257);
  CHECK(d12.padded_vocab_size == 50304);
  const gpt2::Config d2 = gpt2::parse_config("d2");
  CHECK(d2.channels == 128);
  CHECK(d2.num_heads == 2);
  CHECK_THROWS_AS(gpt2::parse_config("x3"), std::invalid_argument);
  CHECK_THROWS_AS(gpt2::parse_config("d0"), std::invalid_argument);

  gpt2::Config bad = d2;
  bad.num_heads = 3;
  try {
    bad.validate();
    FAIL("expected an exception");
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    CHECK(m.find("channels") != std::string::npos);
    CHECK(m.find("num_heads") != std::string::npos);
  }
  bad = d2;
  bad.padded_vocab_size = 100;
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("padded_vocab_size"), std::invalid_argument);
  CHECK_THROWS_AS(gpt2::Gpt2(d2, 1, 2048), std::invalid_argument);
  CHECK_THROWS_AS(gpt2::Gpt2(d2, 0, 8), std::invalid_argument);
}

TEST_CASE("gpt2_model units: sizes match llm.c, compressible prefixes contiguous") {
  for (const gpt2::Config& c : {tiny_config(), gpt2::parse_config("d2"), gpt2::parse_config("d12")}) {
    const auto us = gpt2::units(c);
    REQUIRE(static_cast<int>(us.size()) == gpt2::num_units(c));
    CHECK(gpt2::num_parameters(c) == llmc_param_count(c));
    size_t ntensors = 0;
    for (const auto& u : us) {
      size_t pos = 0, comp = 0;
      bool in_prefix = true;
      for (const auto& t : u.tensors) {
        CHECK(t.offset == pos);  // contiguous, in order
        size_t prod = 1;
        for (int d : t.shape) prod *= d;
        CHECK(t.size == prod);
        pos += t.size;
        if (t.compressible) {
          CHECK(in_prefix);  // no compressible tensor after a plain one
          comp = pos;
        } else {
          in_prefix = false;
        }
      }
      CHECK(u.size == pos);
      CHECK(u.compressible_size == comp);
      ntensors += u.tensors.size();
    }
    CHECK(ntensors == 2 + 12 * static_cast<size_t>(c.num_layers) + 2);
  }
  const auto us = gpt2::units(gpt2::parse_config("d12"));
  CHECK(gpt2::num_parameters(gpt2::parse_config("d12")) == 124475904u);  // llm.c's d12 count
  CHECK(us[0].name == "embed");
  CHECK(us[0].compressible_size == 50304u * 768u);
  CHECK(us[1].name == "attn.0");
  CHECK(us[1].tensors[0].name == "h0.attprojw");
  CHECK(us[1].compressible_size == 768u * 768u);
  CHECK(us[2].name == "mlp.0");
  CHECK(us[2].compressible_size == 2u * 4u * 768u * 768u);
  CHECK(us.back().name == "lnf");
  CHECK(us.back().compressible_size == 0u);
}

TEST_CASE("gpt2_model gradient check: finite differences in double, every tensor") {
  const gpt2::Config c = tiny_config();
  const int B = 2, T = 8;
  std::vector<float> pf = initial_params(c, 1234);
  const size_t n = pf.size();
  // Perturb everything (LN weights, biases, padded rows too) so no gradient is trivial.
  std::mt19937 g(7);
  std::normal_distribution<double> nd(0.0, 0.1);
  std::vector<double> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = pf[i] + nd(g);
  const auto in = random_tokens(B * T, c.vocab_size, 1);
  const auto tg = random_tokens(B * T, c.vocab_size, 2);

  gpt2::Model<double> m(c, B, T);
  m.forward(p.data(), in.data(), tg.data());
  double loss0 = 0;  // in double (forward() returns float)
  for (int j = 0; j < B * T; ++j) loss0 += m.losses()[j] / (B * T);
  CHECK(std::isfinite(loss0));
  const double ref = reference_loss(c, p, in, tg, B, T);
  MESSAGE("loss ", loss0, " naive reference ", ref);
  CHECK(std::abs(loss0 - ref) < 1e-12 * std::abs(ref) + 1e-13);
  std::vector<double> grad(n, 0.0);
  m.backward(p.data(), grad.data());

  const auto us = gpt2::units(c);
  const auto off = gpt2::unit_offsets(us);
  const double eps = 1e-5;
  std::mt19937 pick(99);
  int checked = 0;
  double worst = 0;
  for (size_t u = 0; u < us.size(); ++u)
    for (const auto& t : us[u].tensors) {
      std::vector<size_t> idx;
      std::uniform_int_distribution<size_t> d(0, t.size - 1);
      for (int s = 0; s < 6; ++s) idx.push_back(d(pick));
      if (t.name == "wte") idx.push_back(static_cast<size_t>(in[3]) * c.channels + 5);  // a row that is used
      for (size_t i : idx) {
        const size_t k = off[u] + t.offset + i;
        const double save = p[k];
        // forward() returns float: sum the per-position losses in double instead.
        auto loss_at = [&](double v) {
          p[k] = v;
          m.forward(p.data(), in.data(), tg.data());
          p[k] = save;
          double s = 0;
          for (int j = 0; j < B * T; ++j) s += m.losses()[j];
          return s / (B * T);
        };
        const double num = (loss_at(save + eps) - loss_at(save - eps)) / (2 * eps);
        const double ana = grad[k];
        const double rel = std::abs(num - ana) / std::max(std::abs(num) + std::abs(ana), 1e-7);
        worst = std::max(worst, rel);
        INFO(t.name, "[", i, "] analytic ", ana, " numeric ", num);
        CHECK(rel < 1e-5);
        ++checked;
      }
    }
  MESSAGE("gradient check: ", checked, " entries, worst relative error ", worst);
  // Padded wte rows never produce logits and no token indexes them: gradient exactly 0.
  for (size_t i = static_cast<size_t>(c.vocab_size) * c.channels; i < static_cast<size_t>(c.padded_vocab_size) * c.channels; ++i)
    REQUIRE(grad[i] == 0.0);

  // Accumulation: a second backward of the same forward adds the same gradient again.
  m.forward(p.data(), in.data(), tg.data());
  std::vector<double> grad2 = grad;
  m.backward(p.data(), grad2.data());
  for (size_t i = 0; i < n; i += 97) CHECK(grad2[i] == doctest::Approx(2 * grad[i]).epsilon(1e-12));
  // loss_scale multiplies the whole gradient (gradient accumulation over micro-batches).
  m.forward(p.data(), in.data(), tg.data());
  std::vector<double> grad_half(n, 0.0);
  m.backward(p.data(), grad_half.data(), 0.25f);
  for (size_t i = 0; i < n; i += 89) CHECK(grad_half[i] == doctest::Approx(0.25 * grad[i]).epsilon(1e-12));

  // float model agrees with the double one.
  std::vector<float> pff(p.begin(), p.end()), gf(n, 0.0f);
  gpt2::Gpt2 mf(c, B, T);
  const float lf = mf.forward(pff.data(), in.data(), tg.data());
  mf.backward(pff.data(), gf.data());
  CHECK(lf == doctest::Approx(loss0).epsilon(1e-5));
  double num2 = 0, den2 = 0;
  for (size_t i = 0; i < n; ++i) {
    num2 += (gf[i] - grad[i]) * (gf[i] - grad[i]);
    den2 += grad[i] * grad[i];
  }
  CHECK(std::sqrt(num2 / den2) < 1e-4);
}

TEST_CASE("gpt2_model loss at init is close to ln(V) (d2, random tokens)") {
  const gpt2::Config c = gpt2::parse_config("d2");
  const int B = 2, T = 64;
  const std::vector<float> p = initial_params(c, 42);
  const auto in = random_tokens(B * T, c.vocab_size, 3);
  const auto tg = random_tokens(B * T, c.vocab_size, 4);
  gpt2::Gpt2 m(c, B, T);
  const float loss = m.forward(p.data(), in.data(), tg.data());
  MESSAGE("d2 loss at init ", loss, " vs ln(V) ", std::log(50257.0));
  CHECK(std::abs(loss - std::log(50257.0)) < 0.2);
  // probabilities over the first V sum to 1
  double s = 0;
  for (int v = 0; v < c.vocab_size; ++v) s += m.probs()[v];
  CHECK(s == doctest::Approx(1.0).epsilon(1e-4));

  // The split (multi-thread) gemm paths, forward and backward, agree with one thread.
  const int saved = omp_get_max_threads();
  std::vector<std::vector<float>> grads;
  std::vector<float> losses;
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    gpt2::Gpt2 mt(c, B, T);
    std::vector<float> g(p.size(), 0.0f);
    losses.push_back(mt.forward(p.data(), in.data(), tg.data()));
    mt.backward(p.data(), g.data());
    grads.push_back(std::move(g));
  }
  omp_set_num_threads(saved);
  CHECK(losses[0] == doctest::Approx(losses[1]).epsilon(1e-6));
  double num = 0, den = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    num += double(grads[0][i] - grads[1][i]) * (grads[0][i] - grads[1][i]);
    den += double(grads[0][i]) * grads[0][i];
  }
  CHECK(den > 0);
  CHECK(std::sqrt(num / den) < 1e-5);
}

TEST_CASE("gpt2_model init: deterministic, GPT-2 statistics, per-unit == whole") {
  const gpt2::Config c = gpt2::parse_config("d2");
  const size_t n = gpt2::num_parameters(c);
  std::vector<float> a(n), b(n), d(n);
  gpt2::init_params(c, 5, a);
  gpt2::init_params(c, 5, b);
  gpt2::init_params(c, 6, d);
  CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
  CHECK(std::memcmp(a.data(), d.data(), n * sizeof(float)) != 0);
  {  // independent of the thread count
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    std::vector<float> one(n);
    gpt2::init_params(c, 5, one);
    omp_set_num_threads(saved);
    CHECK(std::memcmp(a.data(), one.data(), n * sizeof(float)) == 0);
  }
  const auto us = gpt2::units(c);
  const auto off = gpt2::unit_offsets(us);
  for (size_t u = 0; u < us.size(); ++u) {
    std::vector<float> one(us[u].size);
    gpt2::init_unit(c, static_cast<int>(u), 5, one);
    CHECK(std::memcmp(one.data(), a.data() + off[u], one.size() * sizeof(float)) == 0);
  }
  auto stdev = [&](size_t o, size_t len) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < len; ++i) { s += a[o + i]; s2 += double(a[o + i]) * a[o + i]; }
    const double m = s / len;
    return std::sqrt(s2 / len - m * m);
  };
  for (size_t u = 0; u < us.size(); ++u)
    for (const auto& t : us[u].tensors) {
      const size_t o = off[u] + t.offset;
      if (t.name == "wte") {
        CHECK(stdev(o, size_t(c.vocab_size) * c.channels) == doctest::Approx(0.02).epsilon(0.02));
        CHECK(a[o + size_t(c.vocab_size) * c.channels] == 0.0f);  // padded rows
      } else if (t.name.ends_with("projw")) {
        CHECK(stdev(o, t.size) == doctest::Approx(0.02 / std::sqrt(2.0 * c.num_layers)).epsilon(0.03));
      } else if (t.shape.size() == 2) {
        CHECK(stdev(o, t.size) == doctest::Approx(0.02).epsilon(0.03));
      } else {
        const float want = (t.name.ends_with("ln1w") || t.name.ends_with("ln2w") || t.name == "lnfw") ? 1.0f : 0.0f;
        for (size_t i = 0; i < t.size; ++i) REQUIRE(a[o + i] == want);
      }
    }
}

TEST_CASE("gpt2_model per-unit steps with separate buffers == whole-model forward/backward; determinism") {
  const gpt2::Config c = tiny_config();
  const int B = 2, T = 8;
  const std::vector<float> p = initial_params(c, 11);
  const auto in = random_tokens(B * T, c.vocab_size, 5);
  const auto tg = random_tokens(B * T, c.vocab_size, 6);

  const auto P = gpt2_test::check_per_unit_matches_whole<gpt2::Gpt2>(c, B, T, p, in, tg);
  std::vector<float> G0(P[0].size(), 0.0f);

  // Order is checked.
  gpt2::Gpt2 m(c, B, T);
  CHECK_THROWS_AS(m.forward_unit(1, P[1].data()), std::logic_error);
  m.forward_unit(0, P[0].data(), in.data());
  CHECK_THROWS_AS(m.forward_head(P[0].data(), tg.data()), std::logic_error);
  CHECK_THROWS_AS(m.backward_unit(0, P[0].data(), G0.data()), std::logic_error);
  std::vector<int> bad = in;
  bad[3] = c.vocab_size;
  CHECK_THROWS_AS(m.forward_unit(0, P[0].data(), bad.data()), std::out_of_range);
}

TEST_CASE("gpt2_model checkpoint: llm.c layout, bit-exact round trip, bad files rejected") {
  const gpt2::Config c = tiny_config();
  std::vector<float> p = initial_params(c, 3);
  const size_t n = p.size();
  for (size_t i = 0; i < n; ++i) p[i] += 1e-3f * static_cast<float>(i % 17);  // no zero runs

  const auto llmc = gpt2::to_llmc_order(c, p);
  CHECK(gpt2::from_llmc_order(c, llmc) == p);
  const size_t C = c.channels;
  // llm.c order: wte first, then wpe, then ln1w of every layer (ours: all 1 + noise), ..., lnfb last
  CHECK(std::memcmp(llmc.data(), p.data(), size_t(c.padded_vocab_size) * C * sizeof(float)) == 0);
  const auto us = gpt2::units(c);
  const auto off = gpt2::unit_offsets(us);
  const size_t ln1w_pos = size_t(c.padded_vocab_size + c.max_seq_len) * C;
  CHECK(llmc[ln1w_pos] == p[off[gpt2::attn_unit(0)] + us[1].tensors[1].offset]);
  CHECK(llmc[ln1w_pos + C] == p[off[gpt2::attn_unit(1)] + us[3].tensors[1].offset]);
  CHECK(llmc.back() == p.back());

  const std::string path = temp_path("ck");
  gpt2::save_checkpoint(path, c, p);
  {
    std::ifstream f(path, std::ios::binary);
    int32_t h[8];
    f.read(reinterpret_cast<char*>(h), sizeof h);
    CHECK(h[0] == 20240326);
    CHECK(h[1] == 3);
    CHECK(h[2] == c.max_seq_len);
    CHECK(h[3] == c.vocab_size);
    CHECK(h[4] == c.num_layers);
    CHECK(h[5] == c.num_heads);
    CHECK(h[6] == c.channels);
    CHECK(h[7] == c.padded_vocab_size);
  }
  const gpt2::Checkpoint ck = gpt2::load_checkpoint(path);
  CHECK(ck.config == c);
  REQUIRE(ck.params.size() == n);
  CHECK(std::memcmp(ck.params.data(), p.data(), n * sizeof(float)) == 0);

  // truncated
  std::vector<char> bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  const std::string trunc = temp_path("trunc");
  std::ofstream(trunc, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 4));
  CHECK_THROWS_WITH_AS(gpt2::load_checkpoint(trunc), doctest::Contains("truncated"), std::runtime_error);
  std::ofstream(trunc, std::ios::binary).write(bytes.data(), 100);
  CHECK_THROWS_WITH_AS(gpt2::load_checkpoint(trunc), doctest::Contains("truncated"), std::runtime_error);
  // trailing garbage
  std::vector<char> longer = bytes;
  longer.push_back(0);
  std::ofstream(trunc, std::ios::binary).write(longer.data(), static_cast<std::streamsize>(longer.size()));
  CHECK_THROWS_WITH_AS(gpt2::load_checkpoint(trunc), doctest::Contains("trailing"), std::runtime_error);
  // foreign magic (an llm.c token shard header)
  std::vector<char> foreign = bytes;
  const int32_t shard_magic = 20240520;
  std::memcpy(foreign.data(), &shard_magic, 4);
  std::ofstream(trunc, std::ios::binary).write(foreign.data(), static_cast<std::streamsize>(foreign.size()));
  CHECK_THROWS_WITH_AS(gpt2::load_checkpoint(trunc), doctest::Contains("magic"), std::runtime_error);
  // bf16 version 5
  foreign = bytes;
  const int32_t v5 = 5;
  std::memcpy(foreign.data() + 4, &v5, 4);
  std::ofstream(trunc, std::ios::binary).write(foreign.data(), static_cast<std::streamsize>(foreign.size()));
  CHECK_THROWS_WITH_AS(gpt2::load_checkpoint(trunc), doctest::Contains("version"), std::runtime_error);
  CHECK_THROWS_WITH_AS(gpt2::load_checkpoint("/nonexistent/x.bin"), doctest::Contains("cannot open"), std::runtime_error);
  std::remove(path.c_str());
  std::remove(trunc.c_str());
}

TEST_CASE("gpt2_model AdamW and sum of squares") {
  const size_t n = 1001;
  std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f);
  std::mt19937 r(1);
  std::normal_distribution<float> d;
  for (size_t i = 0; i < n; ++i) { p[i] = d(r); g[i] = d(r); }
  std::vector<double> pr(p.begin(), p.end()), mr(n, 0), vr(n, 0);
  gpt2::AdamW o;
  o.lr = 1e-3f;
  o.weight_decay = 0.1f;
  for (int t = 1; t <= 3; ++t) {
    gpt2::adamw_update(p, g, m, v, o, t);
    for (size_t i = 0; i < n; ++i) {
      mr[i] = 0.9 * mr[i] + 0.1 * g[i];
      vr[i] = 0.999 * vr[i] + 0.001 * double(g[i]) * g[i];
      const double mh = mr[i] / (1 - std::pow(0.9, t)), vh = vr[i] / (1 - std::pow(0.999, t));
      pr[i] -= 1e-3 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * pr[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) REQUIRE(p[i] == doctest::Approx(pr[i]).epsilon(1e-5));
  CHECK_THROWS_AS(gpt2::adamw_update(p, std::span<const float>(g).first(5), m, v, o, 1), std::invalid_argument);

  double ref = 0;
  for (float x : g) ref += double(x) * x;
  CHECK(gpt2::sum_of_squares(g) == doctest::Approx(ref).epsilon(1e-12));
}

TEST_CASE("gpt2_model gemm splitter: odd sizes, all transposes, several threads == naive") {
  const int saved = omp_get_max_threads();
  std::mt19937 r(3);
  std::uniform_real_distribution<double> u(-1, 1);
  // the last two sizes are above the split threshold, so threads > 1 split them
  static_assert(2.0 * 257 * 1031 * 131 >= gpt2::kernels::kGemmSplitMinFlops);
  for (int threads : {1, 2, 3})
    for (auto [M, N, K] : {std::array<int, 3>{193, 67, 400}, {70, 1025, 129}, {257, 1031, 131}, {640, 640, 160}})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          omp_set_num_threads(threads);
          const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
          std::vector<double> A(size_t(ta ? K : M) * lda), Bm(size_t(tb ? N : K) * ldb), C(size_t(M) * ldc);
          for (double& x : A) x = u(r);
          for (double& x : Bm) x = u(r);
          for (double& x : C) x = u(r);
          std::vector<double> want = C;
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
              double s = 0;
              for (int k = 0; k < K; ++k)
                s += (ta ? A[size_t(k) * lda + i] : A[size_t(i) * lda + k]) * (tb ? Bm[size_t(j) * ldb + k] : Bm[size_t(k) * ldb + j]);
              want[size_t(i) * ldc + j] = 0.5 * s + 2.0 * C[size_t(i) * ldc + j];
            }
          gpt2::kernels::gemm(ta, tb, M, N, K, 0.5, A.data(), lda, Bm.data(), ldb, 2.0, C.data(), ldc);
          double worst = 0;
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) worst = std::max(worst, std::abs(C[size_t(i) * ldc + j] - want[size_t(i) * ldc + j]));
          INFO("threads ", threads, " M ", M, " N ", N, " K ", K, " ta ", ta, " tb ", tb);
          CHECK(worst < 1e-10);
        }
  omp_set_num_threads(saved);
}

TEST_CASE("gpt2_model end to end: AdamW on one repeated batch drives the loss down") {
  const gpt2::Config c = tiny_config();
  const int B = 2, T = 8;
  const size_t n = gpt2::num_parameters(c);
  std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f);
  gpt2::init_params(c, 8, p);
  const auto in = random_tokens(B * T, c.vocab_size, 9);
  const auto tg = random_tokens(B * T, c.vocab_size, 10);
  gpt2::Gpt2 model(c, B, T);
  gpt2::AdamW o;
  o.lr = 1e-2f;
  o.weight_decay = 0.0f;
  float first = 0, last = 0;
  for (int step = 1; step <= 40; ++step) {
    std::fill(g.begin(), g.end(), 0.0f);
    last = model.forward(p.data(), in.data(), tg.data());
    if (step == 1) first = last;
    model.backward(p.data(), g.data());
    CHECK(std::isfinite(gpt2::sum_of_squares(g)));
    gpt2::adamw_update(p, g, m, v, o, step);
  }
  MESSAGE("loss ", first, " -> ", last);
  CHECK(last < 0.2f * first);
}
