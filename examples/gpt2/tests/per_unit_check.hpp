#pragma once
// defines: gpt2_test::unit_buffers, gpt2_test::check_per_unit_matches_whole — a model
// driven unit by unit over one buffer per unit (as the sharded trainer drives it) against
// the same model's whole-model forward/backward over the flat layout. Both models (the
// reference Model<float> and DeviceModel<exec::host>) must pass the same check.
#include <doctest/doctest.h>

#include "gpt2/config.hpp"
#include "gpt2/layout.hpp"

#include <cstring>
#include <vector>

namespace gpt2_test {

// flat (the flat layout of c) cut into one buffer per unit.
inline std::vector<std::vector<float>> unit_buffers(const gpt2::Config& c, const std::vector<float>& flat) {
  const auto us = gpt2::units(c);
  const auto off = gpt2::unit_offsets(us);
  REQUIRE(flat.size() == off.back());
  std::vector<std::vector<float>> b(us.size());
  for (size_t u = 0; u < us.size(); ++u) b[u].assign(flat.begin() + off[u], flat.begin() + off[u] + us[u].size);
  return b;
}

// Whole-model forward/backward twice (the same loss and gradients bit for bit: the model is
// deterministic), then a fresh model unit by unit: the same loss and every unit's gradient
// bit for bit. Returns the per-unit parameter buffers, for checks that go on with them.
template <class Model>
std::vector<std::vector<float>> check_per_unit_matches_whole(const gpt2::Config& c, int B, int T,
                                                             const std::vector<float>& p, const std::vector<int>& in,
                                                             const std::vector<int>& tg) {
  const size_t n = p.size();
  Model whole(c, B, T);
  std::vector<float> gw(n, 0.0f), gw2(n, 0.0f);
  const float lw = whole.forward(p.data(), in.data(), tg.data());
  whole.backward(p.data(), gw.data());
  CHECK(whole.forward(p.data(), in.data(), tg.data()) == lw);
  whole.backward(p.data(), gw2.data());
  CHECK(gw2 == gw);

  auto P = unit_buffers(c, p);
  auto G = unit_buffers(c, std::vector<float>(n, 0.0f));
  Model split(c, B, T);
  REQUIRE(split.num_units() == static_cast<int>(P.size()));
  for (int u = 0; u < split.num_units(); ++u) split.forward_unit(u, P[u].data(), u == 0 ? in.data() : nullptr);
  CHECK(split.forward_head(P[0].data(), tg.data()) == lw);
  split.backward_head(P[0].data(), G[0].data());
  for (int u = split.num_units() - 1; u >= 0; --u) split.backward_unit(u, P[u].data(), G[u].data());
  const auto us = gpt2::units(c);
  const auto off = gpt2::unit_offsets(us);
  for (size_t u = 0; u < us.size(); ++u) {
    CAPTURE(us[u].name);
    CHECK(std::memcmp(G[u].data(), gw.data() + off[u], us[u].size * sizeof(float)) == 0);
  }
  return P;
}

}  // namespace gpt2_test
