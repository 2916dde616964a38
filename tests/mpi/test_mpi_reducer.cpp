// The Reducer over MPI gives what it gives over the in-process backend for the
// same inputs: every MPI rank also replays the whole world with threads
// (local_world) and compares its own output and residual. Exactly where no float
// sum across ranks is involved (which entries were kept, sent, resolved); to
// float-sum tolerance for values, since MPI may add the ranks' sketches in
// another order (recursive halving at 4 ranks) than the local backend.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <mutex>
#include <random>

#include <tagc/comm/mpi.hpp>
#include <tagc/tagc.hpp>

using namespace tagc;

namespace {

std::vector<float> gradient(std::size_t n, int rank, int step) {
  std::mt19937_64 rng(std::uint64_t(rank) * 7919u + std::uint64_t(step) * 104729u + 1);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = 1e-3f * t(rng);
  return g;
}

struct trace {
  std::vector<std::vector<float>> out;  // per step
  std::vector<float> residual;
  std::vector<reduce_stats> stats;
};

template <class R, class Comm>
trace run(Comm& comm, std::size_t n, double theta, int steps, topology topo, double bound) {
  trace tr;
  R red;
  REQUIRE(red.initialize({.length = n, .world_size = comm.size(), .rank = comm.rank(), .topo = topo, .sparsity = theta,
                          .union_bound = bound})
              .ok());
  for (int t = 0; t < steps; ++t) {
    const auto g = gradient(n, comm.rank(), t);
    std::vector<float> out(red.output_size());
    reduce_stats st;
    const std::span<const float> in(g);
    const status s = topo == topology::sharded ? red.reduce_scatter(comm, in, std::span<float>(out), &st)
                                               : red.all_reduce(comm, in, std::span<float>(out), &st);
    REQUIRE_MESSAGE(s.ok(), s.what());
    tr.out.push_back(std::move(out));
    tr.stats.push_back(st);
  }
  tr.residual = red.residual_to_host();
  return tr;
}

template <class R>
void same_as_local(std::size_t n, double theta, int steps, topology topo = topology::sharded, double bound = 0.0) {
  mpi_communicator comm(MPI_COMM_WORLD);
  const int me = comm.rank();
  const trace over_mpi = run<R>(comm, n, theta, steps, topo, bound);
  trace replay;
  std::mutex m;
  local_world world(comm.size());
  world.run([&](local_communicator& c) {
    trace tr = run<R>(c, n, theta, steps, topo, bound);
    if (c.rank() == me) {
      std::lock_guard lk(m);
      replay = std::move(tr);
    }
  });
  INFO("rank " << me << ", n " << n << ", theta " << theta << ", topology " << int(topo));
  const auto close = [](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    float scale = 1e-30f;
    for (float x : b) scale = std::max(scale, std::fabs(x));
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::fabs(a[i] - b[i]) > 1e-5f * scale) return false;
    return true;
  };
  for (int t = 0; t < steps; ++t) {
    const auto& a = over_mpi.stats[std::size_t(t)];
    const auto& b = replay.stats[std::size_t(t)];
    CHECK(close(over_mpi.out[std::size_t(t)], replay.out[std::size_t(t)]));
    CHECK(a.kept == b.kept);
    CHECK(a.support == b.support);
    CHECK(a.unresolved == b.unresolved);
    CHECK(a.retransmitted == b.retransmitted);
    CHECK(a.total_bytes() == b.total_bytes());
  }
  CHECK(close(over_mpi.residual, replay.residual));
}

}  // namespace

TEST_CASE("Reducer over MPI == Reducer over the in-process backend") {
  using paper = Reducer<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<10>, DecodePolicy<>>;
  using exact = Reducer<SparsifyPolicy, ExactIndexPolicy, SketchPolicy<4>, DecodePolicy<decode_mode::peel>>;
  using scatter = Reducer<SparsifyPolicy, IndexPolicy<index_auto, index_exchange::reduce_scatter>, SketchPolicy<2>,
                          DecodePolicy<>>;
  using packed = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedPolicy, DecodePolicy<>>;
  same_as_local<paper>(100003, 0.9875, 3);
  same_as_local<paper>(20000, 0.9, 3);  // overloaded: estimation and retransmission cross the wire too
  same_as_local<exact>(65536, 0.95, 3);
  same_as_local<scatter>(4097, 0.8, 2);
  same_as_local<packed>(30001, 0.9, 3);
  // the routed index: entries by all_to_all_v; all-reduced, the owners' sums by broadcasts
  using routed = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedBf16Policy, DecodePolicy<>>;
  same_as_local<routed>(70001, 0.99, 3);
  same_as_local<routed>(70001, 0.99, 3, topology::replicated);
  same_as_local<routed>(70001, 0.99, 3, topology::replicated, 1.0);  // each owner forwarding its largest sums
}

TEST_CASE("bad input over MPI: every rank gets the same error, nobody hangs") {
  mpi_communicator comm(MPI_COMM_WORLD);
  // an exact index at any world size this runs at (the 4-bit one counts at most 15 ranks)
  using R = Reducer<SparsifyPolicy, ExactIndexPolicy, SketchPolicy<10>, DecodePolicy<>>;
  const std::size_t n = 5000;
  R red;
  REQUIRE(red.initialize({.length = n, .world_size = comm.size(), .rank = comm.rank()}).ok());
  auto g = gradient(comm.rank() == 1 ? n + 1 : n, comm.rank(), 0);
  std::vector<float> out(red.output_size());
  status s = red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out));
  CHECK(s.code() == errc::size_mismatch);
  CHECK(s.message().find("rank 1 passed a gradient of 5001 elements") != std::string::npos);
  g = gradient(n, comm.rank(), 0);
  if (comm.rank() == comm.size() - 1) g[7] = std::nanf("");
  s = red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out));
  CHECK(s.code() == errc::non_finite);
  for (float x : red.residual_to_host()) REQUIRE(x == 0.0f);
  g[7] = 0.0f;
  CHECK(red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out)).ok());
}
