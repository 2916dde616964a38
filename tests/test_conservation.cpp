// Conservation: nothing is lost, for every policy combination — split from
// test_reducer.cpp because its 18 instantiations are the slowest thing to compile.
#include <doctest/doctest.h>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
// Nothing lost: for every element, the inputs of all ranks and steps equal what
// its owner delivered plus what the ranks still hold in their residuals — in
// overload too, where owners leave entries unresolved (and may deliver
// estimates, which the owner then owes back through its residual).
template <int Bits, int Ratio, decode_mode Mode>
void check_conservation(int world, std::size_t n, int steps) {
  CAPTURE(Bits); CAPTURE(Ratio); CAPTURE(int(Mode)); CAPTURE(world); CAPTURE(n);
  const input_fn in = [&](int r, int t) { return gradient(n, 77, r, t, 0.5); };
  auto rec = simulate<reducer_t<Bits, Ratio, Mode>>(world, n, -1.0, steps, in);
  REQUIRE(rec.failures.empty());
  const layout& l = rec.lay;
  std::vector<double> owed(l.padded(), 0.0);
  double scale = 0.0;
  std::size_t unresolved = 0;
  for (int r = 0; r < world; ++r)
    for (int t = 0; t < steps; ++t) {
      unresolved += rec.stats[r][t].unresolved;
      for (std::size_t i = 0; i < n; ++i) {
        owed[i] += rec.in[r][t][i];
        scale = std::max(scale, std::fabs(double(rec.in[r][t][i])));
      }
    }
  for (int r = 0; r < world; ++r) {
    for (std::size_t i = 0; i < n; ++i) owed[i] -= rec.residual[r][i];
    for (int t = 0; t < steps; ++t)
      for (std::size_t e = 0; e < l.shard_size; ++e) owed[std::size_t(r) * l.shard_size + e] -= rec.out[r][t][e];
  }
  const double tol = 1e-4 * scale * world * steps;
  for (std::size_t i = 0; i < owed.size(); ++i)
    if (std::fabs(owed[i]) > tol) FAIL("entry " << i << " lost " << owed[i]);
  MESSAGE("unresolved entries over the run: " << unresolved);
}
}  // namespace

TEST_CASE("conservation: nothing is lost, for every policy combination") {
  constexpr auto P = decode_mode::peel, E = decode_mode::estimate, PE = decode_mode::peel_then_estimate;
  const std::size_t n = 20000;
  const int steps = 5;
  for (int world : {2, 3}) {
    check_conservation<4, 2, P>(world, n, steps);
    check_conservation<4, 2, E>(world, n, steps);
    check_conservation<4, 2, PE>(world, n, steps);
    check_conservation<4, 4, P>(world, n, steps);
    check_conservation<4, 4, E>(world, n, steps);
    check_conservation<4, 4, PE>(world, n, steps);
    check_conservation<4, 10, P>(world, n, steps);
    check_conservation<4, 10, E>(world, n, steps);
    check_conservation<4, 10, PE>(world, n, steps);
    check_conservation<1, 2, P>(world, n, steps);
    check_conservation<1, 2, E>(world, n, steps);
    check_conservation<1, 2, PE>(world, n, steps);
    check_conservation<1, 4, P>(world, n, steps);
    check_conservation<1, 4, E>(world, n, steps);
    check_conservation<1, 4, PE>(world, n, steps);
    check_conservation<1, 10, P>(world, n, steps);
    check_conservation<1, 10, E>(world, n, steps);
    check_conservation<1, 10, PE>(world, n, steps);
  }
}

