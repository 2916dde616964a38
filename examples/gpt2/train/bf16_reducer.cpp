// bf16_reducer.cpp: the tagc::Reducer instantiations whose values travel in bf16 —
// PackedBf16Policy: the union values rounded to bf16, each rank's rounding error kept in
// its residual (include/tagc/policy/packed.hpp). Apart from unit_reducer.cpp so the two
// slow translation units build in parallel.
// defines: train::make_tagc_bf16_reducer
#include "tagc_unit_reducer.hpp"

#include <stdexcept>

namespace train {

std::unique_ptr<UnitReducer> make_tagc_bf16_reducer(const CompressOptions& o, size_t length, int world, int rank) {
  if (o.values == ValuesMode::packed_bf16) return make_packed_unit<tagc::PackedBf16Policy>(o, length, world, rank);
  throw std::logic_error(std::string("make_tagc_bf16_reducer: --values ") + to_string(o.values) + " is not bf16");
}

}  // namespace train
