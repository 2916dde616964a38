// tagc_bench_two_level — the gradient exchange of one training step in two levels, without
// the step's compute: two-level bf16 (the fair baseline, as ZeRO++ compares) against the
// shared selection and the routed index across nodes, on the multi-node test bed (scripts/multinode.sh), so the
// time is what a step waits for its gradient, link and codec, and not 16 ranks' forward and
// backward queueing for 2 cores.
//
//   scripts/multinode.sh run --nodes 4 --ranks-per-node 4 --rate 1gbit -x OMP_NUM_THREADS --
//       build/bench/tagc_bench_two_level --ranks-per-node 4 [--calls 8] [--rounds 3]
//       [--compressed 6733824] [--plain 232960] [--theta 0.9875]
//
// The buffer is GPT-2 d2's gradient as the trainer splits it (`--compress non-attention`):
// `compressed` elements (token embedding, attention output projection, MLP matrices) and
// `plain` ones (position embedding, QKV, biases, norms). bf16 reduces both plainly in two
// levels; TAGC reduces the compressed part with
//   TwoLevelReducer<PlainReducer<bfloat16>,
//                   Reducer<SparsifyPolicy, SharedIndexPolicy | RoutedIndexPolicy, PackedBf16Policy>>
// and the plain part as bf16 does. Each call starts after a barrier and takes the slowest
// rank's time; the three configurations alternate call by call within each round. Every
// rank's gradient is independent noise, so the routed index has no hot shard here (the
// trainer's flat runs do: docs/results.md, Scaling). Printed:
// one CSV row per configuration (median and spread of the calls, bytes one node sends to
// other nodes per call), then the ratio of the medians; then the compressed part's
// cross-node exchange alone, bf16 against routed (cross_exchange below).
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include <tagc/comm/mpi.hpp>
#include <tagc/comm/mpi_two_level.hpp>
#include <tagc/tagc.hpp>

namespace {

using plain_bf16 = tagc::PlainReducer<tagc::bfloat16>;
using plain_levels = tagc::TwoLevelReducer<plain_bf16, plain_bf16>;
template <class Index>
using compressed_levels =
    tagc::TwoLevelReducer<plain_bf16, tagc::Reducer<tagc::SparsifyPolicy, Index, tagc::PackedBf16Policy>>;
using shared_levels = compressed_levels<tagc::SharedIndexPolicy>;
using routed_levels = compressed_levels<tagc::RoutedIndexPolicy>;
using routed_cross = tagc::Reducer<tagc::SparsifyPolicy, tagc::RoutedIndexPolicy, tagc::PackedBf16Policy>;

double flag(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  return fallback;
}

[[noreturn]] void fail(const char* what, const tagc::status& s) {
  std::fprintf(stderr, "tagc_bench_two_level: %s: %s\n", what, s.message().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

std::vector<float> gradient(std::size_t n, int rank) {
  std::mt19937 gen(1234u + unsigned(rank));
  std::normal_distribution<float> d(0.0f, 1e-3f);
  std::vector<float> g(n);
  for (auto& x : g) x = d(gen);
  return g;
}

// One configuration's reducers over the two parts; call() reduces both and returns the
// bytes this rank sent to other nodes.
template <class Compressed>
struct exchange {
  Compressed compressed;
  plain_levels plain;
  std::vector<float> g_c, g_p, out_c, out_p;

  void initialize(const tagc::reducer_arguments& base, std::size_t n_c, std::size_t n_p, tagc::node_shape shape,
                  int rank) {
    tagc::reducer_arguments a = base;
    a.length = n_c;
    if (auto s = compressed.initialize(a, shape); !s.ok()) fail("initialize (compressed part)", s);
    a.length = n_p;
    if (auto s = plain.initialize(a, shape); !s.ok()) fail("initialize (plain part)", s);
    g_c = gradient(n_c, rank);
    g_p = gradient(n_p, rank + 1000);
    out_c.resize(compressed.output_size());
    out_p.resize(plain.output_size());
  }
  tagc::reduce_stats last;  // the compressed part's last call (its cross stage's stage times)
  double call(tagc::two_level_communicator<tagc::mpi_communicator>& levels) {
    tagc::reduce_stats& a = last;
    tagc::reduce_stats b;
    if (auto s = compressed.reduce_scatter(levels, g_c, out_c, &a); !s.ok()) fail("reduce_scatter", s);
    if (auto s = plain.reduce_scatter(levels, g_p, out_p, &b); !s.ok()) fail("reduce_scatter", s);
    return a.internode_bytes() + b.internode_bytes();
  }
};

// The cross-node exchange alone: each lane's cross stage on its slice of a two-level call
// (slice = shard x nodes, shard = n / world rounded up), all K lanes of a node at once
// through the node's link, without the node stage around it: what a step waits for the
// network once the node has reduced (on 2 cores the node stage of 16 ranks is compute).
template <class Cross>
struct cross_exchange {
  Cross reducer;
  std::vector<float> g, out;

  void initialize(const tagc::reducer_arguments& base, std::size_t n, tagc::node_shape shape, int rank) {
    const std::size_t shard = (n + std::size_t(base.world_size) - 1) / std::size_t(base.world_size);
    tagc::reducer_arguments a = base;
    a.length = shard * std::size_t(shape.nodes);
    a.world_size = shape.nodes;
    a.rank = shape.node_of(rank);
    a.op = tagc::reduce_op::sum;
    if (auto s = reducer.initialize(a); !s.ok()) fail("initialize (cross stage alone)", s);
    g = gradient(a.length, rank);
    out.resize(reducer.output_size());
  }
  double call(tagc::two_level_communicator<tagc::mpi_communicator>& levels) {
    tagc::reduce_stats st;
    if (auto s = reducer.reduce_scatter(levels.cross, g, out, &st); !s.ok()) fail("reduce_scatter (cross alone)", s);
    return st.internode_bytes();
  }
};

template <class E>
double timed(E& e, tagc::two_level_communicator<tagc::mpi_communicator>& levels, double& bytes) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  bytes = e.call(levels);
  double dt = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return dt;
}

// Times the configurations alternating call by call, `rounds` x `calls` each, after one
// untimed call each (connections, first-touch); returns each one's call times, and in
// bytes[i] what configuration i's last call sent to other nodes, summed over a node's ranks.
template <class... E>
std::array<std::vector<double>, sizeof...(E)> alternate(tagc::two_level_communicator<tagc::mpi_communicator>& levels,
                                                        int rounds, int calls, double* bytes, E&... e) {
  std::array<std::vector<double>, sizeof...(E)> t;
  std::size_t i = 0;
  ((timed(e, levels, bytes[i++])), ...);
  for (int r = 0; r < rounds; ++r)
    for (int c = 0; c < calls; ++c) {
      i = 0;
      ((t[i].push_back(timed(e, levels, bytes[i])), ++i), ...);
    }
  MPI_Allreduce(MPI_IN_PLACE, bytes, int(sizeof...(E)), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return t;
}

// Prints one CSV row; returns the median in seconds.
double report(const char* name, std::vector<double> t, double node_bytes) {
  std::sort(t.begin(), t.end());
  std::printf("%s,%zu,%.2f,%.2f,%.2f,%.0f\n", name, t.size(), 1e3 * t[t.size() / 2], 1e3 * t.front(), 1e3 * t.back(),
              node_bytes);
  return t[t.size() / 2];
}

void print_stages(const char* name, const tagc::reduce_stats& last) {
  const auto& t = last.seconds;
  std::printf("# %s cross stage, rank 0, last call (ms): check %.1f, sparsify %.1f, index_exchange %.1f, "
              "pack %.1f, value_exchange %.1f, decode %.1f, residual %.1f\n",
              name, 1e3 * t.check, 1e3 * t.sparsify, 1e3 * t.index_exchange, 1e3 * t.sketch, 1e3 * t.value_exchange,
              1e3 * t.decode, 1e3 * t.residual);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  tagc::mpi_communicator world(MPI_COMM_WORLD);
  const int k = int(flag(argc, argv, "--ranks-per-node", 1));
  const int calls = int(flag(argc, argv, "--calls", 8)), rounds = int(flag(argc, argv, "--rounds", 3));
  const std::size_t n_c = std::size_t(flag(argc, argv, "--compressed", 6733824));
  const std::size_t n_p = std::size_t(flag(argc, argv, "--plain", 232960));
  const double theta = flag(argc, argv, "--theta", 0.9875);
  std::optional<tagc::two_level_communicator<tagc::mpi_communicator>> levels;
  if (auto s = tagc::split_two_level(world, k, levels); !s.ok()) fail("split_two_level", s);
  const tagc::node_shape shape = levels->shape();
  const tagc::reducer_arguments base{.world_size = world.size(), .rank = world.rank(),
                                     .op = tagc::reduce_op::mean, .sparsity = theta};
  exchange<plain_levels> bf16;
  exchange<shared_levels> shared;
  exchange<routed_levels> routed;
  bf16.initialize(base, n_c, n_p, shape, world.rank());
  shared.initialize(base, n_c, n_p, shape, world.rank());
  routed.initialize(base, n_c, n_p, shape, world.rank());
  shared.compressed.cross_stage().set_profiling(true);  // where the cross stage's time goes
  routed.compressed.cross_stage().set_profiling(true);

  double bytes[3] = {0, 0, 0};
  const auto [t_bf16, t_shared, t_routed] = alternate(*levels, rounds, calls, bytes, bf16, shared, routed);
  if (world.rank() == 0) {
    std::printf("# %d nodes x %d ranks, %zu compressed + %zu plain elements, theta %.4f\n", shape.nodes,
                shape.ranks_per_node, n_c, n_p, theta);
    std::printf("config,calls,median_ms,min_ms,max_ms,internode_bytes_per_node\n");
    const double m_bf16 = report("two-level bf16", t_bf16, bytes[0] / shape.nodes);
    const double m_shared = report("two-level shared-bf16", t_shared, bytes[1] / shape.nodes);
    const double m_routed = report("two-level routed-bf16", t_routed, bytes[2] / shape.nodes);
    std::printf("# bf16 / shared, medians: %.2fx; bf16 / routed: %.2fx\n", m_bf16 / m_shared, m_bf16 / m_routed);
    // Each compressed cross stage, rank 0's last call: codec (sparsify = g + residual,
    // sketch = packing, decode, residual) against its collectives. index_exchange: the
    // shared leader's selection with its broadcast; the routed rank's own selection (nothing
    // is sent). value_exchange: routed, the counts, the entries and the owner's sum.
    print_stages("shared", shared.last);
    print_stages("routed", routed.last);
  }

  // The compressed part's cross-node exchange alone, bf16 against routed (alternating).
  cross_exchange<plain_bf16> bf16_cross;
  cross_exchange<routed_cross> routed_cross_only;
  bf16_cross.initialize(base, n_c, shape, world.rank());
  routed_cross_only.initialize(base, n_c, shape, world.rank());
  double cross_bytes[2] = {0, 0};
  const auto [c_bf16, c_routed] = alternate(*levels, rounds, calls, cross_bytes, bf16_cross, routed_cross_only);
  if (world.rank() == 0) {
    std::printf("# the compressed part's cross-node exchange alone (every lane's cross stage at once, no node stage)\n");
    const double m_bf16 = report("cross-node bf16", c_bf16, cross_bytes[0] / shape.nodes);
    const double m_routed = report("cross-node routed-bf16", c_routed, cross_bytes[1] / shape.nodes);
    std::printf("# cross-node, bf16 / routed, medians: %.2fx\n", m_bf16 / m_routed);
  }
  MPI_Finalize();
  return 0;
}
