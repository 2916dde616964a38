#pragma once
// defines: tagc::detail::host::compact_cell, tagc::detail::host::wide_cell — the
//          two layouts of a sketch cell's peeling record (detail/host/peel.hpp).
//
// Peeling on the CPU is bound by cache misses on these records: every entry
// peeled reads and writes its three cells, in random order. A record holds what
// peeling needs of a cell: how many of its entries are not peeled yet, whether a
// peel has subtracted from it (the sweep takes only cells nobody touched), the
// XOR of its entries' support positions (a lone cell names its entry) and its
// value less what was peeled from it.
//
//   compact_cell  8 bytes: count (7 bits), touched (1 bit) and the XOR (24 bits)
//                 share one word. Eight records to a cache line, none straddling
//                 two lines, and a third less memory than the wide record: at
//                 ratio 4 the queue's misses fall with it.
//   wide_cell     12 bytes: a word each. Any support and any count below 2^31.
//
// The compact record fits when the support has fewer than 2^24 entries (an
// XOR of positions stays inside 24 bits) and no cell holds more than 127 of
// them. The first is known before counting; the second is found while counting
// (add() reports a cell about to pass 127), and the decoder then counts again
// with the wide record. Both layouts give the same answers: only where the bits
// live differs.

#include <cstddef>
#include <cstdint>

#include "../../core/config.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

inline constexpr std::uint32_t cell_touched_bit = 1u << 31;

struct compact_cell {
  static constexpr int count_shift = 24;
  static constexpr std::uint32_t id_bits = (1u << count_shift) - 1;      // the XOR of positions
  static constexpr std::uint32_t most_count = 127;                       // 7 bits below the touched bit
  static constexpr std::size_t most_entries = std::size_t(id_bits) + 1;  // support positions < 2^24

  std::uint32_t key;  // touched | count << 24 | XOR of positions
  float value;

  static compact_cell holding(float v) { return {0u, v}; }
  // Counts entry i in; false when this cell already holds most_count entries (the
  // count would run into the touched bit: count again with wide_cell).
  bool add(std::uint32_t i) {
    const bool room = (key >> count_shift) < most_count;
    key = (key + (1u << count_shift)) ^ i;
    return room;
  }
  std::uint32_t count() const { return (key & ~cell_touched_bit) >> count_shift; }
  bool untouched_lone() const { return (key >> count_shift) == 1u; }
  std::uint32_t ids() const { return key & id_bits; }
  // Entry i peeled: out of the XOR and the count, and the cell marked touched.
  void remove(std::uint32_t i, std::uint32_t left) {
    key = ((key ^ i) & id_bits) | (left << count_shift) | cell_touched_bit;
  }
};
static_assert(sizeof(compact_cell) == 8);

struct wide_cell {
  std::uint32_t count_;  // touched | count
  std::uint32_t ids_;    // XOR of positions
  float value;

  static wide_cell holding(float v) { return {0u, 0u, v}; }
  bool add(std::uint32_t i) {
    ++count_;
    ids_ ^= i;
    return true;
  }
  std::uint32_t count() const { return count_ & ~cell_touched_bit; }
  bool untouched_lone() const { return count_ == 1u; }
  std::uint32_t ids() const { return ids_; }
  void remove(std::uint32_t i, std::uint32_t left) {
    ids_ ^= i;
    count_ = left | cell_touched_bit;
  }
};
static_assert(sizeof(wide_cell) == 12);

}  // namespace detail::host
TAGC_END_NAMESPACE
