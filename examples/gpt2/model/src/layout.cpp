// defines: the unit layout (see layout.hpp for the table).
#include "gpt2/layout.hpp"

namespace gpt2 {

namespace {
struct Builder {
  UnitInfo u;
  Builder(std::string name) { u.name = std::move(name); u.size = 0; u.compressible_size = 0; }
  Builder& add(std::string name, std::vector<int> shape, bool compressible) {
    size_t n = 1;
    for (int d : shape) n *= static_cast<size_t>(d);
    u.tensors.push_back({std::move(name), std::move(shape), u.size, n, compressible});
    u.size += n;
    if (compressible) u.compressible_size = u.size;  // compressible tensors come first
    return *this;
  }
};
}  // namespace

std::vector<UnitInfo> units(const Config& cfg) {
  cfg.validate();
  const int C = cfg.channels, L = cfg.num_layers;
  std::vector<UnitInfo> out;
  out.reserve(2 * L + 2);
  out.push_back(Builder("embed")
                    .add("wte", {cfg.padded_vocab_size, C}, true)
                    .add("wpe", {cfg.max_seq_len, C}, false)
                    .u);
  for (int l = 0; l < L; ++l) {
    const std::string h = "h" + std::to_string(l) + ".";
    out.push_back(Builder("attn." + std::to_string(l))
                      .add(h + "attprojw", {C, C}, true)
                      .add(h + "ln1w", {C}, false)
                      .add(h + "ln1b", {C}, false)
                      .add(h + "qkvw", {3 * C, C}, false)
                      .add(h + "qkvb", {3 * C}, false)
                      .add(h + "attprojb", {C}, false)
                      .u);
    out.push_back(Builder("mlp." + std::to_string(l))
                      .add(h + "fcw", {4 * C, C}, true)
                      .add(h + "fcprojw", {C, 4 * C}, true)
                      .add(h + "ln2w", {C}, false)
                      .add(h + "ln2b", {C}, false)
                      .add(h + "fcb", {4 * C}, false)
                      .add(h + "fcprojb", {C}, false)
                      .u);
  }
  out.push_back(Builder("lnf").add("lnfw", {C}, false).add("lnfb", {C}, false).u);
  return out;
}

std::vector<size_t> unit_offsets(const std::vector<UnitInfo>& us) {
  std::vector<size_t> off(us.size() + 1, 0);
  for (size_t i = 0; i < us.size(); ++i) off[i + 1] = off[i] + us[i].size;
  return off;
}

size_t num_parameters(const Config& cfg) { return unit_offsets(units(cfg)).back(); }

}  // namespace gpt2
