// comm/argument_rules.hpp: the rules every backend applies to a collective's
// arguments, and the wording of its refusals; and the thread communicator using them
// (MPI: tests/mpi/test_mpi_communicator.cpp; NCCL: tests/gpu/nccl_test.cpp).
#include <doctest/doctest.h>

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
static_assert(communicator<reducer_only> && !full_communicator<reducer_only>);
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
