// split_two_level over MPI and a TwoLevelReducer on its two communicators: the node
// shapes a world admits give the flat reduce-scatter's shards bit for bit (small
// integers: every sum exact in any order); shapes that cannot work are refused on every
// rank with the same message.
#include <doctest/doctest.h>
#include <mpi.h>

#include <optional>
#include <vector>

#include <tagc/comm/mpi.hpp>
#include <tagc/comm/mpi_two_level.hpp>
#include <tagc/plain_reducer.hpp>
#include <tagc/reducer.hpp>
#include <tagc/two_level_reducer.hpp>

using namespace tagc;

namespace {

std::vector<float> small_integers(std::size_t n, int rank) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = float(int((i * 2654435761u + std::size_t(rank) * 40503u) % 9u) - 4);
  return g;
}

using Plain = PlainReducer<float>;
using Packed = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedPolicy>;

}  // namespace

TEST_CASE("MPI two levels: every divisor of the world as ranks per node gives the flat shards") {
  mpi_communicator world(MPI_COMM_WORLD);
  REQUIRE(world.init_status().ok());
  const int n = world.size();
  const std::size_t len = 10007;
  const auto g = small_integers(len, world.rank());
  Plain flat;
  REQUIRE(flat.initialize({.length = len, .world_size = n, .rank = world.rank(), .op = reduce_op::mean}).ok());
  std::vector<float> want(flat.output_size());
  REQUIRE(flat.reduce_scatter(world, g, want).ok());
  for (int k = 1; k <= n; ++k) {
    if (n % k != 0) continue;
    CAPTURE(k);
    std::optional<two_level_communicator<mpi_communicator>> levels;
    const status s = split_two_level(world, k, levels);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(levels->shape() == node_shape{n / k, k});
    CHECK(levels->rank() == world.rank());
    const reducer_arguments args{.length = len, .world_size = n, .rank = world.rank(), .op = reduce_op::mean,
                                 .sparsity = 0.0};
    TwoLevelReducer<Plain, Plain> plain;
    REQUIRE(plain.initialize(args, levels->shape()).ok());
    std::vector<float> got(plain.output_size());
    REQUIRE(plain.reduce_scatter(*levels, g, got).ok());
    CHECK(got == want);
    TwoLevelReducer<Plain, Packed> packed;
    REQUIRE(packed.initialize(args, levels->shape()).ok());
    std::fill(got.begin(), got.end(), -1.0f);
    REQUIRE(packed.reduce_scatter(*levels, g, got).ok());
    CHECK(got == want);
  }
}

TEST_CASE("MPI two levels: by host, and shapes that cannot work, refused on every rank") {
  mpi_communicator world(MPI_COMM_WORLD);
  const int n = world.size();
  std::optional<two_level_communicator<mpi_communicator>> levels;
  // One host here: 'auto' makes one node of every rank.
  REQUIRE(split_two_level(world, 0, levels).ok());
  CHECK(levels->shape() == node_shape{1, n});
  levels.reset();
  // A count that does not divide the world.
  const status s = split_two_level(world, n + 1, levels);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(s.message().find("does not divide the world size") != std::string::npos);
  CHECK(!levels);
  // Ranks that disagree: rank 0 asks for 1, the others for the whole world.
  if (n > 1) {
    const status d = split_two_level(world, world.rank() == 0 ? 1 : n, levels);
    CHECK(d.code() == errc::invalid_argument);
    CHECK(d.message().find("differs between ranks") != std::string::npos);
  }
  // and the world still works afterwards (nobody was left inside a collective)
  CHECK(world.barrier().ok());
}
