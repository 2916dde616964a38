// defines: gpt2::init_unit, gpt2::init_params (see init.hpp).
#include "gpt2/init.hpp"

#include "gpt2/layout.hpp"
#include "gpt2/splitmix64.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gpt2 {

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
// Normal(0, std): the tensor is cut into fixed chunks, each its own splitmix64 stream
// keyed by (key, chunk), so the result does not depend on the number of threads.
// Per chunk: two uniforms in (0,1] x [0,1) -> Box-Muller (both outputs used).
constexpr size_t kChunk = size_t(1) << 16;
void fill_normal_chunk(float* out, size_t n, double stdev, uint64_t key);
void fill_normal(float* out, size_t n, double stdev, uint64_t key) {
  const size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (size_t c = 0; c < chunks; ++c) {
    uint64_t k = key + c * 0xD1B54A32D192ED03ull;
    const uint64_t ck = splitmix64(k);
    fill_normal_chunk(out + c * kChunk, std::min(kChunk, n - c * kChunk), stdev, ck);
  }
}
void fill_normal_chunk(float* out, size_t n, double stdev, uint64_t key) {
  uint64_t s = key;
  constexpr double two_pi = 6.283185307179586476925286766559;
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(splitmix64(s) >> 11) * 0x1.0p-53;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1)) * stdev;
    out[i] = static_cast<float>(r * std::cos(two_pi * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(two_pi * u2));
  }
}
bool ends_with(const std::string& s, const char* suf) {
  const std::string x(suf);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}
}  // namespace

void init_unit(const Config& cfg, int u, uint64_t seed, std::span<float> unit) {
  const std::vector<UnitInfo> us = units(cfg);
  if (u < 0 || u >= static_cast<int>(us.size()))
    throw std::out_of_range("gpt2::init_unit: unit " + std::to_string(u) + " outside [0, " + std::to_string(us.size()) + ")");
  if (unit.size() != us[u].size)
    throw std::invalid_argument("gpt2::init_unit: span has " + std::to_string(unit.size()) + " elements, unit " +
                                us[u].name + " needs " + std::to_string(us[u].size));
  const double std_base = 0.02;
  const double std_resid = 0.02 / std::sqrt(2.0 * cfg.num_layers);
  for (const TensorInfo& t : us[u].tensors) {
    float* p = unit.data() + t.offset;
    uint64_t s0 = seed;
    const uint64_t key = splitmix64(s0) ^ fnv1a(t.name);  // one independent stream per (seed, tensor)
    if (t.shape.size() == 1) {  // LayerNorm weights 1, all biases 0
      const bool is_ln_weight = ends_with(t.name, "ln1w") || ends_with(t.name, "ln2w") || t.name == "lnfw";
      std::fill(p, p + t.size, is_ln_weight ? 1.0f : 0.0f);
    } else if (t.name == "wte") {
      const size_t used = static_cast<size_t>(cfg.vocab_size) * cfg.channels;
      fill_normal(p, used, std_base, key);
      std::fill(p + used, p + t.size, 0.0f);  // padded rows
    } else {
      const bool resid = ends_with(t.name, "attprojw") || ends_with(t.name, "fcprojw");
      fill_normal(p, t.size, resid ? std_resid : std_base, key);
    }
  }
}

void init_params(const Config& cfg, uint64_t seed, std::span<float> params) {
  const std::vector<UnitInfo> us = units(cfg);
  const std::vector<size_t> off = unit_offsets(us);
  if (params.size() != off.back())
    throw std::invalid_argument("gpt2::init_params: span has " + std::to_string(params.size()) +
                                " elements, the model needs " + std::to_string(off.back()));
  for (size_t u = 0; u < us.size(); ++u) init_unit(cfg, static_cast<int>(u), seed, params.subspan(off[u], us[u].size));
}

}  // namespace gpt2
