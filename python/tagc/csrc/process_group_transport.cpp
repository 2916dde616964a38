// defines: the c10d::ProcessGroup transport (process_group_transport.hpp).
//
// What gloo in PyTorch 1.13 offers and how tagc's collectives map onto it:
//  - all_reduce SUM on float, double, int64 and uint8 (uint8 wraps, as tagc's
//    index needs): ProcessGroup::allreduce.
//  - no bf16 / fp16 all-reduce: all-gather the 16-bit words and add them in rank
//    order in float, rounding to the 16-bit type after every addition (what a
//    ring does per hop; tagc's MPI backend does the same). On 2 ranks this
//    sends what a ring all-reduce sends (one buffer); on N ranks (N-1) buffers.
//  - no reduce_scatter: an all-to-all of the blocks (alltoall_base on bytes),
//    then the owner adds the N blocks it received in rank order: the bytes of a
//    ring reduce-scatter, (N-1)/N of the buffer.
//  - all_gather is the list form: output views into the caller's buffer.
//  - all_to_all_v is alltoall_base on bytes with split sizes (gloo: alltoallv).
// Every exception a ProcessGroup throws becomes errc::communication.

#include "process_group_transport.hpp"

#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <tagc/core/bfloat16.hpp>
#include <tagc/core/float16.hpp>

namespace tagc_torch {
namespace {

std::size_t elem_bytes(wire_elem t) {
  switch (t) {
    case wire_elem::u8: return 1;
    case wire_elem::bf16: case wire_elem::f16: return 2;
    case wire_elem::f32: case wire_elem::i32: case wire_elem::u32: return 4;
    default: return 8;
  }
}

// The torch dtype a SUM of `t` runs in (unsigned 32/64-bit words add as signed:
// two's complement sums wrap identically).
at::ScalarType sum_dtype(wire_elem t) {
  switch (t) {
    case wire_elem::f32: return at::kFloat;
    case wire_elem::f64: return at::kDouble;
    case wire_elem::u8: return at::kByte;
    case wire_elem::i32: case wire_elem::u32: return at::kInt;
    case wire_elem::i64: case wire_elem::u64: return at::kLong;
    default: return at::kShort;  // 16-bit floats travel as words
  }
}

at::Tensor view(const void* p, std::size_t count, at::ScalarType dt) {
  return at::from_blob(const_cast<void*>(p), {static_cast<int64_t>(count)}, at::TensorOptions().dtype(dt));
}

// acc[i] (+)= add[i] in the element type's own arithmetic (16-bit floats: in
// float, rounded once).
void accumulate(void* acc, const void* add, std::size_t count, wire_elem t) {
  auto loop = [&](auto tag) {
    using T = decltype(tag);
    auto* a = static_cast<T*>(acc);
    const auto* b = static_cast<const T*>(add);
    for (std::size_t i = 0; i < count; ++i) a[i] = static_cast<T>(a[i] + b[i]);
  };
  switch (t) {
    case wire_elem::f32: return loop(float{});
    case wire_elem::f64: return loop(double{});
    case wire_elem::u8: return loop(std::uint8_t{});
    case wire_elem::i32: return loop(std::int32_t{});
    case wire_elem::u32: return loop(std::uint32_t{});
    case wire_elem::i64: return loop(std::int64_t{});
    case wire_elem::u64: return loop(std::uint64_t{});
    case wire_elem::bf16: {
      auto* a = static_cast<std::uint16_t*>(acc);
      const auto* b = static_cast<const std::uint16_t*>(add);
      for (std::size_t i = 0; i < count; ++i)
        a[i] = tagc::bf16_bits_from_float(tagc::float_from_bf16_bits(a[i]) + tagc::float_from_bf16_bits(b[i]));
      return;
    }
    case wire_elem::f16: {
      auto* a = static_cast<std::uint16_t*>(acc);
      const auto* b = static_cast<const std::uint16_t*>(add);
      for (std::size_t i = 0; i < count; ++i)
        a[i] = tagc::fp16_bits_from_float(tagc::float_from_fp16_bits(a[i]) + tagc::float_from_fp16_bits(b[i]));
      return;
    }
  }
}

class process_group_transport final : public collective_transport {
 public:
  explicit process_group_transport(c10::intrusive_ptr<c10d::ProcessGroup> pg) : pg_(std::move(pg)) {}

  int rank() const override { return pg_->getRank(); }
  int size() const override { return pg_->getSize(); }

  tagc::status all_reduce(const void* in, void* out, std::size_t count, wire_elem t) override {
    return guard("all_reduce", [&] {
      if (t == wire_elem::bf16 || t == wire_elem::f16) return sum_by_gather(in, out, count, t);
      if (in != out) std::memcpy(out, in, count * elem_bytes(t));
      std::vector<at::Tensor> ts{view(out, count, sum_dtype(t))};
      pg_->allreduce(ts)->wait();
    });
  }

  tagc::status reduce_scatter(const void* in, void* out, std::size_t count, wire_elem t) override {
    return guard("reduce_scatter", [&] {
      const std::size_t n = std::size_t(size()), bytes = count * elem_bytes(t);
      std::vector<std::uint8_t> recv(n * bytes);
      at::Tensor src = view(in, n * bytes, at::kByte), dst = view(recv.data(), n * bytes, at::kByte);
      std::vector<int64_t> splits;  // empty: equal splits
      pg_->alltoall_base(dst, src, splits, splits)->wait();
      // recv block r is rank r's block `rank()`: add them in rank order.
      std::memcpy(out, recv.data(), bytes);
      for (std::size_t r = 1; r < n; ++r) accumulate(out, recv.data() + r * bytes, count, t);
    });
  }

  tagc::status all_gather(const void* in, void* out, std::size_t count, wire_elem t) override {
    return guard("all_gather", [&] { gather_bytes(in, out, count * elem_bytes(t)); });
  }

  tagc::status all_to_all_v(const void* in, std::span<const std::size_t> send_counts, void* out,
                            std::span<const std::size_t> recv_counts, wire_elem t) override {
    return guard("all_to_all_v", [&] {
      const std::size_t b = elem_bytes(t);
      std::vector<int64_t> send_splits, recv_splits;  // bytes per rank
      std::size_t sent = 0, received = 0;
      for (std::size_t c : send_counts) send_splits.push_back(int64_t(c * b)), sent += c * b;
      for (std::size_t c : recv_counts) recv_splits.push_back(int64_t(c * b)), received += c * b;
      // An empty span may have no address; a tensor of no bytes still wants one.
      std::uint8_t none = 0;
      at::Tensor src = view(sent ? in : &none, sent, at::kByte);
      at::Tensor dst = view(received ? out : &none, received, at::kByte);
      pg_->alltoall_base(dst, src, recv_splits, send_splits)->wait();
    });
  }

  tagc::status broadcast(void* buf, std::size_t count, wire_elem t, int root) override {
    return guard("broadcast", [&] {
      std::vector<at::Tensor> ts{view(buf, count * elem_bytes(t), at::kByte)};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      pg_->broadcast(ts, o)->wait();
    });
  }

 private:
  void gather_bytes(const void* in, void* out, std::size_t bytes) {
    std::vector<at::Tensor> input{view(in, bytes, at::kByte)};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size(); ++r) outputs[0].push_back(view(static_cast<std::uint8_t*>(out) + std::size_t(r) * bytes, bytes, at::kByte));
    pg_->allgather(outputs, input)->wait();
  }

  void sum_by_gather(const void* in, void* out, std::size_t count, wire_elem t) {
    const std::size_t n = std::size_t(size()), bytes = count * elem_bytes(t);
    std::vector<std::uint8_t> all(n * bytes);
    gather_bytes(in, all.data(), bytes);
    std::memcpy(out, all.data(), bytes);
    for (std::size_t r = 1; r < n; ++r) accumulate(out, all.data() + r * bytes, count, t);
  }

  template <class F>
  tagc::status guard(const char* what, F&& f) {
    try {
      f();
      return {};
    } catch (const std::exception& e) {
      return {tagc::errc::communication, std::string(what) + " on the process group failed: " + e.what()};
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
};

}  // namespace

std::shared_ptr<collective_transport> make_process_group_transport(c10::intrusive_ptr<c10d::ProcessGroup> pg) {
  return std::make_shared<process_group_transport>(std::move(pg));
}

}  // namespace tagc_torch
