#pragma once
// defines: tagc::detail::select_impl_t, residual_impl_t, packed_impl_t,
//          sketch_builder_t, pair_repair_t and shared_select_impl_t — which implementation runs the compress side on an
//          execution space (dispatch per space, as shard_decoder.hpp does for
//          decode, and Thrust and CUB do: one algorithm, one implementation per
//          system). The stages (stage/select.hpp, index.hpp, residual.hpp,
//          values_packed.hpp, values_sketch.hpp) hold one and forward to it;
//          none branches on the space.
//
//                 threshold select + marks       residual storage + commit
//   exec::host    host::threshold_select         host::residual_store
//                 (host/threshold_select.hpp):   (host/residual_store.hpp): the
//                 acc once per call, a sampled   float residual becomes acc, kept
//                 bracket, marks in the same     entries settled from the list
//                 pass, the kept entries listed
//   anything      portable_select                portable_residual
//   else          (portable_select.hpp): the     (portable_residual.hpp): one
//                 radix select's launches        functor per entry
//
//                 packed values                  sketch cells from the kept list
//   exec::host    host::packed_values            host_sketch_builder
//                 (host/packed_slots.hpp): slots (host_compress.hpp): 1-10 % of
//                 from index words, values from  the entries; else the gather
//                 the kept list                  build (values_sketch.hpp)
//   else          portable_packed                portable_sketch_builder (none:
//                 (portable_packed.hpp): a scan  the gather build, what a GPU
//                 over index bytes, a launch     runs)
//                 per byte
//
//                 the shared selection's leader marks and position lists
//   exec::host    host::shared_select (host/shared_select.hpp): the threshold
//                 marker's sampled bracket on the bitmap as a 1-bit index; the
//                 lists by support_list
//   else          portable_shared_select (portable_shared_select.hpp): the radix
//                 select's launches, a launch per bitmap word
//
// Both take the same arguments (detail/compress_handoff.hpp) and leave the same
// threshold, marks, counts and residual, bit for bit (tests/test_paths.cpp holds
// exec::host to exec::host_portable, the host system running the portable column).

#include <cstdint>
#include <type_traits>

#include "../core/config.hpp"
#include "host/packed_slots.hpp"
#include "host/residual_store.hpp"
#include "host/shared_select.hpp"
#include "host/threshold_select.hpp"
#include "host_compress.hpp"
#include "host_paths.hpp"
#include "portable_packed.hpp"
#include "portable_residual.hpp"
#include "portable_select.hpp"
#include "portable_shared_select.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

template <class Residual, class Exec>
using select_impl_t = std::conditional_t<uses_host_paths<Exec>, host::threshold_select<Residual>,
                                         portable_select<Residual, Exec>>;

template <class Residual, class Exec>
using residual_impl_t = std::conditional_t<uses_host_paths<Exec>, host::residual_store<Residual>,
                                           portable_residual<Residual, Exec>>;

template <class Wire, class Exec>
using packed_impl_t = std::conditional_t<uses_host_paths<Exec>, host::packed_values<Wire>, portable_packed<Wire, Exec>>;

// The portable sketch needs no list: the stage's gather build reads g + residual.
struct portable_sketch_builder {
  template <class Wire>
  static bool from_kept(const kept_entries&, const layout&, const std::uint8_t*, float*, float) { return false; }
};
// The 1-bit index's repair at two ranks: one functor call per byte.
struct portable_pair_repair {
  template <class Exec>
  static void run(const launcher<Exec>& launch, const std::uint8_t* mine, std::uint8_t* summed, std::size_t bytes) {
    launch(bytes, repair_pair_index{mine, summed});
  }
};
template <class Exec>
using pair_repair_t = std::conditional_t<uses_host_paths<Exec>, host_pair_repair, portable_pair_repair>;

template <class Exec>
using shared_select_impl_t = std::conditional_t<uses_host_paths<Exec>, host::shared_select, portable_shared_select<Exec>>;

template <class Exec>
using sketch_builder_t = std::conditional_t<uses_host_paths<Exec>, host_sketch_builder, portable_sketch_builder>;

}  // namespace detail
TAGC_END_NAMESPACE
