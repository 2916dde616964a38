// plain_reducer.cpp: the uncompressed baselines — the gradient padded to world x shard,
// reduce-scattered as Wire (float; or tagc::bfloat16 as llm.c does), divided by the
// world size in float by the owner.
//
// bf16: the gradient is rounded to tagc::bfloat16 (round to nearest even) and the
// communicator's bf16 SUM adds in float and rounds back to bf16 at every reduction step
// (as a bf16 NCCL reduction does; over MPI it is a user-defined op, since MPI has no
// bf16 type and summing the bit patterns as integers would be wrong).
// defines: train::make_plain_reducer, train::make_plain_bf16_reducer
#include "unit_reducer.hpp"

// defines: tagc::bfloat16
#include "tagc/core/bfloat16.hpp"

#include <string>
#include <type_traits>

namespace train {
namespace {

template <class Wire>
class PlainUnitReducer final : public UnitReducer {
 public:
  PlainUnitReducer(size_t length, int world) : length_(length), world_(world) {
    shard_ = (length + size_t(world) - 1) / size_t(world);
    send_.assign(shard_ * size_t(world), Wire(0.0f));  // padding stays zero
    recv_.assign(shard_, Wire(0.0f));
  }
  bool compressed() const override { return false; }
  size_t output_size() const override { return shard_; }
  tagc::status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                              tagc::reduce_stats*) override {
    if (grad.size() != length_ || shard.size() != shard_)
      return {tagc::errc::size_mismatch, std::string("plain ") + wire_name() + " reduce-scatter: wrong span sizes"};
    for (size_t i = 0; i < length_; ++i) send_[i] = Wire(grad[i]);
    TAGC_TRY(comm.reduce_scatter(std::span<const Wire>(send_), std::span<Wire>(recv_)));
    const float inv = 1.0f / float(world_);
    for (size_t i = 0; i < shard_; ++i) shard[i] = float(recv_[i]) * inv;
    return {};
  }
  void set_profiling(bool) override {}
  std::vector<std::byte> save_state() const override { return {}; }
  tagc::status load_state(std::span<const std::byte> s) override {
    if (!s.empty()) return {tagc::errc::io, "plain segment: checkpoint holds reducer state, expected none"};
    return {};
  }

 private:
  static const char* wire_name() { return std::is_same_v<Wire, float> ? "fp32" : "bf16"; }
  size_t length_, shard_;
  int world_;
  std::vector<Wire> send_, recv_;
};

}  // namespace

std::unique_ptr<UnitReducer> make_plain_reducer(size_t length, int world, int) {
  return std::make_unique<PlainUnitReducer<float>>(length, world);
}

std::unique_ptr<UnitReducer> make_plain_bf16_reducer(size_t length, int world, int) {
  return std::make_unique<PlainUnitReducer<tagc::bfloat16>>(length, world);
}

}  // namespace train
