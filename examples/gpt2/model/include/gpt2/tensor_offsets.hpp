#pragma once
// defines: gpt2::AttnOffsets, gpt2::MlpOffsets, gpt2::TensorOffsets, gpt2::tensor_offsets,
// gpt2::find_offset — where each tensor the forward and backward passes read sits inside
// its unit (elements from the unit's start, see layout.hpp). Every layer's attention unit
// has the same layout, and so has every MLP unit, so layer 0's offsets serve all layers.
// Model<Real> and DeviceModel<Exec> both take their offsets from here, so the two models
// cannot disagree on where a tensor is.
#include "gpt2/config.hpp"
#include "gpt2/layout.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace gpt2 {

struct AttnOffsets { size_t attprojw, ln1w, ln1b, qkvw, qkvb, attprojb; };
struct MlpOffsets { size_t fcw, fcprojw, ln2w, ln2b, fcb, fcprojb; };

struct TensorOffsets {
  size_t wpe = 0;      // in the embed unit (wte starts it, at 0)
  AttnOffsets attn{};  // in every attention unit
  MlpOffsets mlp{};    // in every MLP unit
  size_t lnfw = 0, lnfb = 0;  // in the lnf unit
};

// us = units(cfg). Throws std::logic_error when a tensor is missing (a layout bug).
TensorOffsets tensor_offsets(const Config& cfg, const std::vector<UnitInfo>& us);

// The offset of u's tensor named `name` (llm.c's name without the "h<l>." prefix of a
// layer); std::logic_error naming the unit when it has none.
size_t find_offset(const UnitInfo& u, const std::string& name);

}  // namespace gpt2
