// comm/argument_rules.hpp: the rules every backend applies to a collective's
// arguments, and the wording of its refusals; and the thread communicator using them
// (MPI: tests/mpi/test_mpi_communicator.cpp; NCCL: tests/gpu/nccl_test.cpp).
#include <doctest/doctest.h>

#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include <tagc/comm/argument_rules.hpp>
#include <tagc/comm/counting.hpp>
#include <tagc/comm/local.hpp>

using namespace tagc;

static_assert(full_communicator<local_communicator>);
// The decorator keeps what its inner communicator offers.
static_assert(full_communicator<counting_communicator<local_communicator>>);
static_assert(routing_communicator<local_communicator> &&
              routing_communicator<counting_communicator<local_communicator>>);

namespace {
// A communicator with only what the reducers call: it meets communicator, not full_communicator.
struct reducer_only {
  int rank() const { return 0; }
  int size() const { return 1; }
  template <reducible T> status all_reduce(std::span<const T>, std::span<T>) { return {}; }
  template <reducible T> status reduce_scatter(std::span<const T>, std::span<T>) { return {}; }
  template <reducible T> status all_gather(std::span<const T>, std::span<T>) { return {}; }
  template <reducible T> status broadcast(std::span<T>, int) { return {}; }
};
static_assert(communicator<reducer_only> && !full_communicator<reducer_only> && !routing_communicator<reducer_only>);
static_assert(communicator<counting_communicator<reducer_only>>);
}  // namespace

TEST_CASE("argument rules: shapes, roots, count caps and the in-place layouts") {
  std::vector<float> buf(12);
  const auto in = [&](std::size_t at, std::size_t n) { return std::span<const float>(buf.data() + at, n); };
  const auto out = [&](std::size_t at, std::size_t n) { return std::span<float>(buf.data() + at, n); };
  using c = collective;

  // reduce_scatter over 3 ranks of 4: in place only at the rank's own block.
  auto v = check_collective_arguments(c::reduce_scatter, in(0, 12), out(4, 4), 0, /*rank=*/1, /*size=*/3);
  CHECK(v.ok());
  CHECK(v.in_place);
  CHECK(v.count == 4);
  v = check_collective_arguments(c::reduce_scatter, in(0, 12), out(8, 4), 0, 1, 3);
  CHECK(v.error == argument_error::partial_overlap);
  const status s = argument_refusal(c::reduce_scatter, v.error, 12, 4, 0, 1, 3);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(s.message() == "reduce_scatter: rank 1: recv overlaps send but is not send's block for rank 1 "
                       "(in place needs recv == send + rank * recv.size())");
  v = check_collective_arguments(c::reduce_scatter, in(0, 12), out(0, 5), 0, 1, 3);
  CHECK(v.error == argument_error::scatter_shape);

  // all_gather: send may be the rank's block of recv.
  v = check_collective_arguments(c::all_gather, in(8, 4), out(0, 12), 0, 2, 3);
  CHECK((v.ok() && v.in_place && v.count == 4));
  CHECK(check_collective_arguments(c::all_gather, in(4, 4), out(0, 12), 0, 2, 3).error ==
        argument_error::partial_overlap);
  CHECK(check_collective_arguments(c::all_gather, in(0, 4), out(4, 8), 0, 2, 3).error == argument_error::gather_shape);

  // all_reduce: the same buffer or disjoint ones.
  CHECK(check_collective_arguments(c::all_reduce, in(0, 6), out(0, 6), 0, 0, 2).in_place);
  CHECK(check_collective_arguments(c::all_reduce, in(0, 6), out(6, 6), 0, 0, 2).ok());
  CHECK(check_collective_arguments(c::all_reduce, in(0, 6), out(3, 6), 0, 0, 2).error ==
        argument_error::partial_overlap);
  CHECK(argument_refusal(c::all_reduce, argument_error::send_recv_differ, 6, 5, 0, 0, 2).message() ==
        "all_reduce: rank 0: send has 6 elements but recv has 5");

  // A bad root is named before a bad shape; broadcast is always in place.
  v = check_collective_arguments(c::reduce, in(0, 4), out(4, 5), 3, 0, 3);
  CHECK(v.error == argument_error::root_out_of_range);
  CHECK(argument_refusal(c::reduce, v.error, 4, 5, 3, 0, 3).message() == "reduce: rank 0: root 3 outside [0, 3)");
  CHECK(check_collective_arguments(c::broadcast, in(0, 4), out(0, 4), 1, 0, 2).ok());

  // A backend's count cap, checked after the shapes.
  v = check_collective_arguments(c::all_reduce, in(0, 4), out(4, 4), 0, 0, 2, /*max_count=*/3);
  CHECK(v.error == argument_error::count_too_large);
  CHECK(argument_refusal(c::all_reduce, v.error, 4, 4, 0, 0, 2, 3).code() == errc::size_mismatch);
}

TEST_CASE("argument rules: reduce_each's offsets") {
  std::vector<float> buf(10);
  const std::span<const float> in(buf.data(), 8);
  const std::vector<std::size_t> offsets{0, 3, 8};
  CHECK(check_reduce_each_arguments(in, std::span<const std::size_t>(offsets), std::span<float>(buf.data() + 3, 5), 1, 2)
            .ok());
  const status wrong = check_reduce_each_arguments(in, std::span<const std::size_t>(offsets),
                                                   std::span<float>(buf.data() + 2, 5), 1, 2);
  CHECK(wrong.code() == errc::invalid_argument);
  const std::vector<std::size_t> down{0, 5, 3};
  CHECK(check_reduce_each_arguments(in, std::span<const std::size_t>(down), std::span<float>(buf.data() + 8, 0), 1, 2)
            .message() == "reduce_each: rank 1: offsets decrease at rank 1 (5 > 3)");
}

TEST_CASE("the thread communicator refuses with the rules' words, on every rank") {
  std::mutex m;
  std::vector<std::string> messages;
  local_world w(3);
  w.run([&](local_communicator& c) {
    std::vector<float> buf(20);
    // Rank 1 passes overlapping halves; everyone hears about rank 1.
    const std::size_t shift = c.rank() == 1 ? 5 : 10;
    const status s = c.all_reduce(std::span<const float>(buf.data(), 10), std::span<float>(buf.data() + shift, 10));
    CHECK(s.code() == errc::invalid_argument);
    {
      std::lock_guard lk(m);
      messages.push_back(s.message());
    }
    // Different element types: both ranks named, the higher first.
    std::vector<std::int32_t> ints(4);
    const status t = c.rank() == 2 ? c.all_reduce(std::span<const std::int32_t>(ints), std::span<std::int32_t>(ints))
                                   : c.all_reduce(std::span<const float>(buf.data(), 4), std::span<float>(buf.data(), 4));
    CHECK(t.message() == "all_reduce: rank 2 passed int32 while rank 0 passed float");
    // And a root the ranks disagree on.
    const status r = c.broadcast(std::span<float>(buf.data(), 4), c.rank() == 0 ? 0 : 1);
    CHECK(r.message() == "broadcast: rank 1 named root 1, rank 0 named 0");
  });
  REQUIRE(messages.size() == 3);
  for (const auto& msg : messages) CHECK(msg == "all_reduce: rank 1: send and recv overlap without being the same buffer");
}

TEST_CASE("argument rules: all_to_all_v's counts, and each refusal's words") {
  std::vector<float> buf(16);
  const auto in = [&](std::size_t at, std::size_t n) { return std::span<const float>(buf.data() + at, n); };
  const auto out = [&](std::size_t at, std::size_t n) { return std::span<float>(buf.data() + at, n); };
  using counts = std::vector<std::size_t>;
  const auto check = [&](std::span<const float> send, const counts& sc, std::span<float> recv, const counts& rc,
                         int size, std::size_t max_count = std::numeric_limits<std::size_t>::max()) {
    return check_all_to_all_arguments(send, std::span<const std::size_t>(sc), recv, std::span<const std::size_t>(rc),
                                      size, max_count);
  };
  const auto words = [](const route_check& v, int rank, int size, std::uint64_t max_count = ~std::uint64_t(0)) {
    return route_refusal(v, rank, size, max_count);
  };

  // Blocks in rank order, zero blocks allowed; nothing at all is fine too.
  CHECK(check(in(0, 5), {2, 0, 3}, out(8, 4), {1, 3, 0}, 3).ok());
  CHECK(check(in(0, 0), {0, 0}, out(0, 0), {0, 0}, 2).ok());
  CHECK(words({}, 0, 2).ok());

  route_check v = check(in(0, 5), {2, 3}, out(8, 4), {1, 3, 0}, 3);
  CHECK(v.what == route_check::counts_shape);
  status s = words(v, 1, 3);
  CHECK(s.code() == errc::size_mismatch);
  CHECK(s.message() == "all_to_all_v: rank 1: send_counts has 2 and recv_counts 3 entries, expected world size 3");

  v = check(in(0, 5), {2, 2}, out(8, 4), {1, 3}, 2);
  CHECK(v.what == route_check::send_sum);
  CHECK(words(v, 0, 2).message() == "all_to_all_v: rank 0: send has 5 elements but send_counts sum to 4");

  v = check(in(0, 4), {2, 2}, out(8, 4), {1, 2}, 2);
  CHECK(v.what == route_check::recv_sum);
  CHECK(words(v, 0, 2).message() == "all_to_all_v: rank 0: recv has 4 elements but recv_counts sum to 3");

  // A backend's cap on either sum (MPI: INT_MAX), checked after the shapes.
  v = check(in(0, 4), {2, 2}, out(8, 5), {5, 0}, 2, /*max_count=*/4);
  CHECK(v.what == route_check::count_too_large);
  s = words(v, 1, 2, 4);
  CHECK(s.code() == errc::size_mismatch);
  CHECK(s.message() == "all_to_all_v: rank 1: its blocks hold 5 elements; this backend takes at most 4 per collective");

  // No in-place form: any shared byte is refused, even send == recv.
  v = check(in(0, 4), {2, 2}, out(3, 4), {2, 2}, 2);
  CHECK(v.what == route_check::overlap);
  s = words(v, 0, 2);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(s.message() == "all_to_all_v: rank 0: send and recv overlap");
  CHECK(check(in(0, 4), {2, 2}, out(0, 4), {2, 2}, 2).what == route_check::overlap);
  CHECK(check(in(0, 4), {2, 2}, out(4, 4), {2, 2}, 2).ok());  // adjacent, not overlapping

  // The pair rule: what every rank sends this one against what it expects; the first sender named.
  const std::vector<std::uint64_t> incoming{3, 0, 7};
  CHECK(check_route_pairs(incoming, std::span<const std::size_t>(counts{3, 0, 7})).ok());
  v = check_route_pairs(incoming, std::span<const std::size_t>(counts{3, 1, 6}));
  CHECK((v.what == route_check::pair_mismatch && v.a == 1 && v.b == 0 && v.c == 1));
  s = words(v, 2, 3);
  CHECK(s.code() == errc::size_mismatch);
  CHECK(s.message() ==
        "all_to_all_v: rank 2: rank 1 sends 0 elements to rank 2, which expects 1 (exchange the counts first)");
}

TEST_CASE("the thread communicator refuses all_to_all_v's arguments alike on every rank") {
  std::mutex m;
  std::vector<std::string> pairs, shapes, mixed;
  local_world w(3);
  w.run([&](local_communicator& c) {
    const int r = c.rank();
    // Rank r sends r + 1 elements to each rank, but rank 2 expects 4 from rank 0.
    std::vector<std::size_t> send_counts(3, std::size_t(r + 1)), recv_counts{1, 2, 3};
    if (r == 2) recv_counts[0] = 4;
    std::vector<std::int64_t> in(3 * std::size_t(r + 1), r), out(r == 2 ? 9 : 6);
    const auto route = [&] {
      return c.all_to_all_v(std::span<const std::int64_t>(in), std::span<const std::size_t>(send_counts),
                            std::span<std::int64_t>(out), std::span<const std::size_t>(recv_counts));
    };
    const status p = route();
    CHECK(p.code() == errc::size_mismatch);

    // Rank 1's send_counts has too few entries (a short span: nothing past it is read).
    recv_counts[0] = 1;
    out.resize(6);
    const std::span<const std::size_t> short_counts(send_counts.data(), r == 1 ? 2 : 3);
    const status q = c.all_to_all_v(std::span<const std::int64_t>(in), short_counts, std::span<std::int64_t>(out),
                                    std::span<const std::size_t>(recv_counts));
    CHECK(q.code() == errc::size_mismatch);

    // Rank 0 calls all_to_all_v, the others all_reduce.
    std::vector<float> f(4);
    const status k = r == 0 ? route() : c.all_reduce(std::span<const float>(f), std::span<float>(f));
    CHECK(k.code() == errc::invalid_argument);

    // Afterwards the world still routes.
    const status ok = route();
    CHECK(ok.ok());
    for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i] == (i < 1 ? 0 : i < 3 ? 1 : 2));
    std::lock_guard lk(m);
    pairs.push_back(p.message());
    shapes.push_back(q.message());
    mixed.push_back(k.message());
  });
  REQUIRE(pairs.size() == 3);
  for (const auto& msg : pairs)
    CHECK(msg ==
          "all_to_all_v: rank 2: rank 0 sends 1 elements to rank 2, which expects 4 (exchange the counts first)");
  for (const auto& msg : shapes)
    CHECK(msg == "all_to_all_v: rank 1: send_counts has 2 and recv_counts 3 entries, expected world size 3");
  for (const auto& msg : mixed) CHECK(msg == "rank 1 called all_reduce while rank 0 called all_to_all_v");
}
