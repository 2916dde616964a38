#pragma once
// defines: gpt2::TensorInfo, gpt2::UnitInfo, gpt2::units — how parameters are grouped
// into the contiguous flat buffers ("units") that the sharded trainer gathers and
// reduce-scatters one at a time.
//
// Unit order (also the forward order; backward is the reverse):
//   unit 0          "embed"  : wte [Vp,C] | wpe [maxT,C]
//   unit 1 + 2l     "attn.l" : h<l>.attprojw [C,C] | h<l>.ln1w, ln1b [C], qkvw [3C,C], qkvb [3C], attprojb [C]
//   unit 2 + 2l     "mlp.l"  : h<l>.fcw [4C,C], h<l>.fcprojw [C,4C] | ln2w, ln2b [C], fcb [4C], fcprojb [C]
//   unit 2L + 1     "lnf"    : lnfw, lnfb [C]
// Inside every unit the compressible tensors (large non-attention linear weights, the
// layer selection of the TAGC paper) come first and contiguously: elements
// [0, compressible_size) are the compressible segment, [compressible_size, size) the
// plain one. Tensor names are llm.c's ("wte", "h3.fcw", "lnfw", ...).
// The flat layout used by the whole-model helpers is the units concatenated in order.
#include "gpt2/config.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace gpt2 {

struct TensorInfo {
  std::string name;        // llm.c name, per layer prefixed "h<l>."
  std::vector<int> shape;  // row-major; linear weights are [out, in] (out = inp @ W^T)
  size_t offset;           // elements from the start of the unit
  size_t size;             // elements
  bool compressible;
};

struct UnitInfo {
  std::string name;          // "embed", "attn.<l>", "mlp.<l>", "lnf"
  size_t size;               // elements
  size_t compressible_size;  // elements of the leading compressible segment
  std::vector<TensorInfo> tensors;
};

// Validates cfg. The returned units are in forward order.
std::vector<UnitInfo> units(const Config& cfg);

inline int num_units(const Config& cfg) { return 2 * cfg.num_layers + 2; }
inline int attn_unit(int layer) { return 1 + 2 * layer; }
inline int mlp_unit(int layer) { return 2 + 2 * layer; }
inline int lnf_unit(const Config& cfg) { return 2 * cfg.num_layers + 1; }

// Start of each unit in the flat (concatenated) layout; one extra entry = total.
std::vector<size_t> unit_offsets(const std::vector<UnitInfo>& us);
// Number of parameters, equal to llm.c's (padded-vocab) count.
size_t num_parameters(const Config& cfg);

}  // namespace gpt2
