#pragma once
// defines: the reducers' checkpoint formats, as save/load pairs:
//            tagc::per_rank_state_format      Reducer<..., IndexPolicy, ...>: "tagc", version 4
//                                             (version 3, before bf16 residuals, still loads)
//            tagc::shared_index_state_format  Reducer<..., SharedIndexPolicy, ...>: "tags", version 2
//                                             (version 1, before the pooled overlap, still loads)
//          and tagc::saved_reducer_state, what either restores besides the residual.
//
// Both formats are little-endian words: a header that names the format and the
// configuration the state belongs to (length, shards, rank, policies), then theta,
// adaptive theta's feedback (per-rank format only), the step counter and the residual
// in its storage type. Loading checks everything before anything is restored (the
// header field by field, the size, theta, the feedback, the step, every residual
// entry), and the status names the field: a refused state leaves the reducer as it was.
// The two magics differ on purpose: one reducer's residual is never loaded into the other.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../core/status.hpp"
#include "../policy/wire_value.hpp"
#include "../shard/layout.hpp"

TAGC_BEGIN_NAMESPACE

struct saved_reducer_state {
  double theta = 0.0;
  std::int64_t last_load_ppm = 0, last_unresolved = 0;  // adaptive theta's feedback (per-rank format)
  std::uint64_t step = 0;                               // successful calls
  double overlap = 1.0;  // a pooled index's picks per position of its last union (shared format, version 2)
};

namespace state_codec {
template <class T> void append(std::vector<std::byte>& out, const T* p, std::size_t n) {
  // resize + memcpy, not insert: GCC 12 warns falsely (-Wstringop-overflow) on the inlined insert
  const std::size_t at = out.size();
  out.resize(at + n * sizeof(T));
  if (n) std::memcpy(out.data() + at, p, n * sizeof(T));
}
template <class T> const std::byte* take(const std::byte* p, T* out, std::size_t n = 1) {
  std::memcpy(out, p, n * sizeof(T));
  return p + n * sizeof(T);
}
inline status check_theta(double theta) {
  if (!(theta >= 0.0 && theta <= 1.0))
    return {errc::io, "reducer state holds theta " + std::to_string(theta) + ", outside [0, 1] (damaged state?)"};
  return {};
}
inline status check_step(std::uint64_t step) {
  if (step >= (std::uint64_t(1) << 53))
    return {errc::io, "reducer state holds step counter " + std::to_string(step) + ", beyond 2^53 calls (damaged state?)"};
  return {};
}
inline status check_size(std::size_t have, std::size_t need) {
  if (have != need)
    return {errc::io, "reducer state has " + std::to_string(have) + " bytes, expected " + std::to_string(need)};
  return {};
}
// The residual (residual.size() entries, its storage type) from `p`, every entry finite.
template <class R> status read_residual(const std::byte* p, std::vector<R>& residual) {
  if (!residual.empty()) std::memcpy(residual.data(), p, residual.size() * sizeof(R));
  for (std::size_t i = 0; i < residual.size(); ++i)
    if (!std::isfinite(float(residual[i])))
      return {errc::io, "reducer state holds a non-finite residual at element " + std::to_string(i) +
                            " (damaged state?)"};
  return {};
}
inline status field_differs(const char* field, const std::string& saved, const std::string& mine) {
  return {errc::size_mismatch,
          std::string("reducer state was saved with ") + field + " " + saved + ", this reducer has " + mine};
}
}  // namespace state_codec

// The per-rank selection Reducer's state.
struct per_rank_state_format {
  static constexpr std::uint32_t magic = 0x74616763;  // "tagc"
  static constexpr std::uint32_t version = 4;  // 4: + residual type, step counter; 3 still loads (float residual)
  static constexpr std::size_t header_words = 11;
  using header = std::array<std::uint64_t, header_words>;

  // What a state must agree on with the reducer that loads it. A packed reducer
  // records the values stage's layout constants as ratio and lanes (1, 1024).
  template <class Residual>
  static header header_of(const layout& l, int rank, int ratio, int lanes, bool sketched, topology topo) {
    return {magic, version, l.length, std::uint64_t(l.shards), std::uint64_t(rank), std::uint64_t(l.index_bits),
            std::uint64_t(ratio), std::uint64_t(lanes), std::uint64_t(sketched), std::uint64_t(topo),
            std::uint64_t(wire_type_id<Residual>)};
  }

  template <class Residual>
  static std::vector<std::byte> save(const header& h, const saved_reducer_state& s, std::span<const Residual> residual) {
    std::vector<std::byte> out;
    out.reserve(header_words * 8 + sizeof(double) + 2 * 8 + 8 + residual.size() * sizeof(Residual));
    state_codec::append(out, h.data(), h.size());
    state_codec::append(out, &s.theta, 1);
    const std::int64_t feedback[2] = {s.last_load_ppm, s.last_unresolved};
    state_codec::append(out, feedback, 2);
    state_codec::append(out, &s.step, 1);
    state_codec::append(out, residual.data(), residual.size());
    return out;
  }

  // `residual` comes sized to the reducer's; `l` bounds the feedback's ranges.
  template <class Residual>
  static status load(std::span<const std::byte> in, const header& want, const layout& l, saved_reducer_state& out,
                     std::vector<Residual>& residual) {
    std::uint64_t h[header_words];
    // Version 3 (before bf16 residuals): 10 header words, no step counter, a
    // float residual. It still loads into a float-residual reducer.
    constexpr std::size_t v3_words = 10;
    if (in.size() < v3_words * sizeof(std::uint64_t))
      return {errc::io, "reducer state truncated: " + std::to_string(in.size()) + " bytes"};
    std::memcpy(h, in.data(), v3_words * sizeof(std::uint64_t));
    const bool v3 = h[0] == magic && h[1] == 3;
    if (h[0] != magic || (h[1] != version && !v3))
      return {errc::io, "not a tagc reducer state of version " + std::to_string(version) +
                            " or 3 (bad magic or version)"};
    const std::size_t words = v3 ? v3_words : header_words;
    if (!v3) {
      if (in.size() < sizeof h) return {errc::io, "reducer state truncated: " + std::to_string(in.size()) + " bytes"};
      std::memcpy(h, in.data(), sizeof h);
    } else {
      h[header_words - 1] = wire_type_id<float>;  // version 3 residuals are float
    }
    static const char* names[] = {"magic", "version", "length", "shards", "rank", "index bits", "sketch ratio",
                                  "lanes", "values policy", "topology", "residual type"};
    static_assert(sizeof names / sizeof names[0] == header_words);
    for (std::size_t i = 2; i < header_words; ++i) {
      if (h[i] == want[i]) continue;
      if (i == header_words - 1)
        return {errc::size_mismatch, std::string("reducer state holds a ") + wire_type_name(std::int64_t(h[i])) +
                                         " residual, this reducer stores a " + wire_type_name(std::int64_t(want[i])) +
                                         " residual (SparsifyPolicy vs SparsifyBf16ResidualPolicy); convert it "
                                         "explicitly, it is not reinterpreted"};
      return state_codec::field_differs(names[i], std::to_string(h[i]), std::to_string(want[i]));
    }
    const std::size_t need = words * sizeof(std::uint64_t) + sizeof(double) + 2 * sizeof(std::int64_t) +
                             (v3 ? 0 : sizeof(std::uint64_t)) + residual.size() * sizeof(Residual);
    TAGC_TRY(state_codec::check_size(in.size(), need));
    saved_reducer_state s;
    std::int64_t feedback[2];
    const std::byte* p = in.data() + words * sizeof(std::uint64_t);
    p = state_codec::take(p, &s.theta);
    p = state_codec::take(p, feedback, 2);
    if (!v3) p = state_codec::take(p, &s.step);
    TAGC_TRY(state_codec::check_theta(s.theta));
    // Load of the last decode (ppm): support / cells, support <= shard size.
    const double max_load_ppm = 1e6 * double(l.shard_size) / double(l.cells ? l.cells : 1) + 1.0;
    if (feedback[0] < 0 || double(feedback[0]) > max_load_ppm)
      return {errc::io, "reducer state holds a last decode load of " + std::to_string(feedback[0]) +
                            " ppm, outside [0, " + std::to_string(std::int64_t(max_load_ppm)) + "] (damaged state?)"};
    if (feedback[1] < 0 || std::uint64_t(feedback[1]) > l.shard_size)
      return {errc::io, "reducer state holds " + std::to_string(feedback[1]) +
                            " unresolved entries, outside [0, shard size " + std::to_string(l.shard_size) +
                            "] (damaged state?)"};
    TAGC_TRY(state_codec::check_step(s.step));
    TAGC_TRY(state_codec::read_residual(p, residual));
    s.last_load_ppm = feedback[0];
    s.last_unresolved = feedback[1];
    out = s;
    return {};
  }
};

// The shared-index Reducer's state (no adaptive theta: no feedback; version 2 adds a
// pooled index's overlap after the step, version 1 states load with overlap 1).
struct shared_index_state_format {
  static constexpr std::uint32_t magic = 0x74616773;  // "tags"
  static constexpr std::uint32_t version = 2;
  static constexpr std::uint32_t oldest_version = 1;
  static constexpr std::size_t header_words = 8;
  using header = std::array<std::uint64_t, header_words>;

  template <class Wire, class Residual>
  static header header_of(std::size_t length, int shards, int rank, topology topo) {
    return {magic, version, std::uint64_t(length), std::uint64_t(shards), std::uint64_t(rank), std::uint64_t(topo),
            std::uint64_t(wire_type_id<Wire>), std::uint64_t(wire_type_id<Residual>)};
  }

  template <class Residual>
  static std::vector<std::byte> save(const header& h, const saved_reducer_state& s, std::span<const Residual> residual) {
    std::vector<std::byte> out;
    state_codec::append(out, h.data(), h.size());
    state_codec::append(out, &s.theta, 1);
    state_codec::append(out, &s.step, 1);
    state_codec::append(out, &s.overlap, 1);
    state_codec::append(out, residual.data(), residual.size());
    return out;
  }

  // `theta_fits(theta)`: the reducer's own refusal of a theta its workspaces cannot hold.
  template <class Residual, class ThetaFits>
  static status load(std::span<const std::byte> in, const header& want, ThetaFits&& theta_fits,
                     saved_reducer_state& out, std::vector<Residual>& residual) {
    std::uint64_t h[header_words];
    if (in.size() < 2 * sizeof(std::uint64_t))
      return {errc::io, "shared-index reducer state truncated: " + std::to_string(in.size()) + " bytes"};
    std::memcpy(h, in.data(), 2 * sizeof(std::uint64_t));
    if (h[0] == per_rank_state_format::magic)
      return {errc::invalid_argument, "this state was saved by a per-rank selection Reducer (IndexPolicy); a "
                                      "shared-index reducer's residual is not interchangeable with it"};
    if (h[0] != magic || h[1] < oldest_version || h[1] > version)
      return {errc::io, "not a tagc shared-index reducer state of version " + std::to_string(oldest_version) + " to " +
                            std::to_string(version) + " (bad magic or version)"};
    const std::uint64_t saved_version = h[1];
    if (in.size() < sizeof h)
      return {errc::io, "shared-index reducer state truncated: " + std::to_string(in.size()) + " bytes"};
    std::memcpy(h, in.data(), sizeof h);
    static const char* names[] = {"magic", "version", "length", "shards", "rank", "topology", "value type",
                                  "residual type"};
    static_assert(sizeof names / sizeof names[0] == header_words);
    for (std::size_t i = 2; i < header_words; ++i) {
      if (h[i] == want[i]) continue;
      if (i >= 6)
        return state_codec::field_differs(names[i], wire_type_name(std::int64_t(h[i])),
                                          wire_type_name(std::int64_t(want[i])));
      return state_codec::field_differs(names[i], std::to_string(h[i]), std::to_string(want[i]));
    }
    const bool has_overlap = saved_version >= 2;
    TAGC_TRY(state_codec::check_size(in.size(), sizeof h + sizeof(double) + sizeof(std::uint64_t) +
                                                    (has_overlap ? sizeof(double) : 0) +
                                                    residual.size() * sizeof(Residual)));
    saved_reducer_state s;
    const std::byte* p = in.data() + sizeof h;
    p = state_codec::take(p, &s.theta);
    p = state_codec::take(p, &s.step);
    if (has_overlap) p = state_codec::take(p, &s.overlap);
    TAGC_TRY(state_codec::check_theta(s.theta));
    if (!(s.overlap >= 1.0 && s.overlap < 1e9))  // the reducer checks its own bound
      return {errc::io, "reducer state holds pooled overlap " + std::to_string(s.overlap) +
                            ", not a number >= 1 (damaged state?)"};
    TAGC_TRY(theta_fits(s.theta));
    TAGC_TRY(state_codec::check_step(s.step));
    TAGC_TRY(state_codec::read_residual(p, residual));
    out = s;
    return {};
  }
};

TAGC_END_NAMESPACE
