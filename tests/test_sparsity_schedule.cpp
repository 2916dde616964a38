// The sparsity schedule (policy/sparsity_schedule.hpp) and its hook in the Reducer:
// the ramp's values, refusals, determinism across ranks, the step the target is reached,
// resume continuity through save_state / load_state, and adaptive theta on top of it.
#include <doctest/doctest.h>

#include <cmath>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
using packed_t = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedBf16Policy, DecodePolicy<>>;
using sketch_t = reducer_t<1, 10>;

sparsity_schedule ramp(std::uint64_t w, double start, schedule_shape shape = schedule_shape::exponential) {
  sparsity_schedule s;
  s.warmup_steps = w;
  s.start = start;
  s.shape = shape;
  return s;
}
}  // namespace

TEST_CASE("sparsity schedule: exponential and linear ramps of the density, exact at both ends") {
  const double target = 0.9875;
  const auto e = ramp(10, 0.75), l = ramp(10, 0.75, schedule_shape::linear);
  for (const auto& s : {e, l}) {
    CHECK(scheduled_sparsity(s, target, target, 0) == doctest::Approx(0.75).epsilon(1e-15));
    double prev = 0.0;
    for (std::uint64_t t = 0; t < 10; ++t) {  // strictly rising, below the target during the warm-up
      const double th = scheduled_sparsity(s, target, target, t);
      CHECK(th > prev);
      CHECK(th < target);
      prev = th;
    }
    for (std::uint64_t t : {10ull, 11ull, 1000ull}) CHECK(scheduled_sparsity(s, target, target, t) == target);
  }
  // Exponential: the density falls by the same factor every step (DGC's geometric ramp):
  // (0.0125 / 0.25)^(1/10) per step; linear: the midpoint halves the density gap.
  const double f = std::pow(0.0125 / 0.25, 0.1);
  for (std::uint64_t t = 1; t < 10; ++t)
    CHECK((1.0 - scheduled_sparsity(e, target, target, t)) / (1.0 - scheduled_sparsity(e, target, target, t - 1)) ==
          doctest::Approx(f).epsilon(1e-12));
  CHECK(scheduled_sparsity(l, target, target, 5) == doctest::Approx((0.75 + target) / 2).epsilon(1e-14));
  // Dense start: the first call keeps everything.
  CHECK(scheduled_sparsity(ramp(4, 0.0), target, target, 0) == 0.0);
  // Disabled: the base itself, whatever the other fields say.
  CHECK(scheduled_sparsity(ramp(0, 0.3), target, 0.97, 0) == 0.97);
  // Adaptive moved the base: the ramp's density is scaled by the base's factor.
  const double base = 0.975;  // density 0.025 = 2 x the target's
  for (std::uint64_t t = 0; t < 10; ++t)
    CHECK(1.0 - scheduled_sparsity(e, target, base, t) ==
          doctest::Approx(2.0 * (1.0 - scheduled_sparsity(e, target, target, t))).epsilon(1e-12));
  CHECK(scheduled_sparsity(e, target, base, 10) == base);
}

TEST_CASE("sparsity schedule: bad arguments are refused with a status naming them") {
  const double target = 0.99;
  CHECK(check_sparsity_schedule(ramp(0, 5.0), target).ok());  // disabled: not looked at
  CHECK(check_sparsity_schedule(ramp(10, 0.0), target).ok());
  CHECK(check_sparsity_schedule(ramp(10, target), target).ok());  // a flat "ramp" is allowed
  struct bad { sparsity_schedule s; double target; const char* says; };
  const bad cases[] = {
      {ramp(10, 0.995), target, "above the target"},
      {ramp(10, 1.0), target, "outside [0, 1)"},
      {ramp(10, -0.1), target, "outside [0, 1)"},
      {ramp(10, std::nan("")), target, "outside [0, 1)"},
      {ramp(10, 0.5), 1.0, "target below 1"},
      {ramp(10, 0.5, schedule_shape(7)), target, "neither exponential nor linear"},
  };
  for (const auto& c : cases) {
    const status s = check_sparsity_schedule(c.s, c.target);
    CHECK(s.code() == errc::invalid_argument);
    CHECK_MESSAGE(s.what().find(c.says) != std::string::npos, s.what());
  }
  // The Reducer refuses them too (can_implement, initialize), against its resolved target:
  // the paper's 0.9875 when sparsity is left at its default.
  reducer_arguments a{.length = 1000, .world_size = 2, .rank = 0, .sparsity = -1.0};
  a.schedule = ramp(10, 0.99);
  CHECK(sketch_t::can_implement(a).code() == errc::invalid_argument);
  a.schedule = ramp(10, 0.98);
  CHECK(sketch_t::can_implement(a).ok());
  a.sparsity = 1.0;
  packed_t p;
  const status s = p.initialize(a);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(s.what().find("target below 1") != std::string::npos);
}

TEST_CASE("sparsity schedule: every rank uses the same theta; the target is reached on call W; bytes follow theta") {
  const std::size_t n = 30000;
  const int world = 3, w = 6, steps = 9;
  const double target = 0.99;
  for (auto shape : {schedule_shape::exponential, schedule_shape::linear}) {
    CAPTURE(int(shape));
    const auto sched = ramp(w, 0.5, shape);
    const input_fn in = [&](int r, int t) { return gradient(n, 31, r, t); };
    const auto rec = simulate<packed_t>(world, n, target, steps, in, topology::sharded, reduce_op::sum,
                                        [&](reducer_arguments& a) { a.schedule = sched; });
    REQUIRE(rec.failures.empty());
    for (int t = 0; t < steps; ++t) {
      const double want = scheduled_sparsity(sched, target, target, std::uint64_t(t));
      for (int r = 0; r < world; ++r) {
        CHECK(rec.stats[r][t].theta == want);  // the same bits on every rank
        // The threshold keeps at most floor((1 - theta) n) entries, and (continuous
        // values, no ties) exactly that many.
        CHECK(rec.stats[r][t].kept == std::size_t(std::floor((1.0 - want) * double(n))));
      }
      if (t < w) CHECK(want < target);
      else CHECK(want == target);
    }
    // Packed values: the bytes follow the union, so the warm-up sends more and the steps
    // after it exactly what an unscheduled run sends at the same union size.
    CHECK(rec.stats[0][0].value_bytes > 10.0 * rec.stats[0][w].value_bytes);
  }
}

TEST_CASE("sparsity schedule: a run resumed from save_state continues the ramp exactly") {
  const std::size_t n = 20000;
  const int world = 2, w = 8, total = 12;
  for (int save_at : {0, 3, 7, 9}) {
    CAPTURE(save_at);
    on_ranks(world, [&](local_communicator& c) {
      reducer_arguments args{.length = n, .world_size = world, .rank = c.rank(), .sparsity = 0.99};
      args.schedule = ramp(w, 0.75);
      packed_t a, b;
      REQUIRE(a.initialize(args).ok());
      REQUIRE(b.initialize(args).ok());
      std::vector<float> oa(a.output_size()), ob(b.output_size());
      for (int t = 0; t < save_at; ++t) {
        const auto g = gradient(n, 9, c.rank(), t);
        REQUIRE(a.reduce_scatter(c, std::span<const float>(g), std::span<float>(oa)).ok());
      }
      REQUIRE(b.load_state(a.save_state()).ok());  // a fresh reducer, as a resumed run builds it
      CHECK(b.steps() == std::uint64_t(save_at));
      for (int t = save_at; t < total; ++t) {
        CHECK(b.next_sparsity() == a.next_sparsity());
        CHECK(a.next_sparsity() == scheduled_sparsity(args.schedule, 0.99, 0.99, std::uint64_t(t)));
        const auto g = gradient(n, 9, c.rank(), t);
        reduce_stats sa, sb;
        REQUIRE(a.reduce_scatter(c, std::span<const float>(g), std::span<float>(oa), &sa).ok());
        REQUIRE(b.reduce_scatter(c, std::span<const float>(g), std::span<float>(ob), &sb).ok());
        CHECK(sa.theta == sb.theta);
        CHECK(oa == ob);
      }
      CHECK(a.save_state() == b.save_state());
    });
  }
}

TEST_CASE("sparsity schedule with adaptive theta: adaptive steers a factor around the ramp, and resumes exactly") {
  const std::size_t n = 40000;
  const int world = 2, w = 10, total = 20;
  const double target = 0.9875;
  on_ranks(world, [&](local_communicator& c) {
    reducer_arguments args{.length = n, .world_size = world, .rank = c.rank(), .sparsity = target};
    args.adapt.enabled = true;
    args.schedule = ramp(w, 0.97);  // 2 ranks x 3 % kept in cells of 10 %: load ~0.6, decodable
    sketch_t a, b;
    REQUIRE(a.initialize(args).ok());
    REQUIRE(b.initialize(args).ok());
    std::vector<float> oa(a.output_size()), ob(b.output_size());
    std::vector<std::byte> saved;
    std::vector<double> thetas;
    bool moved = false;
    for (int t = 0; t < total; ++t) {
      // The theta of this call, from the base adaptive steered to (its factor relative to the
      // target), scaled onto the ramp: (1 - theta) / ramp density == (1 - base) / (1 - target).
      const double base = a.sparsity();
      const double ramp_d = 1.0 - scheduled_sparsity(args.schedule, target, target, std::uint64_t(t));
      moved = moved || base != target;
      const auto g = gradient(n, 13, c.rank(), t);
      reduce_stats st;
      REQUIRE(a.reduce_scatter(c, std::span<const float>(g), std::span<float>(oa), &st).ok());
      // adaptive updates the base inside the call (before the threshold): compare with it
      const double used_factor = (1.0 - st.theta) / ramp_d;
      if (t >= w) CHECK(st.theta == a.sparsity());
      else CHECK(used_factor == doctest::Approx((1.0 - a.sparsity()) / (1.0 - target)).epsilon(1e-9));
      CHECK(st.unresolved == 0);  // adaptive keeps the sketch decodable along the ramp
      thetas.push_back(st.theta);
      if (t == 5) saved = a.save_state();
    }
    CHECK(moved);  // adaptive did move theta away from the configured target
    // The same theta sequence on the other rank.
    std::vector<double> other(thetas.size());
    REQUIRE(c.all_reduce(std::span<const double>(thetas), std::span<double>(other)).ok());
    for (std::size_t i = 0; i < thetas.size(); ++i) CHECK(other[i] == 2.0 * thetas[i]);
    // Resume from call 6: the same thetas and outputs as the uninterrupted run.
    REQUIRE(b.load_state(saved).ok());
    for (int t = 6; t < total; ++t) {
      const auto g = gradient(n, 13, c.rank(), t);
      reduce_stats st;
      REQUIRE(b.reduce_scatter(c, std::span<const float>(g), std::span<float>(ob), &st).ok());
      CHECK(st.theta == thetas[std::size_t(t)]);
    }
    CHECK(ob == oa);
  });
}
