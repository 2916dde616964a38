#pragma once
// defines: tagc::index_exchange, tagc::index_auto, tagc::decode_mode — the values of
//          the policies' compile-time choices (IndexPolicy<Bits, Exchange>,
//          DecodePolicy<Mode>), apart from the policies so that the builder's light
//          header (builder.hpp) can name them without pulling a kernel.

#include "../core/config.hpp"

TAGC_BEGIN_NAMESPACE

// How the index counters travel: all-reduced (every rank holds the whole reduced index)
// or reduce-scattered (each owner only its shard's; policy/index.hpp).
enum class index_exchange { all_reduce, reduce_scatter };
// IndexPolicy<index_auto> (ExactIndexPolicy): the narrowest exact width for the world size.
inline constexpr int index_auto = 0;
// How an owner recovers its shard from a summed sketch (policy/decode.hpp).
enum class decode_mode { peel, estimate, peel_then_estimate };

TAGC_END_NAMESPACE
