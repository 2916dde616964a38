// crc32c.cpp: see crc32c.hpp. Reflected polynomial 0x82F63B78, init and final xor ~0.
// defines: train::Crc32c, train::crc32c
#include "crc32c.hpp"

#include <array>

namespace train {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> table = make_table();

}  // namespace

void Crc32c::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = state_;
  for (size_t i = 0; i < bytes; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  state_ = c;
}

uint32_t crc32c(const void* data, size_t bytes) {
  Crc32c c;
  c.update(data, bytes);
  return c.value();
}

}  // namespace train
