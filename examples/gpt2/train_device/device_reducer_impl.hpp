// device_reducer_impl.hpp: the definitions behind device_reducer.hpp, included only by
// the two files that instantiate them (device_reducers_host.cpp, device_reducers_cuda.cu).
// Single source: the element-wise work is TAGC_HOST_DEVICE functors launched through
// Thrust with exec.policy(), so the CPU runs the same code the GPU does.
#pragma once

#include "device_reducer.hpp"

// defines: tagc::Reducer and its policies
#include "tagc/tagc.hpp"
#include "tagc/core/bfloat16.hpp"

#include <thrust/copy.h>
#include <thrust/transform.h>

#include <stdexcept>
#include <string>

namespace train_device {
namespace detail {

struct scale_by {
  float s;
  TAGC_HOST_DEVICE float operator()(float x) const { return x * s; }
};
struct to_bf16 {
  TAGC_HOST_DEVICE tagc::bfloat16 operator()(float x) const { return tagc::bfloat16(x); }
};
struct from_bf16_scaled {
  float s;
  TAGC_HOST_DEVICE float operator()(tagc::bfloat16 x) const { return x.to_float() * s; }
};

template <class Exec, class Comm, int Bits, int Ratio, tagc::decode_mode Mode>
class TagcReducer final : public DeviceUnitReducer<Exec, Comm> {
 public:
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<Bits>, tagc::SketchPolicy<Ratio>,
                          tagc::DecodePolicy<Mode>, Exec>;
  using Counted = typename DeviceUnitReducer<Exec, Comm>::Counted;

  TagcReducer(size_t length, int world, int rank, const train::CompressOptions& o, const Exec& exec) {
    tagc::reducer_arguments a;
    a.length = length;
    a.world_size = world;
    a.rank = rank;
    a.topo = tagc::topology::sharded;
    a.op = tagc::reduce_op::mean;
    a.sparsity = o.sparsity;
    a.adapt.enabled = o.adaptive;
    a.adapt.target_load = o.target_load;
    if (auto s = r_.initialize(a, exec); !s.ok()) throw std::runtime_error("tagc reducer: " + s.what());
  }
  bool compressed() const override { return true; }
  size_t output_size() const override { return r_.output_size(); }
  tagc::status reduce_scatter(Counted& comm, std::span<const float> grad, std::span<float> shard,
                              tagc::reduce_stats* stats) override {
    return r_.reduce_scatter(comm, grad, shard, stats);
  }
  std::vector<std::byte> save_state() const override { return r_.save_state(); }
  tagc::status load_state(std::span<const std::byte> state) override { return r_.load_state(state); }
  void set_profiling(bool on) override { r_.set_profiling(on); }

 private:
  R r_;
};

template <class Exec, class Comm, int Bits, int Ratio>
ReducerPtr<Exec, Comm> by_mode(const train::CompressOptions& o, size_t n, int w, int r, const Exec& e) {
  switch (o.decoder) {
    case train::DecoderMode::peel:
      return std::make_unique<TagcReducer<Exec, Comm, Bits, Ratio, tagc::decode_mode::peel>>(n, w, r, o, e);
    case train::DecoderMode::estimate:
      return std::make_unique<TagcReducer<Exec, Comm, Bits, Ratio, tagc::decode_mode::estimate>>(n, w, r, o, e);
    case train::DecoderMode::peel_estimate:
      return std::make_unique<TagcReducer<Exec, Comm, Bits, Ratio, tagc::decode_mode::peel_then_estimate>>(n, w, r,
                                                                                                            o, e);
  }
  throw std::logic_error("unknown decoder");
}

template <class Exec, class Comm, int Bits>
ReducerPtr<Exec, Comm> by_ratio(const train::CompressOptions& o, size_t n, int w, int r, const Exec& e) {
  switch (o.ratio) {
    case 2: return by_mode<Exec, Comm, Bits, 2>(o, n, w, r, e);
    case 4: return by_mode<Exec, Comm, Bits, 4>(o, n, w, r, e);
    case 10: return by_mode<Exec, Comm, Bits, 10>(o, n, w, r, e);
  }
  throw std::runtime_error("--ratio " + std::to_string(o.ratio) + " is not built (expected 2, 4 or 10)");
}

// The baselines: the segment is copied into a zero-padded send buffer (world * shard
// elements; the padding is never written), reduce-scattered in Wire precision, and the
// owner's sum divided by world.
template <class Exec, class Comm, class Wire>
class PlainReducer final : public DeviceUnitReducer<Exec, Comm> {
 public:
  using Counted = typename DeviceUnitReducer<Exec, Comm>::Counted;
  template <class T>
  using vector = typename Exec::template vector<T>;

  PlainReducer(size_t length, int world, const Exec& exec) : length_(length), world_(world), exec_(exec) {
    shard_ = (length + size_t(world) - 1) / size_t(world);
    send_.assign(shard_ * size_t(world), Wire(0.0f));
    if constexpr (!std::is_same_v<Wire, float>) recv_.assign(shard_, Wire(0.0f));
  }
  bool compressed() const override { return false; }
  size_t output_size() const override { return shard_; }
  tagc::status reduce_scatter(Counted& comm, std::span<const float> grad, std::span<float> shard,
                              tagc::reduce_stats*) override {
    if (grad.size() != length_ || shard.size() != shard_)
      return {tagc::errc::size_mismatch, "plain reduce-scatter: wrong span sizes"};
    const float inv = 1.0f / float(world_);
    Wire* send = thrust::raw_pointer_cast(send_.data());
    if constexpr (std::is_same_v<Wire, float>) {
      thrust::copy(exec_.policy(), grad.data(), grad.data() + length_, send);
      TAGC_TRY(comm.reduce_scatter(std::span<const float>(send, send_.size()), shard));
      thrust::transform(exec_.policy(), shard.data(), shard.data() + shard_, shard.data(), scale_by{inv});
    } else {
      thrust::transform(exec_.policy(), grad.data(), grad.data() + length_, send, to_bf16{});
      Wire* recv = thrust::raw_pointer_cast(recv_.data());
      TAGC_TRY(comm.reduce_scatter(std::span<const Wire>(send, send_.size()), std::span<Wire>(recv, shard_)));
      thrust::transform(exec_.policy(), recv, recv + shard_, shard.data(), from_bf16_scaled{inv});
    }
    return {};
  }
  void set_profiling(bool) override {}
  std::vector<std::byte> save_state() const override { return {}; }
  tagc::status load_state(std::span<const std::byte> s) override {
    if (!s.empty()) return {tagc::errc::io, "plain segment: checkpoint holds reducer state, expected none"};
    return {};
  }

 private:
  size_t length_, shard_ = 0;
  int world_;
  Exec exec_;
  vector<Wire> send_, recv_;
};

}  // namespace detail

template <class Exec, class Comm>
ReducerPtr<Exec, Comm> make_tagc_reducer(const train::CompressOptions& o, size_t length, int world, int rank,
                                         const Exec& exec) {
  switch (o.index_bits) {
    case 1: return detail::by_ratio<Exec, Comm, 1>(o, length, world, rank, exec);
    case 4: return detail::by_ratio<Exec, Comm, 4>(o, length, world, rank, exec);
  }
  // 0 is the CPU trainer's "--index-bits exact" (tagc::ExactIndexPolicy), not built here.
  throw std::runtime_error("--index-bits " + (o.index_bits == 0 ? std::string("exact") : std::to_string(o.index_bits)) +
                           " is not built in the device trainer (expected 1 or 4)");
}

template <class Exec, class Comm>
ReducerPtr<Exec, Comm> make_plain_reducer(size_t length, int world, const Exec& exec) {
  return std::make_unique<detail::PlainReducer<Exec, Comm, float>>(length, world, exec);
}

template <class Exec, class Comm>
ReducerPtr<Exec, Comm> make_plain_bf16_reducer(size_t length, int world, const Exec& exec) {
  return std::make_unique<detail::PlainReducer<Exec, Comm, tagc::bfloat16>>(length, world, exec);
}

// Explicit instantiation of the three factories for one (Exec, Comm).
#define TAGC_GPT2_DEVICE_REDUCERS(EXEC, COMM)                                                                   \
  template ::train_device::ReducerPtr<EXEC, COMM> train_device::make_tagc_reducer<EXEC, COMM>(                  \
      const ::train::CompressOptions&, size_t, int, int, const EXEC&);                                          \
  template ::train_device::ReducerPtr<EXEC, COMM> train_device::make_plain_reducer<EXEC, COMM>(size_t, int,     \
                                                                                               const EXEC&);    \
  template ::train_device::ReducerPtr<EXEC, COMM> train_device::make_plain_bf16_reducer<EXEC, COMM>(            \
      size_t, int, const EXEC&)

}  // namespace train_device
