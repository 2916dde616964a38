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
template <class T> inline constexpr wire_type wire_type_of =
    std::is_same_v<T, float> ? wire_type::fp32 : std::is_same_v<T, bfloat16> ? wire_type::bf16 : wire_type::fp16;
// The kind of a values policy of `family` sending T: its row in values_kinds (description.hpp).
template <values_family Family, class T>
constexpr values_kind kind_of() {
  constexpr wire_type wire = wire_type_of<T>;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>,
                "tagc: description_of: a values policy's element type is float, tagc::bfloat16 or tagc::float16");
  // An index, not a pointer: GCC cannot compare a pointer into a static table with null in a
  // constant expression when UBSan instruments it (-fsanitize=undefined, CI's sanitizer stage).
  constexpr int row = [] {
    for (std::size_t i = 0; i < std::size(values_kinds); ++i)
      if (values_kinds[i].family == Family && values_kinds[i].wire == wire) return int(i);
    return -1;
  }();
  static_assert(row >= 0, "tagc: description_of: no row in values_kinds (builder/description.hpp) for this "
                          "values policy's family and element type: add its kind and row there");
  return values_kinds[row].value;
}
template <class T> inline constexpr residual_kind residual_of = std::is_same_v<T, float> ? residual_kind::fp32 : residual_kind::bf16;

template <class R> struct describes {
  static_assert(tagc_dependent_false<R>, "tagc: description_of<R>: R is a tagc::Reducer<...> or tagc::PlainReducer<...>");
};
template <class Res, int Bits, index_exchange IX, int Ratio, int Lanes, class T, decode_mode M, class E>
struct describes<Reducer<BasicSparsifyPolicy<Res>, IndexPolicy<Bits, IX>, SketchPolicy<Ratio, Lanes, T>, DecodePolicy<M>, E>> {
  static constexpr reducer_description value{kind_of<values_family::sketch, T>(), Ratio, Lanes, Bits, IX, M, residual_of<Res>};
};
template <class Res, int Bits, index_exchange IX, class T, decode_mode M, class E>
struct describes<Reducer<BasicSparsifyPolicy<Res>, IndexPolicy<Bits, IX>, PackedValuesPolicy<T>, DecodePolicy<M>, E>> {
  static constexpr reducer_description value = [] {
    reducer_description d;
    d.values = kind_of<values_family::packed, T>();
    d.index_bits = Bits;
    d.exchange = IX;
    d.residual = residual_of<Res>;
    return d;
  }();
};
template <class Res, shared_pick P, class T, decode_mode M, class E>
struct describes<Reducer<BasicSparsifyPolicy<Res>, BasicSharedIndexPolicy<P>, PackedValuesPolicy<T>, DecodePolicy<M>, E>> {
  static constexpr reducer_description value = [] {
    reducer_description d;
    d.values = kind_of<values_family::packed, T>();
    d.index_bits = P == shared_pick::pooled     ? index_pooled
                   : P == shared_pick::gathered ? index_gathered
                   : P == shared_pick::routed   ? index_routed
                                                : index_shared;
    d.residual = residual_of<Res>;
    return d;
  }();
};
template <class W, class E> struct describes<PlainReducer<W, E>> {
  static constexpr reducer_description value{kind_of<values_family::plain, W>()};
};
}  // namespace detail

// The (normalized) description of a reducer type.
template <class R>
constexpr reducer_description description_of() {
  return detail::describes<R>::value;
}

TAGC_END_NAMESPACE
