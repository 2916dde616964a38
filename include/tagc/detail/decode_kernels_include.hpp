#pragma once
// defines: nothing of its own — includes the decode functors (decode_view, the
//          entry states, conservative_estimate, the sketch hashes) under tagc::detail
//          wherever they live in this tree.
#if __has_include("decode_kernels.hpp")
#  include "decode_kernels.hpp"
#else  // before the stage split the functors are public, in policy/ (tagc::kernels)
#  include "../policy/decode.hpp"
TAGC_BEGIN_NAMESPACE
namespace detail { using namespace ::tagc::kernels; }
TAGC_END_NAMESPACE
#endif
