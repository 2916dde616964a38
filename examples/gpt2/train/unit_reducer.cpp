// unit_reducer.cpp: the 18 tagc::Reducer instantiations and the plain fp32 path.
// Keep every instantiation in this one file: each pulls in the whole Thrust pipeline.
// defines: train::make_tagc_reducer, train::make_plain_reducer
#include "unit_reducer.hpp"

// defines: tagc::Reducer and its policies
#include "tagc/tagc.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace train {
namespace {

template <int Bits, int Ratio, tagc::decode_mode Mode>
class TagcUnitReducer final : public UnitReducer {
 public:
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<Bits>, tagc::SketchPolicy<Ratio>,
                          tagc::DecodePolicy<Mode>>;

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

template <int Bits, int Ratio>
std::unique_ptr<UnitReducer> by_mode(const CompressOptions& o, size_t n, int w, int r) {
  switch (o.decoder) {
    case DecoderMode::peel:
      return std::make_unique<TagcUnitReducer<Bits, Ratio, tagc::decode_mode::peel>>(n, w, r, o);
    case DecoderMode::estimate:
      return std::make_unique<TagcUnitReducer<Bits, Ratio, tagc::decode_mode::estimate>>(n, w, r, o);
    case DecoderMode::peel_estimate:
      return std::make_unique<TagcUnitReducer<Bits, Ratio, tagc::decode_mode::peel_then_estimate>>(n, w, r, o);
  }
  throw std::logic_error("unknown decoder");
}

template <int Bits>
std::unique_ptr<UnitReducer> by_ratio(const CompressOptions& o, size_t n, int w, int r) {
  switch (o.ratio) {
    case 2: return by_mode<Bits, 2>(o, n, w, r);
    case 4: return by_mode<Bits, 4>(o, n, w, r);
    case 10: return by_mode<Bits, 10>(o, n, w, r);
  }
  throw std::runtime_error("sketch ratio " + std::to_string(o.ratio) + " not built (expected 2, 4 or 10)");
}

class PlainUnitReducer final : public UnitReducer {
 public:
  PlainUnitReducer(size_t length, int world) : length_(length), world_(world) {
    shard_ = (length + size_t(world) - 1) / size_t(world);
    send_.assign(shard_ * size_t(world), 0.0f);  // padding stays zero
  }
  bool compressed() const override { return false; }
  size_t output_size() const override { return shard_; }
  tagc::status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                              tagc::reduce_stats*) override {
    if (grad.size() != length_ || shard.size() != shard_)
      return {tagc::errc::size_mismatch, "plain reduce-scatter: wrong span sizes"};
    std::copy(grad.begin(), grad.end(), send_.begin());
    TAGC_TRY(comm.reduce_scatter(std::span<const float>(send_), shard));
    const float inv = 1.0f / float(world_);
    for (float& x : shard) x *= inv;
    return {};
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
  std::vector<float> send_;
};

}  // namespace

std::unique_ptr<UnitReducer> make_tagc_reducer(const CompressOptions& o, size_t length, int world, int rank) {
  switch (o.index_bits) {
    case 1: return by_ratio<1>(o, length, world, rank);
    case 4: return by_ratio<4>(o, length, world, rank);
  }
  throw std::runtime_error("index bits " + std::to_string(o.index_bits) + " not built (expected 1 or 4)");
}

std::unique_ptr<UnitReducer> make_plain_reducer(size_t length, int world, int) {
  return std::make_unique<PlainUnitReducer>(length, world);
}

}  // namespace train
