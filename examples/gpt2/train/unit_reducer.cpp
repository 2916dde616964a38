// unit_reducer.cpp: UnitReducer over the host catalogue, and its TAGC_GPT2_VERIFY check.
// defines: train::UnitReducer, train::make_tagc_reducer, train::make_plain_reducer
#include "unit_reducer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace train {

UnitReducer::UnitReducer(tagc::AnyReducer<tagc::exec::host, Comm> r)
    : r_(std::move(r)), verify_(r_.compressed() && std::getenv("TAGC_GPT2_VERIFY") != nullptr) {}

tagc::status UnitReducer::reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                                         tagc::reduce_stats* stats) {
  if (!verify_) return r_.reduce_scatter(comm, grad, shard, stats);
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

std::unique_ptr<UnitReducer> make_tagc_reducer(const CompressOptions& o, size_t length, int world, int rank) {
  return std::make_unique<UnitReducer>(
      build_segment_reducer(reducer_catalogue_for(tagc::exec::host{}), o.reducer, o, length, world, rank, {}));
}

std::unique_ptr<UnitReducer> make_plain_reducer(const CompressOptions& o, size_t length, int world, int rank) {
  return std::make_unique<UnitReducer>(
      build_segment_reducer(reducer_catalogue_for(tagc::exec::host{}), o.plain, o, length, world, rank, {}));
}

}  // namespace train
