#pragma once
// defines: tagc::detail::mpi::check_vector, tagc::detail::mpi::encode_check,
//          tagc::detail::mpi::encode_route_check, tagc::detail::mpi::check_verdict —
//          mpi_communicator's cross-rank argument check (part of comm/mpi.hpp).
//
// Before a checked collective every rank contributes check_slots int64 values to
// one MPI_Iallreduce(MAX). From the reduced vector alone every rank learns whether
// ranks called different collectives, the lowest rank whose own arguments broke a rule (and the numbers that word its
// refusal), and, for each thing ranks must agree on (comm/argument_rules.hpp:
// collective, element type, count, root), the largest and smallest value passed
// and the lowest rank that passed each. So every rank returns the same status,
// worded by argument_rules.hpp, instead of one returning early and the others
// hanging.
//
// Encoding: a value that names its rank carries key(rank) = 2^20 - 1 - rank beside
// it, so the maximum selects the lowest such rank. The error slots hold
// key << 42 | value; the agreement slots hold value << 20 | key for the maximum and
// (cap - value) << 20 | key for the minimum. Values are clamped to 42 bits; roots are
// offset by 2^40 so that negative ones stay non-negative.
//
// all_to_all_v takes part like every collective (so a rank calling it while another
// calls something else is named as such), with its own verdict (route_check: what,
// a, b) in the error slots and no count or root to agree on; the rule that spans a
// pair of ranks is checked afterwards (mpi/route.hpp).

#include <array>
#include <cstdint>

#include "../argument_rules.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail::mpi {

enum check_slot : int {
  err_code = 0, err_send, err_recv, err_root,  // the lowest rank with a broken rule (or -1 everywhere)
  kind_max, kind_min, type_max, type_min, count_max, count_min, root_max, root_min,
  check_slots
};
using check_vector = std::array<std::int64_t, check_slots>;

inline constexpr int key_bits = 20;
inline constexpr std::int64_t key_mask = (std::int64_t(1) << key_bits) - 1;
inline constexpr int value_bits = 42;
inline constexpr std::int64_t value_cap = (std::int64_t(1) << value_bits) - 1;
inline constexpr std::int64_t root_offset = std::int64_t(1) << 40;

inline constexpr std::int64_t clamp_value(std::uint64_t v) noexcept {
  return v > std::uint64_t(value_cap) ? value_cap : std::int64_t(v);
}
inline constexpr std::int64_t key_of(int rank) noexcept { return key_mask - (rank < key_mask ? rank : key_mask); }
inline constexpr int rank_of_key(std::int64_t key) noexcept { return int(key_mask - key); }

// One rank's contribution: `error` (0: none) with its numbers, and the facts ranks must agree on.
inline check_vector encode_slots(collective kind, int type_id, std::int64_t error, std::uint64_t send,
                                 std::uint64_t recv, std::uint64_t count, int root, int rank) {
  check_vector v{};
  const std::int64_t key = key_of(rank);
  const std::int64_t err_key = key << value_bits;
  const bool bad = error != 0;
  const std::int64_t root_value = clamp_value(std::uint64_t(std::int64_t(root) + root_offset));
  v[err_code] = bad ? err_key | (std::int64_t(kind) << 8 | error) : -1;
  v[err_send] = bad ? err_key | clamp_value(send) : -1;
  v[err_recv] = bad ? err_key | clamp_value(recv) : -1;
  v[err_root] = bad ? err_key | root_value : -1;
  const auto both = [&](int max_slot, std::int64_t value) {
    v[max_slot] = (value << key_bits) | key;
    v[max_slot + 1] = ((value_cap - value) << key_bits) | key;
  };
  both(kind_max, std::int64_t(kind));
  both(type_max, type_id);
  both(count_max, clamp_value(count));
  both(root_max, root_value);
  return v;
}

// `check` is argument_rules' verdict on this rank's own arguments.
inline check_vector encode_check(collective kind, int type_id, const argument_check& check, std::uint64_t send,
                                 std::uint64_t recv, int root, int rank) {
  return encode_slots(kind, type_id, std::int64_t(check.error), send, recv, check.count, root, rank);
}

// all_to_all_v: route_check's a and b travel in the send and recv slots (c belongs to
// the pair rule, never to one rank's own verdict).
inline check_vector encode_route_check(int type_id, const route_check& check, int rank) {
  return encode_slots(collective::all_to_all, type_id, check.what, std::uint64_t(check.a), std::uint64_t(check.b),
                      0, 0, rank);
}

// The status every rank derives from the reduced vector `a` (ok: the call may run).
inline status check_verdict(const check_vector& a, int size, std::uint64_t max_count) {
  const auto field_differs = [&](agreement_field field, int max_slot, std::int64_t offset) {
    const std::int64_t hi = a[max_slot] >> key_bits, lo = value_cap - (a[max_slot + 1] >> key_bits);
    if (hi == lo) return status{};
    return disagreement(collective(a[kind_max] >> key_bits), field, rank_of_key(a[max_slot] & key_mask), hi - offset,
                        rank_of_key(a[max_slot + 1] & key_mask), lo - offset);
  };
  // The order of argument_rules.hpp: the collective, each rank's own arguments, then the rest.
  TAGC_TRY(field_differs(agreement_field::collective, kind_max, 0));
  if (a[err_code] >= 0) {
    const auto value = [&](int slot) { return a[slot] & value_cap; };
    const std::int64_t code = value(err_code);
    const int rank = rank_of_key(a[err_code] >> value_bits);
    if (collective(code >> 8) == collective::all_to_all)
      return route_refusal({code & 0xff, value(err_send), value(err_recv)}, rank, size, max_count);
    return argument_refusal(collective(code >> 8), argument_error(code & 0xff), std::uint64_t(value(err_send)),
                            std::uint64_t(value(err_recv)), value(err_root) - root_offset, rank, size, max_count);
  }
  TAGC_TRY(field_differs(agreement_field::element_type, type_max, 0));
  TAGC_TRY(field_differs(agreement_field::count, count_max, 0));
  TAGC_TRY(field_differs(agreement_field::root, root_max, root_offset));
  return {};
}

}  // namespace detail::mpi

TAGC_END_NAMESPACE
