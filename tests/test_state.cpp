// The reducer's own words when something is wrong: every status names the unit
// (reducer_arguments::name) and the step, a failed collective names the phase
// it failed in, and load_state refuses a damaged state (range checks on
// everything it restores) instead of running on it.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <random>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
using state_reducer = Reducer<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>, DecodePolicy<>>;

constexpr std::size_t theta_offset = 11 * 8;  // after the header words (state version 4)
constexpr std::size_t feedback_offset = theta_offset + 8;
constexpr std::size_t step_offset = feedback_offset + 16;
constexpr std::size_t residual_offset = step_offset + 8;

// A state saved by rank 0 of a 2-rank run after a few steps, and its arguments.
struct saved {
  reducer_arguments args;
  std::vector<std::byte> bytes;
};
saved make_state(std::size_t n) {
  saved out;
  std::mutex m;
  on_ranks(2, [&](local_communicator& comm) {
    const reducer_arguments a{.length = n, .world_size = 2, .rank = comm.rank(), .sparsity = 0.9};
    state_reducer red;
    REQUIRE(red.initialize(a).ok());
    std::vector<float> out_v(red.output_size());
    for (int t = 0; t < 3; ++t) REQUIRE(red.reduce_scatter(comm, gradient(n, 5, comm.rank(), t), out_v).ok());
    if (comm.rank() == 0) {
      std::lock_guard lk(m);
      out.args = a;
      out.bytes = red.save_state();
    }
  });
  return out;
}

template <class T>
void poke(std::vector<std::byte>& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}
}  // namespace

TEST_CASE("state: the saved state loads back; a damaged theta, feedback, step or residual is refused, naming it") {
  const std::size_t n = 5001;
  const saved s = make_state(n);
  state_reducer fresh;
  reducer_arguments a = s.args;
  a.name = "mlp.fc";
  REQUIRE(fresh.initialize(a).ok());
  REQUIRE(fresh.load_state(s.bytes).ok());
  CHECK(fresh.sparsity() == doctest::Approx(0.9));
  CHECK(fresh.steps() == 3);

  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity(), 2.0, -1.0, 1.0000001}) {
    CAPTURE(bad);
    auto b = s.bytes;
    poke(b, theta_offset, bad);
    state_reducer r;
    REQUIRE(r.initialize(a).ok());
    const status st = r.load_state(b);
    CHECK(st.code() == errc::io);
    CHECK(st.message().find("unit 'mlp.fc': ") == 0);
    CHECK(st.message().find("theta") != std::string::npos);
    CHECK(r.sparsity() == doctest::Approx(0.9));  // unchanged (the arguments' theta)
  }
  {
    auto b = s.bytes;
    poke(b, feedback_offset, std::int64_t(-5));
    state_reducer r;
    REQUIRE(r.initialize(a).ok());
    CHECK(r.load_state(b).message().find("load") != std::string::npos);
  }
  {
    auto b = s.bytes;
    poke(b, feedback_offset + 8, std::int64_t(1) << 40);
    state_reducer r;
    REQUIRE(r.initialize(a).ok());
    CHECK(r.load_state(b).message().find("unresolved") != std::string::npos);
  }
  {
    auto b = s.bytes;
    poke(b, step_offset, ~std::uint64_t(0));
    state_reducer r;
    REQUIRE(r.initialize(a).ok());
    CHECK(r.load_state(b).message().find("step counter") != std::string::npos);
  }
  {
    auto b = s.bytes;
    poke(b, residual_offset + 4 * 17, std::numeric_limits<float>::quiet_NaN());
    state_reducer r;
    REQUIRE(r.initialize(a).ok());
    const status st = r.load_state(b);
    CHECK(st.message().find("non-finite residual at element 17") != std::string::npos);
    for (float x : r.residual_to_host()) CHECK_FALSE(std::isnan(x));
  }
}

TEST_CASE("state: random byte damage never yields an accepted state with theta or feedback out of range") {
  const std::size_t n = 3001;
  const saved s = make_state(n);
  std::mt19937_64 rng(20261123);
  int accepted = 0, refused = 0;
  // Damage the first 160 bytes (header, theta, feedback, step, residual head) most of the time.
  for (int it = 0; it < 3000; ++it) {
    auto b = s.bytes;
    const int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const std::size_t at = rng() % 4 ? rng() % 160 : rng() % b.size();
      b[at] = std::byte(rng() & 0xff);
    }
    state_reducer r;
    REQUIRE(r.initialize(s.args).ok());
    if (!r.load_state(b).ok()) {
      ++refused;
      continue;
    }
    ++accepted;
    const double theta = r.sparsity();
    REQUIRE((theta >= 0.0 && theta <= 1.0));
    REQUIRE(r.steps() < (std::uint64_t(1) << 53));
    for (float x : r.residual_to_host()) REQUIRE(std::isfinite(x));
  }
  CHECK(refused > 1000);  // the damage was seen
  CHECK(accepted > 0);    // and undamaged-meaning bytes (residual mantissas) still load
}

TEST_CASE("state: a non-finite gradient is reported with the unit, the step and the rank") {
  const std::size_t n = 4001;
  const auto statuses = statuses_on_ranks(2, [&](local_communicator& comm) -> std::optional<status> {
    const reducer_arguments a{.length = n, .world_size = 2, .rank = comm.rank(), .name = "mlp.fc"};
    state_reducer red;
    REQUIRE(red.initialize(a).ok());
    std::vector<float> out(red.output_size());
    for (int t = 0; t < 2; ++t) REQUIRE(red.reduce_scatter(comm, gradient(n, 9, comm.rank(), t), out).ok());
    auto g = gradient(n, 9, comm.rank(), 2);
    if (comm.rank() == 1) g[77] = std::numeric_limits<float>::quiet_NaN();
    return red.reduce_scatter(comm, g, out);
  });
  REQUIRE(statuses.size() == 2);
  for (const auto& st : statuses) {
    CAPTURE(st.message());
    CHECK(st.code() == errc::non_finite);
    CHECK(st.message().find("unit 'mlp.fc' (step 2): gradient + residual is not finite: rank 1 has 1 NaN/Inf") == 0);
  }
}

namespace {
// Fails every float reduce-scatter on every rank alike (no rank waits), as a
// broken link would; everything else passes through.
struct failing_values_comm {
  local_communicator& c;
  int rank() const { return c.rank(); }
  int size() const { return c.size(); }
  status barrier() { return c.barrier(); }
  template <class T> status all_reduce(std::span<const T> in, std::span<T> out) { return c.all_reduce(in, out); }
  template <class T> status reduce_scatter(std::span<const T> in, std::span<T> out) {
    if constexpr (std::is_same_v<T, float>) return {errc::communication, "injected link failure"};
    else return c.reduce_scatter(in, out);
  }
  template <class T> status all_gather(std::span<const T> in, std::span<T> out) { return c.all_gather(in, out); }
  template <class T> status reduce(std::span<const T> in, std::span<T> out, int root) { return c.reduce(in, out, root); }
  template <class T> status broadcast(std::span<T> out, int root) { return c.broadcast(out, root); }
  template <class T> auto start_all_reduce(std::span<const T> in, std::span<T> out) { return c.start_all_reduce(in, out); }
  template <class T> auto start_reduce_scatter(std::span<const T> in, std::span<T> out) { return c.start_reduce_scatter(in, out); }
  template <class T> auto start_all_gather(std::span<const T> in, std::span<T> out) { return c.start_all_gather(in, out); }
};
}  // namespace

TEST_CASE("state: a failed collective names the reducer's phase, and the residual is left as it was") {
  const std::size_t n = 4001;
  on_ranks(2, [&](local_communicator& lc) {
    failing_values_comm comm{lc};
    const reducer_arguments a{.length = n, .world_size = 2, .rank = lc.rank(), .name = "attn.qkv"};
    state_reducer red;
    REQUIRE(red.initialize(a).ok());
    std::vector<float> out(red.output_size());
    const auto before = red.residual_to_host();
    const status st = red.reduce_scatter(comm, gradient(n, 3, lc.rank(), 0), out);
    CHECK(st.code() == errc::communication);
    CHECK(st.message() == "unit 'attn.qkv' (step 0): value exchange (reduce-scatter): injected link failure");
    CHECK(red.residual_to_host() == before);
  });
}
