// Compile-only check of tagc's CUDA side with nvcc (no GPU needed, nothing runs):
// the execution space, the NCCL backend and its decorators, and the umbrella
// header's templates under nvcc. One translation unit keeps CI at a minute or two.

#include <thrust/sequence.h>
#include <thrust/transform.h>

#include <cstdint>
#include <optional>
#include <span>

// defines: tagc::exec::cuda, TAGC_CUDA_TRY
#include <tagc/exec/cuda.hpp>
// defines: tagc::nccl_communicator, tagc::exchange_nccl_unique_id
#include <tagc/comm/nccl.hpp>
// defines: tagc::counting_communicator
#include <tagc/comm/counting.hpp>
#if __has_include(<tagc/tagc.hpp>)
// defines: everything else; here to see that the umbrella compiles under nvcc
#  include <tagc/tagc.hpp>
#endif
#if defined(TAGC_CHECK_MPI_BOOTSTRAP)
// defines: tagc::nccl_communicator_from_mpi
#  include <tagc/comm/nccl_mpi_bootstrap.hpp>
#endif

#if defined(TAGC_CHECK_REDUCER)
// defines: tagc::split_two_level on NCCL (ncclCommSplit), tagc::TwoLevelReducer
#  include <tagc/comm/nccl_two_level.hpp>
#  include <tagc/plain_reducer.hpp>
#  include <tagc/int8_blocks.hpp>
#  include <tagc/two_level_all_gather.hpp>
#  include <tagc/two_level_reducer.hpp>

template <class R>
tagc::status run_once(tagc::nccl_communicator& c, std::span<const float> g, std::span<float> out, cudaStream_t s) {
  R r;
  const tagc::reducer_arguments a{.length = g.size(), .world_size = c.size(), .rank = c.rank()};
  TAGC_TRY(r.initialize(a, tagc::exec::cuda{s}));
  // The workspace query: what initialize allocated, but for CUB's temporaries (on top).
  if (R::workspace_bytes_for(a) > r.workspace_bytes())
    return {tagc::errc::internal, "workspace query above what initialize allocated"};
  TAGC_TRY(r.reduce_scatter(c, g, out));
  return r.load_state(r.save_state());
}

// The Reducer on the GPU: both index widths, both topologies, on NCCL.
tagc::status tagc_cuda_check_reducer(tagc::nccl_communicator& c, std::span<const float> g, std::span<float> out,
                                     cudaStream_t s) {
  using wide = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchPolicy<10>, tagc::DecodePolicy<>,
                             tagc::exec::cuda>;
  using narrow = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<10>,
                               tagc::DecodePolicy<tagc::decode_mode::peel>, tagc::exec::cuda>;
  wide w;
  TAGC_TRY(w.initialize({.length = g.size(), .world_size = c.size(), .rank = c.rank()}, tagc::exec::cuda{s}));
  TAGC_TRY(w.reduce_scatter(c, g, out));
  using scattered = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<tagc::index_auto, tagc::index_exchange::reduce_scatter>,
                                  tagc::SketchPolicy<4>, tagc::DecodePolicy<tagc::decode_mode::estimate>, tagc::exec::cuda>;
  using packed_f32 = tagc::Reducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedPolicy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>;
  packed_f32 pf;
  TAGC_TRY(pf.initialize({.length = g.size(), .world_size = c.size(), .rank = c.rank()}, tagc::exec::cuda{s}));
  TAGC_TRY(pf.reduce_scatter(c, g, out));
  scattered sc;
  TAGC_TRY(sc.initialize({.length = g.size(), .world_size = c.size(), .rank = c.rank()}, tagc::exec::cuda{s}));
  TAGC_TRY(sc.reduce_scatter(c, g, out));
  // Low precision: 16-bit packed values and sketch cells (bf16, fp16 with its
  // range scale), and a bf16 residual stored with stochastic rounding.
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedBf16Policy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedFp16Policy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchBf16Policy<10>,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyBf16ResidualPolicy, tagc::IndexPolicy<4>, tagc::SketchFp16Policy<10>,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  // The shared index (shared_reducer.hpp): fp32 and bf16 values, a bf16 residual.
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyPolicy, tagc::SharedIndexPolicy, tagc::PackedPolicy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyBf16ResidualPolicy, tagc::SharedIndexPolicy, tagc::PackedBf16Policy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  // The pooled index: every rank's share, all-gathered, the union's count read back.
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyPolicy, tagc::PooledIndexPolicy, tagc::PackedPolicy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyBf16ResidualPolicy, tagc::PooledIndexPolicy, tagc::PackedBf16Policy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  // gathered: the same union, each rank's values only where it picked
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyPolicy, tagc::GatheredIndexPolicy, tagc::PackedBf16Policy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  // routed: every rank's own k sent to the shards' owners (NCCL's grouped all_to_all_v)
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyPolicy, tagc::RoutedIndexPolicy, tagc::PackedPolicy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  TAGC_TRY((run_once<tagc::Reducer<tagc::SparsifyBf16ResidualPolicy, tagc::RoutedIndexPolicy, tagc::PackedBf16Policy,
                                   tagc::DecodePolicy<>, tagc::exec::cuda>>(c, g, out, s)));
  // Two levels: the world split by ncclCommSplit, plain bf16 inside a node, packed across.
  std::optional<tagc::two_level_communicator<tagc::nccl_communicator>> levels;
  TAGC_TRY(tagc::split_two_level(c, tagc::node_shape{c.size(), 1}, levels));
  tagc::TwoLevelReducer<tagc::PlainReducer<tagc::bfloat16, tagc::exec::cuda>, packed_f32> two;
  TAGC_TRY(two.initialize({.length = g.size(), .world_size = c.size(), .rank = c.rank()}, levels->shape(),
                          tagc::exec::cuda{s}));
  TAGC_TRY(two.reduce_scatter(*levels, g, out));
  TAGC_TRY(two.load_state(two.save_state()));
  // ... and the parameter all-gather back in two levels (fp32 and bf16).
  tagc::TwoLevelAllGather<float, tagc::exec::cuda> gather;
  TAGC_TRY(gather.initialize(g.size(), levels->shape(), c.rank(), tagc::exec::cuda{s}));
  tagc::exec::cuda::vector<float> whole(g.size());
  TAGC_TRY(gather.all_gather(*levels, std::span<const float>(out.data(), gather.shard_size()),
                             std::span<float>(tagc::detail::raw(whole), whole.size())));
  tagc::TwoLevelAllGather<tagc::bfloat16, tagc::exec::cuda> gather_bf16;
  TAGC_TRY(gather_bf16.initialize(g.size(), levels->shape(), c.rank(), tagc::exec::cuda{s}));
  tagc::exec::cuda::vector<tagc::bfloat16> shard16(gather_bf16.shard_size()), whole16(g.size());
  TAGC_TRY(gather_bf16.all_gather(*levels, std::span<const tagc::bfloat16>(tagc::detail::raw(shard16), shard16.size()),
                                  std::span<tagc::bfloat16>(tagc::detail::raw(whole16), whole16.size())));
  // ... and in int8 blocks (--gather-dtype int8): encode the shard, gather the bytes, decode.
  tagc::exec::cuda::vector<std::uint8_t> piece(tagc::int8_blocks::piece_bytes(gather.shard_size())),
      pieces(piece.size() * std::size_t(c.size()));
  tagc::int8_blocks::encode(tagc::exec::cuda{s}, out.data(), gather.shard_size(), tagc::detail::raw(piece));
  TAGC_TRY(c.all_gather(std::span<const std::uint8_t>(tagc::detail::raw(piece), piece.size()),
                        std::span<std::uint8_t>(tagc::detail::raw(pieces), pieces.size())));
  tagc::int8_blocks::decode(tagc::exec::cuda{s}, tagc::detail::raw(pieces), gather.shard_size(), g.size(),
                            tagc::detail::raw(whole));
  narrow n;
  TAGC_TRY(n.initialize(
      {.length = g.size(), .world_size = c.size(), .rank = c.rank(), .topo = tagc::topology::replicated},
      tagc::exec::cuda{s}));
  return n.all_reduce(c, g, out);
}
#endif

namespace {

static_assert(tagc::communicator<tagc::nccl_communicator>);
static_assert(tagc::communicator<tagc::counting_communicator<tagc::nccl_communicator>>);
static_assert(tagc::collective_request<tagc::nccl_communicator::request>);
static_assert(tagc::routing_communicator<tagc::counting_communicator<tagc::nccl_communicator>>);
static_assert(std::is_nothrow_move_constructible_v<tagc::nccl_communicator>);
static_assert(!std::is_copy_constructible_v<tagc::nccl_communicator>);

// A single-source functor, as policy/ writes them.
struct axpy {
  float a;
  TAGC_HOST_DEVICE float operator()(float x, float y) const { return a * x + y; }
};

// Every member template, for every reducible type (the concept only asks for some).
template <class T, class C>
tagc::status every_collective(C& c, std::span<const T> in, std::span<T> out) {
  TAGC_TRY(c.all_reduce(in, out));
  TAGC_TRY(c.reduce_scatter(in, out));
  TAGC_TRY(c.all_gather(in, out));
  TAGC_TRY(c.reduce(in, out, 0));
  TAGC_TRY(c.broadcast(out, 0));
  TAGC_TRY(c.start_all_reduce(in, out).wait());
  TAGC_TRY(c.start_reduce_scatter(in, out).wait());
  TAGC_TRY(c.start_all_gather(in, out).wait());
  return {};
}

template <class T>
tagc::status nccl_members(tagc::nccl_communicator& c, std::span<const T> in, std::span<T> out) {
  TAGC_TRY(every_collective<T>(c, in, out));
  tagc::counting_communicator<tagc::nccl_communicator> counted(c);
  TAGC_TRY(every_collective<T>(counted, in, out));
  const std::size_t offsets[2] = {0, in.size()};
  TAGC_TRY(c.reduce_each(in, std::span<const std::size_t>(offsets), out));
  const std::size_t counts[1] = {in.size()};
  TAGC_TRY(c.all_to_all_v(in, std::span<const std::size_t>(counts), out, std::span<const std::size_t>(counts)));
  TAGC_TRY(counted.all_to_all_v(in, std::span<const std::size_t>(counts), out, std::span<const std::size_t>(counts)));
  TAGC_TRY(c.group_start());
  TAGC_TRY(c.all_reduce(in, out));
  auto group = c.start_group_end();
  TAGC_TRY(group.join(c.compute_stream()));
  return group.wait();
}

}  // namespace

// Referenced from an exported function so nothing is discarded before codegen.
tagc::status tagc_cuda_check(tagc::nccl_communicator& c, cudaStream_t s) {
  tagc::exec::cuda space{s};
  tagc::exec::cuda::vector<float> x(16), y(16);
  thrust::sequence(space.policy(), x.begin(), x.end());
  thrust::transform(space.policy(), x.begin(), x.end(), y.begin(), y.begin(), axpy{2.0f});
  TAGC_TRY(space.synchronize());
  float host[16];
  TAGC_TRY(space.copy_to_host(thrust::raw_pointer_cast(y.data()), host, 16));

  c.set_compute_stream(s);
  TAGC_TRY(nccl_members<float>(c, {}, {}));
  TAGC_TRY(nccl_members<double>(c, {}, {}));
  TAGC_TRY(nccl_members<std::uint8_t>(c, {}, {}));
  TAGC_TRY(nccl_members<std::int32_t>(c, {}, {}));
  TAGC_TRY(nccl_members<std::uint32_t>(c, {}, {}));
  TAGC_TRY(nccl_members<std::int64_t>(c, {}, {}));
  TAGC_TRY(nccl_members<std::uint64_t>(c, {}, {}));
  TAGC_TRY(nccl_members<tagc::bfloat16>(c, {}, {}));
  TAGC_TRY(nccl_members<tagc::float16>(c, {}, {}));
  TAGC_TRY(c.barrier());
  TAGC_TRY(c.join(s));
  TAGC_TRY(c.synchronize());

  auto id = tagc::exchange_nccl_unique_id("/tmp/tagc-nccl-id", c.rank(), "check");
  if (!id) return id.error();
  auto other = tagc::nccl_communicator::create(*id, c.size(), c.rank(), {.device = c.device()});
  if (!other) return other.error();
#if defined(TAGC_CHECK_MPI_BOOTSTRAP)
  auto from_mpi = tagc::nccl_communicator_from_mpi(MPI_COMM_WORLD);
  if (!from_mpi) return from_mpi.error();
#endif
  return other->finalize();
}
