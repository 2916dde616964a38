// crc32c.hpp: CRC-32C (Castagnoli, the iSCSI / ext4 / Btrfs checksum) of byte ranges,
// incrementally. Used for the checkpoint files' per-section checksums and the manifest's
// whole-file ones.
//
// Our own small table-driven implementation (one 256-entry table, a byte at a time,
// ~0.5 GB/s): Debian's archive as reachable here has no C/C++ CRC32C library
// (apt-cache search crc32c finds only python3-crc32c), and a checkpoint is written
// once every few steps, so the speed is ample (d12's 1.5 GB state: ~3 s per save
// spread over the ranks).
// defines: train::crc32c, train::Crc32c
#pragma once

#include <cstddef>
#include <cstdint>

namespace train {

// Running CRC-32C: update() any number of times, value() at any point.
class Crc32c {
 public:
  void update(const void* data, size_t bytes);
  uint32_t value() const { return ~state_; }

 private:
  uint32_t state_ = 0xFFFFFFFFu;
};

// CRC-32C of one range ("123456789" -> 0xE3069283, the standard check value).
uint32_t crc32c(const void* data, size_t bytes);

}  // namespace train
