// unit_reducer.cpp: the float-valued tagc::Reducer instantiations, the catalogue of
// built combinations, and the dispatch from CompressOptions to a type.
// Keep every float instantiation in this one file: each pulls in the whole Thrust pipeline.
// defines: train::make_tagc_reducer, train::unbuilt_combination, train::built_combinations,
//          train::compress_options
#include "tagc_unit_reducer.hpp"

#include <stdexcept>

namespace train {

CompressOptions compress_options(const Args& a) {
  CompressOptions o;
  o.values = a.values;
  o.ratio = a.ratio;
  o.index_bits = a.index_bits;
  o.index_exchange = a.index_exchange;
  o.decoder = a.decoder;
  o.sparsity = a.sparsity;
  o.adaptive = a.adaptive;
  o.target_load = a.target_load;
  o.sparsity_warmup = a.sparsity_warmup;
  o.sparsity_linear = a.sparsity_linear;
  o.sparsity_start = a.sparsity_start;
  return o;
}

// The set: the paper's grid (sketch, 1|4-bit all-reduced index, every ratio and
// decoder: 18); the exact index reduce-scattered (half the index bytes) at the two
// useful ratios with the default decoder (2); 16-bit sketch cells (bf16, fp16) at 10x
// with the default decoder and either the paper's index or the exact reduce-scattered
// one (4, bf16_reducer.cpp); packed values in fp32 and bf16 with the exact all-reduced
// index (2). Left out on purpose: the exact index all-reduced with a
// sketch (at 2 ranks it is the 1-bit index, at 4-15 the 4-bit one, both built) and
// packed values with the 1-bit index (exact only at 2 ranks, where it equals "exact").
// Other combinations compile just as well; add them here and in the dispatch below
// when a measurement needs them.
std::string built_combinations() {
  return "built: --values sketch --index-bits 1|4 --index-exchange all-reduce (any --ratio, any --decoder); "
         "--values sketch --index-bits exact --index-exchange reduce-scatter --ratio 4|10 --decoder peel-estimate; "
         "--values sketch-bf16|sketch-fp16 --ratio 10 --decoder peel-estimate with --index-bits 1 --index-exchange "
         "all-reduce or --index-bits exact --index-exchange reduce-scatter; "
         "--values packed|packed-bf16 --index-bits exact --index-exchange all-reduce (--ratio and --decoder "
         "unused, no --adaptive)";
}

std::string unbuilt_combination(const CompressOptions& o) {
  const std::string what = std::string("--values ") + to_string(o.values) + " --index-bits " +
                           index_bits_name(o.index_bits) + " --index-exchange " + to_string(o.index_exchange);
  const auto refuse = [&](const std::string& why) { return what + ": " + why + " (" + built_combinations() + ")"; };
  const bool exact = o.index_bits == index_bits_exact;
  const bool scatter = o.index_exchange == IndexExchange::reduce_scatter;
  if (o.values == ValuesMode::sketch_bf16 || o.values == ValuesMode::sketch_fp16) {
    if (!(o.index_bits == 1 && !scatter) && !(exact && scatter))
      return refuse("16-bit sketch cells are built with --index-bits 1 --index-exchange all-reduce or "
                    "--index-bits exact --index-exchange reduce-scatter");
    if (o.ratio != 10) return refuse("--ratio " + std::to_string(o.ratio) + " is not built with it");
    if (o.decoder != DecoderMode::peel_estimate)
      return refuse(std::string("--decoder ") + to_string(o.decoder) + " is not built with it");
    return {};
  }
  if (o.values == ValuesMode::sketch) {
    if (!exact && scatter) return refuse("the reduce-scatter index exchange needs --index-bits exact");
    if (exact && !scatter) return refuse("the exact index is built with --index-exchange reduce-scatter only");
    if (!exact) return {};
    if (o.ratio != 4 && o.ratio != 10) return refuse("--ratio " + std::to_string(o.ratio) + " is not built with it");
    if (o.decoder != DecoderMode::peel_estimate)
      return refuse(std::string("--decoder ") + to_string(o.decoder) + " is not built with it");
    return {};
  }
  // packed values: no sketch, so nothing for adaptive theta to steer
  if (o.adaptive) return refuse("--adaptive steers the sketch load; packed values have no sketch");
  if (!exact) return refuse("packed values are built with --index-bits exact");
  if (scatter) return refuse("packed values need the whole reduced index on every rank: use --index-exchange all-reduce");
  return {};
}

namespace {

using tagc::decode_mode;

template <class Index, int Ratio>
std::unique_ptr<UnitReducer> sketch_by_mode(const CompressOptions& o, size_t n, int w, int r) {
  using V = tagc::SketchPolicy<Ratio>;
  switch (o.decoder) {
    case DecoderMode::peel: return make_unit<Index, V, decode_mode::peel>(o, n, w, r);
    case DecoderMode::estimate: return make_unit<Index, V, decode_mode::estimate>(o, n, w, r);
    case DecoderMode::peel_estimate: return make_unit<Index, V, decode_mode::peel_then_estimate>(o, n, w, r);
  }
  throw std::logic_error("unknown decoder");
}

template <int Bits>
std::unique_ptr<UnitReducer> sketch_by_ratio(const CompressOptions& o, size_t n, int w, int r) {
  using I = tagc::IndexPolicy<Bits>;
  switch (o.ratio) {
    case 2: return sketch_by_mode<I, 2>(o, n, w, r);
    case 4: return sketch_by_mode<I, 4>(o, n, w, r);
    case 10: return sketch_by_mode<I, 10>(o, n, w, r);
  }
  throw std::runtime_error("sketch ratio " + std::to_string(o.ratio) + " not built (expected 2, 4 or 10)");
}

// The exact index, reduce-scattered: each shard's owner alone gets its summed index.
std::unique_ptr<UnitReducer> sketch_exact_scattered(const CompressOptions& o, size_t n, int w, int r) {
  using I = tagc::IndexPolicy<tagc::index_auto, tagc::index_exchange::reduce_scatter>;
  constexpr auto M = decode_mode::peel_then_estimate;
  if (o.ratio == 4) return make_unit<I, tagc::SketchPolicy<4>, M>(o, n, w, r);
  return make_unit<I, tagc::SketchPolicy<10>, M>(o, n, w, r);
}

}  // namespace

std::unique_ptr<UnitReducer> make_tagc_reducer(const CompressOptions& o, size_t length, int world, int rank) {
  if (const std::string why = unbuilt_combination(o); !why.empty()) throw std::runtime_error(why);
  switch (o.values) {
    case ValuesMode::sketch:
      if (o.index_bits == 1) return sketch_by_ratio<1>(o, length, world, rank);
      if (o.index_bits == 4) return sketch_by_ratio<4>(o, length, world, rank);
      return sketch_exact_scattered(o, length, world, rank);
    case ValuesMode::packed: return make_packed_unit<tagc::PackedPolicy>(o, length, world, rank);
    case ValuesMode::packed_bf16:
    case ValuesMode::sketch_bf16:
    case ValuesMode::sketch_fp16: return make_tagc_bf16_reducer(o, length, world, rank);
  }
  throw std::logic_error("unknown --values");
}

}  // namespace train
