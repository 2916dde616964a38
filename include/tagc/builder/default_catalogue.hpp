#pragma once
// defines: tagc::default_paper_catalogue<Exec>, tagc::default_beyond_catalogue<Exec>,
//          tagc::default_catalogue<Exec> — the reducers a general-purpose program
//          (the GPT-2 trainers) builds; TAGC_DEFAULT_REDUCER_CATALOGUE;
//          tagc::reducer_list_cat, tagc::reducer_list_where (a subset by rule: the
//          Python package's catalogue).
//
// Two parts, so a program can compile them in two translation units at once (each
// Reducer costs several seconds of compile):
//   paper  (18) sketch fp32 values, index 1|4 all-reduced, ratio 2|4|10, every decoder
//   beyond (17) the exact index reduce-scattered (sketch ratio 4|10); 16-bit sketch
//               cells (bf16, fp16; ratio 10; paper index or exact reduce-scattered);
//               packed values fp32|bf16|fp16 (exact index all-reduced); packed fp32|bf16
//               with the shared and the pooled index (no union, bytes independent
//               of N); the bf16
//               residual with the paper config and with the lean stack (bf16 cells,
//               exact reduce-scattered index); the plain fp32 and bf16 baselines.
// Left out on purpose: the exact index all-reduced with a sketch (at 2 ranks it is
// the 1-bit index, at 3-15 the 4-bit one, both built) and packed values with the
// 1-bit index (exact only at 2 ranks, where it equals "exact"). Any other
// combination compiles just as well: list it in your own catalogue.
//
// Adding an entry: one line below (the description is derived from the type).

#include <type_traits>

#include "../plain_reducer.hpp"
#include "../policy/decode.hpp"
#include "../policy/index.hpp"
#include "../policy/packed.hpp"
#include "../policy/sketch.hpp"
#include "../policy/sparsify.hpp"
#include "../reducer.hpp"
#include "../shared_reducer.hpp"
#include "catalogue.hpp"
#include "description_of.hpp"

TAGC_BEGIN_NAMESPACE

namespace catalogue_parts {
template <class E, int Bits, int Ratio, decode_mode M>
using paper_sketch = Reducer<SparsifyPolicy, IndexPolicy<Bits>, SketchPolicy<Ratio>, DecodePolicy<M>, E>;
template <class E, int Bits, int Ratio>
using paper_sketch_any_decoder =
    reducer_list<paper_sketch<E, Bits, Ratio, decode_mode::peel>, paper_sketch<E, Bits, Ratio, decode_mode::estimate>,
                 paper_sketch<E, Bits, Ratio, decode_mode::peel_then_estimate>>;
using exact_scattered = IndexPolicy<index_auto, index_exchange::reduce_scatter>;

template <class... L> struct concat;
template <class... A> struct concat<reducer_list<A...>> { using type = reducer_list<A...>; };
template <class... A, class... B, class... L>
struct concat<reducer_list<A...>, reducer_list<B...>, L...> : concat<reducer_list<A..., B...>, L...> {};
}  // namespace catalogue_parts

// The concatenation of reducer_lists.
template <class... L>
using reducer_list_cat = typename catalogue_parts::concat<L...>::type;

namespace catalogue_parts {
template <class List, auto Keep> struct where;
template <class... R, auto Keep>
struct where<reducer_list<R...>, Keep> {
  using type = reducer_list_cat<reducer_list<>,
                                std::conditional_t<Keep(description_of<R>()), reducer_list<R>, reducer_list<>>...>;
};
}  // namespace catalogue_parts

// The types of List whose description Keep (a constexpr bool(const reducer_description&))
// keeps, in List's order: a program's subset of a catalogue, chosen by rule rather than
// listed again (nothing is instantiated to choose).
template <class List, auto Keep>
using reducer_list_where = typename catalogue_parts::where<List, Keep>::type;

template <class E>
using default_paper_catalogue = reducer_list_cat<
    catalogue_parts::paper_sketch_any_decoder<E, 1, 2>, catalogue_parts::paper_sketch_any_decoder<E, 1, 4>,
    catalogue_parts::paper_sketch_any_decoder<E, 1, 10>, catalogue_parts::paper_sketch_any_decoder<E, 4, 2>,
    catalogue_parts::paper_sketch_any_decoder<E, 4, 4>, catalogue_parts::paper_sketch_any_decoder<E, 4, 10>>;

template <class E>
using default_beyond_catalogue = reducer_list<
    Reducer<SparsifyPolicy, catalogue_parts::exact_scattered, SketchPolicy<4>, DecodePolicy<>, E>,
    Reducer<SparsifyPolicy, catalogue_parts::exact_scattered, SketchPolicy<10>, DecodePolicy<>, E>,
    Reducer<SparsifyPolicy, IndexPolicy<1>, SketchBf16Policy<10>, DecodePolicy<>, E>,
    Reducer<SparsifyPolicy, catalogue_parts::exact_scattered, SketchBf16Policy<10>, DecodePolicy<>, E>,
    Reducer<SparsifyPolicy, IndexPolicy<1>, SketchFp16Policy<10>, DecodePolicy<>, E>,
    Reducer<SparsifyPolicy, catalogue_parts::exact_scattered, SketchFp16Policy<10>, DecodePolicy<>, E>,
    PackedReducer<SparsifyPolicy, ExactIndexPolicy, PackedPolicy, E>,
    PackedReducer<SparsifyPolicy, ExactIndexPolicy, PackedBf16Policy, E>,
    PackedReducer<SparsifyPolicy, ExactIndexPolicy, PackedFp16Policy, E>,
    PackedReducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy, E>,
    PackedReducer<SparsifyPolicy, SharedIndexPolicy, PackedBf16Policy, E>,
    PackedReducer<SparsifyPolicy, PooledIndexPolicy, PackedPolicy, E>,
    PackedReducer<SparsifyPolicy, PooledIndexPolicy, PackedBf16Policy, E>,
    PackedReducer<SparsifyPolicy, GatheredIndexPolicy, PackedPolicy, E>,
    PackedReducer<SparsifyPolicy, GatheredIndexPolicy, PackedBf16Policy, E>,
    PackedReducer<SparsifyPolicy, RoutedIndexPolicy, PackedPolicy, E>,
    PackedReducer<SparsifyPolicy, RoutedIndexPolicy, PackedBf16Policy, E>,
    Reducer<SparsifyBf16ResidualPolicy, IndexPolicy<1>, SketchPolicy<10>, DecodePolicy<>, E>,
    Reducer<SparsifyBf16ResidualPolicy, catalogue_parts::exact_scattered, SketchBf16Policy<10>, DecodePolicy<>, E>,
    PlainReducer<float, E>,
    PlainReducer<bfloat16, E>>;

template <class E>
using default_catalogue = reducer_list_cat<default_paper_catalogue<E>, default_beyond_catalogue<E>>;

TAGC_END_NAMESPACE

// The whole default catalogue in this translation unit, as `NAME()`.
#define TAGC_DEFAULT_REDUCER_CATALOGUE(NAME, EXEC, COMM) \
  TAGC_REDUCER_CATALOGUE(NAME, EXEC, COMM, ::tagc::default_catalogue<EXEC>)
