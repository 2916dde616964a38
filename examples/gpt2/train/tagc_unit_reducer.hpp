// tagc_unit_reducer.hpp: TagcUnitReducer<R> — a tagc::Reducer type R behind the
// UnitReducer interface. Included only by the two files that instantiate reducers
// (unit_reducer.cpp: float values, bf16_reducer.cpp: bf16 values), so the Thrust
// pipeline is compiled there and nowhere else.
#pragma once

#include "unit_reducer.hpp"

// defines: tagc::Reducer and its policies
#include "tagc/tagc.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace train {

template <class R>
class TagcUnitReducer final : public UnitReducer {
 public:
  TagcUnitReducer(size_t length, int world, int rank, const CompressOptions& o) {
    tagc::reducer_arguments a;
    a.length = length;
    a.world_size = world;
    a.rank = rank;
    a.topo = tagc::topology::sharded;
    a.op = tagc::reduce_op::mean;
    a.sparsity = o.sparsity;
    a.adapt.enabled = o.adaptive;
    a.adapt.target_load = o.target_load;
    a.schedule.warmup_steps = std::uint64_t(o.sparsity_warmup);
    a.schedule.start = o.sparsity_start;
    a.schedule.shape = o.sparsity_linear ? tagc::schedule_shape::linear : tagc::schedule_shape::exponential;
    if (auto s = r_.initialize(a); !s.ok()) throw std::runtime_error("tagc reducer: " + s.what());
    verify_ = std::getenv("TAGC_GPT2_VERIFY") != nullptr;
  }
  bool compressed() const override { return true; }
  size_t output_size() const override { return r_.output_size(); }
  tagc::status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                              tagc::reduce_stats* stats) override {
    if (!verify_) return r_.reduce_scatter(comm, grad, shard, stats);
    // TAGC_GPT2_VERIFY=1: check the contract "result == dense mean reduce-scatter of what
    // was sent" (sent = grad + residual before - residual after), and print the error.
    std::vector<float> sent = r_.residual_to_host();
    for (size_t i = 0; i < sent.size(); ++i) sent[i] += grad[i];
    TAGC_TRY(r_.reduce_scatter(comm, grad, shard, stats));
    const std::vector<float> after = r_.residual_to_host();
    const size_t S = shard.size(), N = size_t(comm.size());
    std::vector<float> padded(S * N, 0.0f), want(S);
    for (size_t i = 0; i < sent.size(); ++i) padded[i] = sent[i] - after[i];
    TAGC_TRY(comm.reduce_scatter(std::span<const float>(padded), std::span<float>(want)));
    double err = 0, ref = 0;
    for (size_t i = 0; i < S; ++i) {
      err = std::max(err, double(std::abs(want[i] / float(N) - shard[i])));
      ref = std::max(ref, double(std::abs(want[i] / float(N))));
    }
    std::fprintf(stderr, "verify rank %d len %zu: max |tagc - dense| = %.3g (max |dense| %.3g)%s\n", comm.rank(),
                 grad.size(), err, ref,
                 stats ? (" support " + std::to_string(stats->support) + " load " + std::to_string(stats->load) +
                          " unresolved " + std::to_string(stats->unresolved) + " deferred " +
                          std::to_string(deferred_entries(*stats)) + (stats->dense ? " dense" : ""))
                             .c_str()
                       : "");
    return {};
  }
  std::vector<std::byte> save_state() const override { return r_.save_state(); }
  tagc::status load_state(std::span<const std::byte> state) override { return r_.load_state(state); }
  void set_profiling(bool on) override { r_.set_profiling(on); }

 private:
  R r_;
  bool verify_ = false;
};

// The Reducer of the given policies, behind UnitReducer.
template <class Index, class Values, tagc::decode_mode Mode>
std::unique_ptr<UnitReducer> make_unit(const CompressOptions& o, size_t n, int w, int r) {
  using R = tagc::Reducer<tagc::SparsifyPolicy, Index, Values, tagc::DecodePolicy<Mode>>;
  return std::make_unique<TagcUnitReducer<R>>(n, w, r, o);
}

// Packed values are unsketched, so the decoder is unused (one instantiation per value
// type), and need the whole reduced index on every rank (all-reduce), exact at any
// world size.
template <class Values>
std::unique_ptr<UnitReducer> make_packed_unit(const CompressOptions& o, size_t n, int w, int r) {
  return make_unit<tagc::ExactIndexPolicy, Values, tagc::decode_mode::peel>(o, n, w, r);
}

// bf16_reducer.cpp: the combinations with 16-bit values (checked by unbuilt_combination).
std::unique_ptr<UnitReducer> make_tagc_bf16_reducer(const CompressOptions& o, size_t n, int w, int r);

}  // namespace train
