// defines: gpt2::tensor_offsets, gpt2::find_offset (see tensor_offsets.hpp).
#include "gpt2/tensor_offsets.hpp"

#include <stdexcept>

namespace gpt2 {

size_t find_offset(const UnitInfo& u, const std::string& name) {
  for (const TensorInfo& t : u.tensors) {
    const std::string& n = t.name;
    // "h3.fcw" matches "fcw"; "h3.fcprojw" does not (the character before must be the '.')
    if (n.size() >= name.size() && n.compare(n.size() - name.size(), name.size(), name) == 0 &&
        (n.size() == name.size() || n[n.size() - name.size() - 1] == '.'))
      return t.offset;
  }
  throw std::logic_error("gpt2: unit " + u.name + " has no tensor " + name);
}

TensorOffsets tensor_offsets(const Config& cfg, const std::vector<UnitInfo>& us) {
  TensorOffsets o;
  o.wpe = find_offset(us[0], "wpe");
  const UnitInfo& a = us[attn_unit(0)];
  o.attn = {find_offset(a, "attprojw"), find_offset(a, "ln1w"), find_offset(a, "ln1b"),
            find_offset(a, "qkvw"),     find_offset(a, "qkvb"), find_offset(a, "attprojb")};
  const UnitInfo& m = us[mlp_unit(0)];
  o.mlp = {find_offset(m, "fcw"),  find_offset(m, "fcprojw"), find_offset(m, "ln2w"),
           find_offset(m, "ln2b"), find_offset(m, "fcb"),     find_offset(m, "fcprojb")};
  o.lnfw = find_offset(us[lnf_unit(cfg)], "lnfw");
  o.lnfb = find_offset(us[lnf_unit(cfg)], "lnfb");
  return o;
}

}  // namespace gpt2
