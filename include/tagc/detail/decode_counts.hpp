#pragma once
// defines: tagc::detail::decode_counts — what one decode of a shard found; every
//          shard decoder returns it from counters it already holds (no rescan).

#include <cstddef>

#include "../core/config.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

struct decode_counts {
  std::size_t support = 0;     // entries the reduced index marks in the shard
  std::size_t peeled = 0;      // resolved exactly
  std::size_t unresolved = 0;  // left to the estimate (and retransmitted)
};

}  // namespace detail
TAGC_END_NAMESPACE
