#pragma once
// defines: tagc::murmur3_32 — MurmurHash3_x86_32 of one 32-bit key.
//
// The count sketch hashes *block numbers* (not elements), so one hash serves a
// whole block of lanes and memory access stays coalesced. The reference design
// uses MurmurHash3_x86_32 of the 4-byte block number with seeds 0, 1, 2; this is
// that function specialised to a 4-byte key (one body round, no tail).

#include <cstdint>

#include "config.hpp"

TAGC_BEGIN_NAMESPACE

TAGC_HOST_DEVICE constexpr std::uint32_t rotl32(std::uint32_t x, int r) noexcept {
  return (x << r) | (x >> (32 - r));
}

TAGC_HOST_DEVICE constexpr std::uint32_t murmur3_32(std::uint32_t key, std::uint32_t seed) noexcept {
  constexpr std::uint32_t c1 = 0xcc9e2d51u;
  constexpr std::uint32_t c2 = 0x1b873593u;
  std::uint32_t k = key * c1;
  k = rotl32(k, 15);
  k *= c2;
  std::uint32_t h = seed ^ k;
  h = rotl32(h, 13);
  h = h * 5u + 0xe6546b64u;
  h ^= 4u;  // length in bytes
  // fmix32
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

TAGC_END_NAMESPACE
