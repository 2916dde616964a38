// bf16_reducer.cpp: the llm.c-style baseline — gradients reduce-scattered in bf16.
//
// MPI has no bf16 type, and summing bf16 bit patterns as 16-bit integers is wrong, so
// the segment is sent as MPI_UINT16_T through MPI_Reduce_scatter_block with a
// user-defined op that decodes both operands to float, adds, and rounds back to bf16
// (round to nearest even), as a bf16 NCCL reduction does at every hop.
//
// tagc::mpi_communicator only reduces the types tagc needs, so this path calls MPI on
// the communicator's native handle. That is safe here: it runs on the comm worker
// thread (the only thread calling MPI) and every earlier collective has completed.
// Its bytes are invisible to tagc::counting_communicator; uncounted_bytes() reports them.
// defines: train::make_plain_bf16_reducer
#include "unit_reducer.hpp"

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace train {
namespace {

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                         // round to nearest even
  return uint16_t(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_bf16(from_bf16(a[i]) + from_bf16(b[i]));
}

class PlainBf16UnitReducer final : public UnitReducer {
 public:
  PlainBf16UnitReducer(size_t length, int world) : length_(length), world_(world) {
    shard_ = (length + size_t(world) - 1) / size_t(world);
    send_.assign(shard_ * size_t(world), 0);
    recv_.assign(shard_, 0);
    if (MPI_Op_create(&bf16_sum, /*commute=*/1, &op_) != MPI_SUCCESS)
      throw std::runtime_error("bf16 reduce-scatter: MPI_Op_create failed");
  }
  ~PlainBf16UnitReducer() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && op_ != MPI_OP_NULL) MPI_Op_free(&op_);
  }
  bool compressed() const override { return false; }
  size_t output_size() const override { return shard_; }
  tagc::status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                              tagc::reduce_stats*) override {
    if (grad.size() != length_ || shard.size() != shard_)
      return {tagc::errc::size_mismatch, "bf16 reduce-scatter: wrong span sizes"};
    for (size_t i = 0; i < length_; ++i) send_[i] = to_bf16(grad[i]);
    if (int rc = MPI_Reduce_scatter_block(send_.data(), recv_.data(), int(shard_), MPI_UINT16_T, op_,
                                          comm.inner().native());
        rc != MPI_SUCCESS)
      return {tagc::errc::communication, "bf16 reduce-scatter: MPI error " + std::to_string(rc)};
    const float inv = 1.0f / float(world_);
    for (size_t i = 0; i < shard_; ++i) shard[i] = from_bf16(recv_[i]) * inv;
    uncounted_ += tagc::ring_bytes_sent(tagc::collective::reduce_scatter, double(send_.size() * 2), world_);
    return {};
  }
  double take_uncounted_bytes() override {
    const double b = uncounted_;
    uncounted_ = 0.0;
    return b;
  }
  void set_profiling(bool) override {}
  std::vector<std::byte> save_state() const override { return {}; }
  tagc::status load_state(std::span<const std::byte> s) override {
    if (!s.empty()) return {tagc::errc::io, "plain segment: checkpoint holds reducer state, expected none"};
    return {};
  }

 private:
  size_t length_, shard_;
  int world_;
  std::vector<uint16_t> send_, recv_;
  MPI_Op op_ = MPI_OP_NULL;
  double uncounted_ = 0.0;
};

}  // namespace

std::unique_ptr<UnitReducer> make_plain_bf16_reducer(size_t length, int world, int) {
  return std::make_unique<PlainBf16UnitReducer>(length, world);
}

}  // namespace train
