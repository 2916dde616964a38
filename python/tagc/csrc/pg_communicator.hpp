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
// blocking calls. start_*() completes the collective before returning (the hook
// runs every collective on its own worker thread, which is where the overlap
// with backward comes from, so nothing here needs to be non-blocking).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <tagc/comm/communicator.hpp>
#include <tagc/core/status.hpp>

namespace tagc_torch {

// Element types the transport knows; the id picks the reduction (float adds in
// float, 16-bit floats add in float and round once per step, integers wrap).
enum class wire_elem : int { f32, f64, u8, i32, u32, i64, u64, bf16, f16 };

template <class T> inline constexpr wire_elem wire_elem_of = wire_elem::f32;
template <> inline constexpr wire_elem wire_elem_of<double> = wire_elem::f64;
template <> inline constexpr wire_elem wire_elem_of<std::uint8_t> = wire_elem::u8;
template <> inline constexpr wire_elem wire_elem_of<std::int32_t> = wire_elem::i32;
template <> inline constexpr wire_elem wire_elem_of<std::uint32_t> = wire_elem::u32;
template <> inline constexpr wire_elem wire_elem_of<std::int64_t> = wire_elem::i64;
template <> inline constexpr wire_elem wire_elem_of<std::uint64_t> = wire_elem::u64;
template <> inline constexpr wire_elem wire_elem_of<tagc::bfloat16> = wire_elem::bf16;
template <> inline constexpr wire_elem wire_elem_of<tagc::float16> = wire_elem::f16;

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
  virtual tagc::status barrier() = 0;
};

class pg_communicator {
 public:
  using request = tagc::completed_request;  // collectives complete at start (see above)

  explicit pg_communicator(collective_transport& t) : t_(&t) {}

  int rank() const { return t_->rank(); }
  int size() const { return t_->size(); }
  tagc::status barrier() { return t_->barrier(); }

  template <tagc::reducible T>
  tagc::status all_reduce(std::span<const T> in, std::span<T> out) {
    if (in.size() != out.size()) return shape("all_reduce", in.size(), out.size());
    return t_->all_reduce(in.data(), out.data(), in.size(), wire_elem_of<T>);
  }
  template <tagc::reducible T>
  tagc::status reduce_scatter(std::span<const T> in, std::span<T> out) {
    if (in.size() != out.size() * std::size_t(size())) return shape("reduce_scatter", in.size(), out.size());
    // In place (out is this rank's block of in): reduce into a temporary, so
    // the other blocks of `in` are read before anything is written.
    if (static_cast<const void*>(out.data()) == static_cast<const void*>(in.data() + out.size() * rank())) {
      std::vector<T> tmp(out.size());
      TAGC_TRY(t_->reduce_scatter(in.data(), tmp.data(), out.size(), wire_elem_of<T>));
      std::copy(tmp.begin(), tmp.end(), out.begin());
      return {};
    }
    return t_->reduce_scatter(in.data(), out.data(), out.size(), wire_elem_of<T>);
  }
  template <tagc::reducible T>
  tagc::status all_gather(std::span<const T> in, std::span<T> out) {
    if (out.size() != in.size() * std::size_t(size())) return shape("all_gather", in.size(), out.size());
    return t_->all_gather(in.data(), out.data(), in.size(), wire_elem_of<T>);
  }
  template <tagc::reducible T>
  tagc::status reduce(std::span<const T> in, std::span<T> out, int root) {
    if (root < 0 || root >= size()) return {tagc::errc::invalid_argument, "reduce: root " + std::to_string(root) + " out of range"};
    std::vector<T> tmp(in.size());  // sum everywhere, keep it only on root
    TAGC_TRY(all_reduce(in, std::span<T>(tmp)));
    if (rank() == root) {
      if (out.size() != in.size()) return shape("reduce", in.size(), out.size());
      std::copy(tmp.begin(), tmp.end(), out.begin());
    }
    return {};
  }
  template <tagc::reducible T>
  tagc::status broadcast(std::span<T> buf, int root) {
    if (root < 0 || root >= size()) return {tagc::errc::invalid_argument, "broadcast: root " + std::to_string(root) + " out of range"};
    return t_->broadcast(buf.data(), buf.size(), wire_elem_of<T>, root);
  }
  template <tagc::reducible T>
  request start_all_reduce(std::span<const T> in, std::span<T> out) { return {all_reduce(in, out)}; }
  template <tagc::reducible T>
  request start_reduce_scatter(std::span<const T> in, std::span<T> out) { return {reduce_scatter(in, out)}; }
  template <tagc::reducible T>
  request start_all_gather(std::span<const T> in, std::span<T> out) { return {all_gather(in, out)}; }

 private:
  static tagc::status shape(const char* what, std::size_t in, std::size_t out) {
    return {tagc::errc::size_mismatch, std::string(what) + ": send has " + std::to_string(in) + " elements, recv " +
                                           std::to_string(out) + " (shapes inconsistent for the world size)"};
  }
  collective_transport* t_;
};

static_assert(tagc::communicator<pg_communicator>);

}  // namespace tagc_torch
