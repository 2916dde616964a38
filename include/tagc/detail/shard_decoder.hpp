#pragma once
// defines: tagc::detail::shard_decoder_for<Exec> — which implementation decodes
//          the owner's shard on an execution space (dispatch per space, as Thrust
//          and CUB do: one algorithm, one implementation per system).
//
//   exec::host   host::shard_decoder (detail/host/peel.hpp): support list from
//                index words in parallel chunks, peeling by a sweep + queue
//   anything     portable_decoder<Exec> (detail/portable_decode.hpp): bulk
//   else         launches of the single-source functors (what a GPU runs)
//
// Both take the same arguments and leave the same results (the resolved set and
// counts identical, values within float tolerance: tests/test_decode_paths.cpp).

#include "../exec/host.hpp"
#include "host/peel.hpp"
#include "portable_decode.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

template <class Exec>
struct shard_decoder_for {
  using type = portable_decoder<Exec>;
};
template <>
struct shard_decoder_for<exec::host> {
  using type = host::shard_decoder;
};
template <class Exec>
using shard_decoder_t = typename shard_decoder_for<Exec>::type;

}  // namespace detail
TAGC_END_NAMESPACE
