#pragma once
// defines: tagc_torch::wire_elem, tagc_torch::collective_transport,
//          tagc_torch::pg_communicator — tagc::communicator over a transport
//          that moves raw buffers (implemented over c10d::ProcessGroup in
//          process_group_transport.cpp).
//
// Why the split: the reducer catalogue (catalogue.cpp) instantiates the
// Reducer templates against pg_communicator; keeping torch's headers out of this
// header keeps them out of that (already slow) translation unit.
//
// Semantics are tagc's (comm/communicator.hpp): sum only, unsigned sums wrap,
// blocking calls (the hook runs every collective on its own worker thread, which
// is where the overlap with backward comes from, so nothing here needs to be
// non-blocking).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <tagc/comm/argument_rules.hpp>
#include <tagc/comm/communicator.hpp>
#include <tagc/core/status.hpp>

namespace tagc_torch {

// Element types the transport knows; the id picks the reduction (float adds in
// float, 16-bit floats add in float and round once per step, integers wrap).
enum class wire_elem : int { f32, f64, u8, i32, u32, i64, u64, bf16, f16 };

// The same numbering as tagc::element_type_id (comm/argument_rules.hpp).
template <tagc::reducible T> inline constexpr wire_elem wire_elem_of = wire_elem(tagc::element_type_id<T>);
static_assert(wire_elem_of<tagc::float16> == wire_elem::f16 && wire_elem_of<std::uint8_t> == wire_elem::u8);

// Raw-buffer collectives; counts are elements of `type`. Blocking.
class collective_transport {
 public:
  virtual ~collective_transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // out[i] = sum over ranks of in[i]; in == out allowed.
  virtual tagc::status all_reduce(const void* in, void* out, std::size_t count, wire_elem type) = 0;
  // in holds size() blocks of `count`; rank r receives the sum of block r.
  virtual tagc::status reduce_scatter(const void* in, void* out, std::size_t count, wire_elem type) = 0;
  // out holds size() blocks of `count`; block r is rank r's in.
  virtual tagc::status all_gather(const void* in, void* out, std::size_t count, wire_elem type) = 0;
  virtual tagc::status broadcast(void* buf, std::size_t count, wire_elem type, int root) = 0;
  // in holds size() blocks in rank order, send_counts[p] for rank p; out gets size()
  // blocks, recv_counts[q] from rank q. Each pair's counts agree (the caller's word).
  virtual tagc::status all_to_all_v(const void* in, std::span<const std::size_t> send_counts, void* out,
                                    std::span<const std::size_t> recv_counts, wire_elem type) = 0;
};

// What the Reducers need (tagc::communicator, and all_to_all_v for a routed index:
// tagc::routing_communicator), no more: the hook never calls reduce, a barrier or a
// non-blocking collective. Arguments are checked by tagc's rules
// (comm/argument_rules.hpp), so a refusal reads as on every other backend.
class pg_communicator {
 public:
  explicit pg_communicator(collective_transport& t) : t_(&t) {}

  int rank() const { return t_->rank(); }
  int size() const { return t_->size(); }

  template <tagc::reducible T>
  tagc::status all_reduce(std::span<const T> in, std::span<T> out) {
    TAGC_TRY(check(tagc::collective::all_reduce, in, out));
    return t_->all_reduce(in.data(), out.data(), in.size(), wire_elem_of<T>);
  }
  template <tagc::reducible T>
  tagc::status reduce_scatter(std::span<const T> in, std::span<T> out) {
    const tagc::argument_check args = rules(tagc::collective::reduce_scatter, in, out);
    TAGC_TRY(refusal(tagc::collective::reduce_scatter, args, in, out));
    // In place (out is this rank's block of in): reduce into a temporary, so
    // the other blocks of `in` are read before anything is written.
    if (args.in_place && !out.empty()) {
      std::vector<T> tmp(out.size());
      TAGC_TRY(t_->reduce_scatter(in.data(), tmp.data(), out.size(), wire_elem_of<T>));
      std::copy(tmp.begin(), tmp.end(), out.begin());
      return {};
    }
    return t_->reduce_scatter(in.data(), out.data(), out.size(), wire_elem_of<T>);
  }
  template <tagc::reducible T>
  tagc::status all_gather(std::span<const T> in, std::span<T> out) {
    TAGC_TRY(check(tagc::collective::all_gather, in, out));
    return t_->all_gather(in.data(), out.data(), in.size(), wire_elem_of<T>);
  }
  template <tagc::reducible T>
  tagc::status broadcast(std::span<T> buf, int root) {
    TAGC_TRY(check(tagc::collective::broadcast, std::span<const T>(buf), buf, root));
    return t_->broadcast(buf.data(), buf.size(), wire_elem_of<T>, root);
  }
  // This rank's own arguments only: a ProcessGroup cannot compare counts across
  // ranks before it moves data, so, as on NCCL, the caller exchanges the counts first
  // (the reducer does). gloo (torch 2.14) does not check them either: a rank expecting
  // more than its peer sends keeps the rest of that block as it was and returns ok;
  // one expecting less aborts its process (gloo's enforce), its peer gets an error.
  template <tagc::reducible T>
  tagc::status all_to_all_v(std::span<const T> in, std::span<const std::size_t> send_counts, std::span<T> out,
                            std::span<const std::size_t> recv_counts) {
    if (const tagc::route_check v = tagc::check_all_to_all_arguments(in, send_counts, out, recv_counts, size());
        !v.ok())
      return tagc::route_refusal(v, rank(), size());
    return t_->all_to_all_v(in.data(), send_counts, out.data(), recv_counts, wire_elem_of<T>);
  }

 private:
  template <class T>
  tagc::argument_check rules(tagc::collective kind, std::span<const T> in, std::span<T> out, int root = 0) const {
    return tagc::check_collective_arguments(kind, in, out, root, rank(), size());
  }
  template <class T>
  tagc::status refusal(tagc::collective kind, const tagc::argument_check& args, std::span<const T> in,
                       std::span<T> out, int root = 0) const {
    if (args.ok()) return {};
    return tagc::argument_refusal(kind, args.error, in.size(), out.size(), root, rank(), size());
  }
  template <class T>
  tagc::status check(tagc::collective kind, std::span<const T> in, std::span<T> out, int root = 0) const {
    return refusal(kind, rules(kind, in, out, root), in, out, root);
  }
  collective_transport* t_;
};

static_assert(tagc::routing_communicator<pg_communicator>);

}  // namespace tagc_torch
