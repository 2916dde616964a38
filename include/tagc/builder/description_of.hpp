#pragma once
// defines: tagc::description_of<R>() — the (normalized) description of a compile-time
//          reducer type: what a catalogue entry (catalogue.hpp) is found by, derived
//          from the type so that the two cannot disagree.
//
// The builder's heavy half: it names every reducer template (and with them the stages
// and kernels), so only the translation units that instantiate a catalogue include it.

#include <type_traits>

#include "../core/bfloat16.hpp"
#include "../core/float16.hpp"
#include "../plain_reducer.hpp"
#include "../policy/decode.hpp"
#include "../policy/index.hpp"
#include "../policy/packed.hpp"
#include "../policy/sketch.hpp"
#include "../policy/sparsify.hpp"
#include "../reducer.hpp"
#include "../shared_reducer.hpp"
#include "description.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail {
template <class T> inline constexpr values_kind sketch_kind =
    std::is_same_v<T, float> ? values_kind::sketch : std::is_same_v<T, bfloat16> ? values_kind::sketch_bf16 : values_kind::sketch_fp16;
template <class T> inline constexpr values_kind packed_kind =
    std::is_same_v<T, float> ? values_kind::packed : std::is_same_v<T, bfloat16> ? values_kind::packed_bf16 : values_kind::packed_fp16;
template <class T> inline constexpr residual_kind residual_of = std::is_same_v<T, float> ? residual_kind::fp32 : residual_kind::bf16;

template <class R> struct describes {
  static_assert(tagc_dependent_false<R>, "tagc: description_of<R>: R is a tagc::Reducer<...> or tagc::PlainReducer<...>");
};
template <class Res, int Bits, index_exchange IX, int Ratio, int Lanes, class T, decode_mode M, class E>
struct describes<Reducer<BasicSparsifyPolicy<Res>, IndexPolicy<Bits, IX>, SketchPolicy<Ratio, Lanes, T>, DecodePolicy<M>, E>> {
  static constexpr reducer_description value{sketch_kind<T>, Ratio, Lanes, Bits, IX, M, residual_of<Res>};
};
template <class Res, int Bits, index_exchange IX, class T, decode_mode M, class E>
struct describes<Reducer<BasicSparsifyPolicy<Res>, IndexPolicy<Bits, IX>, PackedValuesPolicy<T>, DecodePolicy<M>, E>> {
  static constexpr reducer_description value = [] {
    reducer_description d;
    d.values = packed_kind<T>;
    d.index_bits = Bits;
    d.exchange = IX;
    d.residual = residual_of<Res>;
    return d;
  }();
};
template <class Res, class T, decode_mode M, class E>
struct describes<Reducer<BasicSparsifyPolicy<Res>, SharedIndexPolicy, PackedValuesPolicy<T>, DecodePolicy<M>, E>> {
  static constexpr reducer_description value = [] {
    reducer_description d;
    d.values = packed_kind<T>;
    d.index_bits = index_shared;
    d.residual = residual_of<Res>;
    return d;
  }();
};
template <class W, class E> struct describes<PlainReducer<W, E>> {
  static constexpr reducer_description value{std::is_same_v<W, float> ? values_kind::plain_fp32 : values_kind::plain_bf16};
};
}  // namespace detail

// The (normalized) description of a reducer type.
template <class R>
constexpr reducer_description description_of() {
  return detail::describes<R>::value;
}

TAGC_END_NAMESPACE
