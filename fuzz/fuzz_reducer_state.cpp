// fuzz_reducer_state.cpp: libFuzzer target — tagc::Reducer::load_state on arbitrary
// bytes (the reducer state inside every checkpoint). Any input must be refused with a
// status or load a state whose theta is in [0, 1]; no crash, no UB (ASan + UBSan catch
// the float-to-integer and signed overflows of a bad theta or feedback word).
// defines: LLVMFuzzerTestOneInput
#include "tagc/tagc.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace {
using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchPolicy<10>,
                        tagc::DecodePolicy<tagc::decode_mode::peel_then_estimate>>;

R& reducer() {
  static R r = [] {
    R x;
    tagc::reducer_arguments a;
    a.length = 64;  // small: the seed states are ~400 bytes
    a.world_size = 2;
    a.rank = 1;
    a.topo = tagc::topology::sharded;
    a.op = tagc::reduce_op::mean;
    if (!x.initialize(a).ok()) __builtin_trap();
    return x;
  }();
  return r;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  R& r = reducer();
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  if (r.load_state(in).ok()) {
    // accepted: what it restored must be in range (issue 14: theta NaN, inf, 2, -1 and
    // out-of-range feedback words were accepted before load_state validated them)
    const double theta = r.sparsity();
    if (!(theta >= 0.0 && theta <= 1.0)) __builtin_trap();
  }
  return 0;
}
