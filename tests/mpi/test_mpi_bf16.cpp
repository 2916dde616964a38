// defines: tests of bfloat16 sums through tagc::mpi_communicator under mpirun
//          (2 and 3 ranks): all_reduce and reduce_scatter against a double
//          reference within bf16 rounding (the op rounds at every reduction
//          step), exact sums where every partial sum is representable, and the
//          bf16 op not being confused with uint16 / saturating arithmetic.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "tagc/comm/mpi.hpp"

namespace {

using tagc::bfloat16;
using tagc::mpi_communicator;

mpi_communicator world() {
  return mpi_communicator(MPI_COMM_WORLD, {.checked = true, .timeout = std::chrono::seconds(20)});
}

// Deterministic bf16 input of rank r at index i: mixed signs and magnitudes
// (1e-3 .. 1e3), so a wrong op (integer add of the bit patterns) cannot pass.
bfloat16 input(int r, std::size_t i) {
  const int k = int((i * 37 + std::size_t(r) * 101) % 199) - 99;
  const float scale = std::ldexp(1.0f, int((i + std::size_t(r) * 3) % 21) - 10);
  return bfloat16(float(k) * 0.37f * scale);
}

// The tolerance of a sum of n bf16 values rounded at each of (at most) n-1
// steps: each rounding errs by at most half an ulp of a partial sum, and every
// partial sum is bounded by sum |x|.
double tolerance(int n, std::size_t i) {
  double abs_sum = 0;
  for (int r = 0; r < n; ++r) abs_sum += std::fabs(double(float(input(r, i))));
  return double(n - 1) * abs_sum * std::ldexp(1.0, -8) + 1e-30;
}
double exact(int n, std::size_t i) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += double(float(input(r, i)));
  return s;
}

}  // namespace

TEST_CASE("mpi_communicator: bf16 all_reduce and reduce_scatter match a double reference") {
  auto comm = world();
  REQUIRE(comm.init_status().ok());
  const int n = comm.size(), me = comm.rank();
  INFO("rank ", me, " of ", n);

  const std::size_t block = 4099;  // odd, and large enough for every algorithm to pipeline
  std::vector<bfloat16> in(block * std::size_t(n));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = input(me, i);

  SUBCASE("all_reduce") {
    std::vector<bfloat16> out(in.size());
    const auto s = comm.all_reduce(std::span<const bfloat16>(in), std::span<bfloat16>(out));
    REQUIRE_MESSAGE(s.ok(), s.what());
    for (std::size_t i = 0; i < out.size(); ++i) {
      INFO("i = ", i);
      REQUIRE(std::fabs(double(float(out[i])) - exact(n, i)) <= tolerance(n, i));
    }
    // Every rank holds the same bits.
    std::vector<bfloat16> out0(out);
    REQUIRE(comm.broadcast(std::span<bfloat16>(out0), 0).ok());
    for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == out0[i]);
  }

  SUBCASE("reduce_scatter, out of place and in place") {
    std::vector<bfloat16> part(block);
    auto s = comm.reduce_scatter(std::span<const bfloat16>(in), std::span<bfloat16>(part));
    REQUIRE_MESSAGE(s.ok(), s.what());
    for (std::size_t i = 0; i < block; ++i) {
      const std::size_t at = std::size_t(me) * block + i;
      INFO("i = ", at);
      REQUIRE(std::fabs(double(float(part[i])) - exact(n, at)) <= tolerance(n, at));
    }
    std::vector<bfloat16> buf(in);
    const std::span<bfloat16> mine = std::span<bfloat16>(buf).subspan(std::size_t(me) * block, block);
    s = comm.reduce_scatter(std::span<const bfloat16>(buf), mine);
    REQUIRE_MESSAGE(s.ok(), s.what());
    for (std::size_t i = 0; i < block; ++i) REQUIRE(mine[i] == part[i]);
  }

  SUBCASE("exact when every partial sum is a bf16 value") {
    // Small integers: any order of additions is exact, so the bits must match.
    std::vector<bfloat16> x(3 * std::size_t(n)), y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = bfloat16(float(int(i % 9) - 4) * float(me + 1));
    REQUIRE(comm.all_reduce(std::span<const bfloat16>(x), std::span<bfloat16>(y)).ok());
    const float tri = float(n * (n + 1) / 2);
    for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(float(y[i]) == float(int(i % 9) - 4) * tri);
  }

  SUBCASE("non-blocking, two in flight, and Inf / NaN propagate") {
    std::vector<bfloat16> a(8, bfloat16(1.5f)), b(8, bfloat16(-2.0f)), ra(8), rb(8);
    if (me == 0) a[3] = bfloat16(INFINITY);
    if (me == n - 1) b[5] = bfloat16(NAN);
    auto qa = comm.start_all_reduce(std::span<const bfloat16>(a), std::span<bfloat16>(ra));
    auto qb = comm.start_all_reduce(std::span<const bfloat16>(b), std::span<bfloat16>(rb));
    REQUIRE(qb.wait().ok());
    REQUIRE(qa.wait().ok());
    CHECK(float(ra[0]) == 1.5f * float(n));
    CHECK(std::isinf(float(ra[3])));
    CHECK(float(rb[0]) == -2.0f * float(n));
    CHECK(std::isnan(float(rb[5])));
  }
}
