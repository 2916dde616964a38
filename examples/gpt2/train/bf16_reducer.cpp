// bf16_reducer.cpp: the tagc::Reducer instantiations whose values travel in 16 bits —
//  - PackedBf16Policy: the union values rounded to bf16, each rank's rounding error kept
//    in its residual (include/tagc/policy/packed.hpp);
//  - SketchPolicy<10, 1024, bfloat16 | float16>: the sketch cells in bf16 or fp16, each
//    value's own rounding kept in the residual, the cell's sum rounding measured
//    (include/tagc/policy/sketch.hpp), with the paper's 1-bit index or the exact
//    reduce-scattered one.
// Apart from unit_reducer.cpp so the two slow translation units build in parallel.
// defines: train::make_tagc_bf16_reducer
#include "tagc_unit_reducer.hpp"

#include <stdexcept>

namespace train {

namespace {

template <class Value>
std::unique_ptr<UnitReducer> sketch_16bit(const CompressOptions& o, size_t n, int w, int r) {
  using V = tagc::SketchPolicy<10, 1024, Value>;
  constexpr auto M = tagc::decode_mode::peel_then_estimate;
  if (o.index_bits == 1) return make_unit<tagc::IndexPolicy<1>, V, M>(o, n, w, r);
  return make_unit<tagc::IndexPolicy<tagc::index_auto, tagc::index_exchange::reduce_scatter>, V, M>(o, n, w, r);
}

}  // namespace

std::unique_ptr<UnitReducer> make_tagc_bf16_reducer(const CompressOptions& o, size_t length, int world, int rank) {
  if (o.values == ValuesMode::packed_bf16) return make_packed_unit<tagc::PackedBf16Policy>(o, length, world, rank);
  if (o.values == ValuesMode::sketch_bf16) return sketch_16bit<tagc::bfloat16>(o, length, world, rank);
  if (o.values == ValuesMode::sketch_fp16) return sketch_16bit<tagc::float16>(o, length, world, rank);
  throw std::logic_error(std::string("make_tagc_bf16_reducer: --values ") + to_string(o.values) + " is not bf16");
}

}  // namespace train
