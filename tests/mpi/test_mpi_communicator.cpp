// defines: tests of tagc::mpi_communicator under mpirun (2, 3 and 4 ranks):
//          every collective for every reducible type against a host reference
//          built from deterministic per-rank inputs, in-place forms, requests in
//          flight together, cross-rank argument checks that never hang, and
//          all_to_all_v (uneven blocks, the pair rule refused on every rank).
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "tagc/comm/counting.hpp"
#include "tagc/comm/mpi.hpp"

static_assert(tagc::communicator<tagc::mpi_communicator>);
static_assert(tagc::communicator<tagc::counting_communicator<tagc::mpi_communicator>>);
static_assert(tagc::collective_request<tagc::mpi_communicator::request>);
static_assert(tagc::routing_communicator<tagc::mpi_communicator>);

namespace {

using tagc::errc;
using tagc::mpi_communicator;

// A bug must fail a test, not hang ctest: collectives give up after 20 s.
mpi_communicator world(bool checked = true) {
  return mpi_communicator(MPI_COMM_WORLD, {.checked = checked, .timeout = std::chrono::seconds(20)});
}

// Deterministic input of rank r at index i. Floating values are small dyadic
// numbers, so sums are exact in any order; unsigned values are chosen to wrap.
template <class T> T input(int r, std::size_t i) {
  if constexpr (std::is_floating_point_v<T>) return T((r + 1) * 0.5 + double(i % 7) * 0.25 - 1.0);
  else if constexpr (std::is_same_v<T, std::uint8_t>) return T((r * 97 + i * 31 + 200) & 0xFF);
  else if constexpr (std::is_same_v<T, std::int32_t>) return T(r * 1000003 - std::int32_t(i) * 7);
  else if constexpr (std::is_same_v<T, std::uint32_t>) return T(0xFFFFFFF0u + std::uint32_t(r) * 5u + std::uint32_t(i));
  else if constexpr (std::is_same_v<T, std::int64_t>) return (std::int64_t(r + 1) << 40) - std::int64_t(i) * 12345;
  else return T(~std::uint64_t(0) - std::uint64_t(r) * 3u + i);
}
template <class T> std::vector<T> inputs(int r, std::size_t n, std::size_t offset = 0) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = input<T>(r, offset + i);
  return v;
}
// Sum over all ranks of element i, with T's own (wrapping) arithmetic.
template <class T> T sum_at(int world_size, std::size_t i) {
  T acc = input<T>(0, i);
  for (int r = 1; r < world_size; ++r) acc = T(acc + input<T>(r, i));
  return acc;
}

// Every rank must see the same message: compare a hash across ranks.
bool same_on_all_ranks(mpi_communicator& comm, const std::string& s) {
  const std::uint64_t h = std::hash<std::string>{}(s);
  std::vector<std::uint64_t> all(std::size_t(comm.size()));
  REQUIRE(comm.all_gather(std::span<const std::uint64_t>(&h, 1), std::span<std::uint64_t>(all)).ok());
  for (auto x : all)
    if (x != h) return false;
  return true;
}

// all_to_all_v's block sizes: uneven, some zero, and rank 1 sends nothing.
std::size_t route_count(int from, int to) { return from == 1 ? 0 : std::size_t((from * 7 + to * 3) % 5) * 37; }

// Counts and the send buffer of rank `me` (block q: input<T>(me, 1000 q + i)).
template <class T> struct routed {
  std::vector<std::size_t> send_counts, recv_counts;
  std::vector<T> send, recv;
  routed(int me, int n) {
    for (int q = 0; q < n; ++q) {
      send_counts.push_back(route_count(me, q));
      recv_counts.push_back(route_count(q, me));
      for (std::size_t i = 0; i < send_counts.back(); ++i) send.push_back(input<T>(me, std::size_t(q) * 1000 + i));
    }
    std::size_t total = 0;
    for (auto c : recv_counts) total += c;
    recv.assign(total, T(0));
  }
  tagc::status run(mpi_communicator& comm) {
    return comm.all_to_all_v(std::span<const T>(send), std::span<const std::size_t>(send_counts), std::span<T>(recv),
                             std::span<const std::size_t>(recv_counts));
  }
  // Block q of recv is rank q's block for `me`.
  void check(int me, int n) const {
    std::size_t at = 0;
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < route_count(q, me); ++i)
        REQUIRE(recv[at++] == input<T>(q, std::size_t(me) * 1000 + i));
    REQUIRE(at == recv.size());
  }
};

}  // namespace

#define TAGC_REDUCIBLE_TYPES float, double, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t

TEST_CASE_TEMPLATE("mpi_communicator: collectives match a host reference", T, TAGC_REDUCIBLE_TYPES) {
  auto comm = world();
  REQUIRE(comm.init_status().ok());
  const int n = comm.size(), me = comm.rank();
  INFO("rank ", me, " of ", n);

  SUBCASE("all_reduce, odd length") {
    const std::size_t len = 1003;
    const auto in = inputs<T>(me, len);
    std::vector<T> out(len);
    const auto s = comm.all_reduce(std::span<const T>(in), std::span<T>(out));
    REQUIRE_MESSAGE(s.ok(), s.what());
    for (std::size_t i = 0; i < len; ++i) REQUIRE(out[i] == sum_at<T>(n, i));
  }
  SUBCASE("reduce_scatter") {
    const std::size_t block = 37;
    const auto in = inputs<T>(me, block * std::size_t(n));
    std::vector<T> out(block);
    const auto s = comm.reduce_scatter(std::span<const T>(in), std::span<T>(out));
    REQUIRE_MESSAGE(s.ok(), s.what());
    for (std::size_t i = 0; i < block; ++i) REQUIRE(out[i] == sum_at<T>(n, std::size_t(me) * block + i));
  }
  SUBCASE("all_gather") {
    const std::size_t block = 29;
    const auto in = inputs<T>(me, block);
    std::vector<T> out(block * std::size_t(n));
    const auto s = comm.all_gather(std::span<const T>(in), std::span<T>(out));
    REQUIRE_MESSAGE(s.ok(), s.what());
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < block; ++i) REQUIRE(out[std::size_t(r) * block + i] == input<T>(r, i));
  }
  SUBCASE("reduce to the first and the last rank") {
    for (int root : {0, n - 1}) {
      const auto in = inputs<T>(me, 101);
      std::vector<T> out(101, T(7));
      const auto s = comm.reduce(std::span<const T>(in), std::span<T>(out), root);
      REQUIRE_MESSAGE(s.ok(), s.what());
      for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == (me == root ? sum_at<T>(n, i) : T(7)));
    }
  }
  SUBCASE("broadcast") {
    const int root = 1 % n;
    auto buf = me == root ? inputs<T>(root, 77) : std::vector<T>(77, T(0));
    const auto s = comm.broadcast(std::span<T>(buf), root);
    REQUIRE_MESSAGE(s.ok(), s.what());
    for (std::size_t i = 0; i < buf.size(); ++i) REQUIRE(buf[i] == input<T>(root, i));
  }
  SUBCASE("zero-length collectives") {
    std::vector<T> none;
    CHECK(comm.all_reduce(std::span<const T>(none), std::span<T>(none)).ok());
    CHECK(comm.reduce_scatter(std::span<const T>(none), std::span<T>(none)).ok());
    CHECK(comm.all_gather(std::span<const T>(none), std::span<T>(none)).ok());
    CHECK(comm.broadcast(std::span<T>(none), 0).ok());
    CHECK(comm.barrier().ok());
  }
}

TEST_CASE("mpi_communicator: uint8 sums wrap modulo 256 (Open MPI's AVX op saturates)") {
  auto comm = world();
  const int n = comm.size();
  INFO("rank ", comm.rank(), " of ", n);
  // Long enough for the vectorised reduction paths, odd for the tails.
  std::vector<std::uint8_t> in(4099, 200), out(in.size());
  REQUIRE(comm.all_reduce(std::span<const std::uint8_t>(in), std::span<std::uint8_t>(out)).ok());
  const auto expected = std::uint8_t((200 * n) % 256);
  for (auto v : out) REQUIRE(v == expected);
  std::vector<std::uint8_t> red(in.size());
  REQUIRE(comm.reduce(std::span<const std::uint8_t>(in), std::span<std::uint8_t>(red), 0).ok());
  if (comm.rank() == 0)
    for (auto v : red) REQUIRE(v == expected);
}

TEST_CASE_TEMPLATE("mpi_communicator: in-place forms", T, float, std::uint8_t, std::int64_t) {
  for (bool checked : {true, false}) {
    auto comm = world(checked);
    const int n = comm.size(), me = comm.rank();
    const std::size_t un = std::size_t(n);
    INFO("rank ", me, " of ", n, std::string(checked ? " checked" : " unchecked"));

    auto buf = inputs<T>(me, 513);
    REQUIRE(comm.all_reduce(std::span<const T>(buf), std::span<T>(buf)).ok());
    for (std::size_t i = 0; i < buf.size(); ++i) REQUIRE(buf[i] == sum_at<T>(n, i));

    // reduce_scatter: recv is the rank's own block of send; the other blocks stay as they were.
    const std::size_t block = 41;
    auto rs = inputs<T>(me, block * un);
    const auto rs0 = rs;
    std::span<T> mine = std::span<T>(rs).subspan(std::size_t(me) * block, block);
    REQUIRE(comm.reduce_scatter(std::span<const T>(rs), mine).ok());
    for (std::size_t i = 0; i < rs.size(); ++i) {
      const bool own = i / block == std::size_t(me);
      REQUIRE(rs[i] == (own ? sum_at<T>(n, i) : rs0[i]));
    }

    // all_gather: send is the rank's own block of recv.
    std::vector<T> ag(block * un, T(0));
    const auto own = inputs<T>(me, block);
    std::copy(own.begin(), own.end(), ag.begin() + std::ptrdiff_t(std::size_t(me) * block));
    REQUIRE(comm.all_gather(std::span<const T>(ag).subspan(std::size_t(me) * block, block), std::span<T>(ag)).ok());
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < block; ++i) REQUIRE(ag[std::size_t(r) * block + i] == input<T>(r, i));

    // reduce: send == recv on every rank; only the root's buffer changes.
    const int root = n - 1;
    auto rd = inputs<T>(me, 65);
    REQUIRE(comm.reduce(std::span<const T>(rd), std::span<T>(rd), root).ok());
    for (std::size_t i = 0; i < rd.size(); ++i) REQUIRE(rd[i] == (me == root ? sum_at<T>(n, i) : input<T>(me, i)));
  }
}

TEST_CASE("mpi_communicator: requests in flight together, waited in any order") {
  for (bool checked : {true, false}) {
    auto comm = world(checked);
    const int n = comm.size(), me = comm.rank();
    INFO("rank ", me, " of ", n, std::string(checked ? " checked" : " unchecked"));
    const std::size_t block = 1000;

    const auto a_in = inputs<float>(me, 4096 + 5);
    std::vector<float> a_out(a_in.size());
    const auto b_in = inputs<std::uint8_t>(me, block * std::size_t(n));
    std::vector<std::uint8_t> b_out(block);
    const auto c_in = inputs<std::int64_t>(me, 333);
    std::vector<std::int64_t> c_out(333 * std::size_t(n));

    auto ra = comm.start_all_reduce(std::span<const float>(a_in), std::span<float>(a_out));
    auto rb = comm.start_reduce_scatter(std::span<const std::uint8_t>(b_in), std::span<std::uint8_t>(b_out));
    auto rc = comm.start_all_gather(std::span<const std::int64_t>(c_in), std::span<std::int64_t>(c_out));
    // Ranks wait in different orders: the backend still issues the MPI calls in start order.
    if (me % 2 == 0) {
      REQUIRE(rc.wait().ok());
      REQUIRE(rb.wait().ok());
      auto moved = std::move(ra);  // requests are movable while in flight
      REQUIRE(moved.wait().ok());
      CHECK(ra.wait().code() == errc::invalid_argument);  // the moved-from one is empty
    } else {
      REQUIRE(ra.wait().ok());
      REQUIRE(rb.wait().ok());
      REQUIRE(rc.wait().ok());
    }
    for (std::size_t i = 0; i < a_out.size(); ++i) REQUIRE(a_out[i] == sum_at<float>(n, i));
    for (std::size_t i = 0; i < block; ++i) REQUIRE(b_out[i] == sum_at<std::uint8_t>(n, std::size_t(me) * block + i));
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < 333; ++i) REQUIRE(c_out[std::size_t(r) * 333 + i] == input<std::int64_t>(r, i));

    // A request dropped without wait() still completes; drain() waits for it.
    std::vector<float> d_out(a_in.size());
    { auto dropped = comm.start_all_reduce(std::span<const float>(a_in), std::span<float>(d_out)); }
    REQUIRE(comm.drain().ok());
    CHECK(d_out == a_out);

    // Polling with test() until done.
    auto rt = comm.start_all_reduce(std::span<const float>(a_in), std::span<float>(d_out));
    while (!rt.test()) {}
    CHECK(rt.wait().ok());
  }
}

TEST_CASE("mpi_communicator: many requests, rank-dependent wait orders, blocking calls in between") {
  for (bool checked : {true, false}) {
    auto comm = world(checked);
    const int n = comm.size(), me = comm.rank();
    INFO("rank ", me, " of ", n, std::string(checked ? " checked" : " unchecked"));
    constexpr int k = 8;
    std::vector<std::vector<std::int32_t>> in(k), out(k);
    std::vector<mpi_communicator::request> reqs;
    for (int j = 0; j < k; ++j) {
      const std::size_t len = 64 + std::size_t(j) * 17;
      in[j] = inputs<std::int32_t>(me, len * std::size_t(n), std::size_t(j) * 1000);
      if (j % 3 == 0) {
        out[j].resize(in[j].size());
        reqs.push_back(comm.start_all_reduce(std::span<const std::int32_t>(in[j]), std::span<std::int32_t>(out[j])));
      } else if (j % 3 == 1) {
        out[j].resize(len);
        reqs.push_back(comm.start_reduce_scatter(std::span<const std::int32_t>(in[j]), std::span<std::int32_t>(out[j])));
      } else {
        out[j].resize(in[j].size() * std::size_t(n));
        reqs.push_back(comm.start_all_gather(std::span<const std::int32_t>(in[j]), std::span<std::int32_t>(out[j])));
      }
      if (j == 4) {  // a blocking collective while four requests are in flight
        std::vector<double> x(5, 1.0), y(5);
        REQUIRE(comm.all_reduce(std::span<const double>(x), std::span<double>(y)).ok());
        CHECK(y[4] == double(n));
      }
    }
    // Rank r waits in the order j = (r + 3 * i) mod k.
    for (int i = 0; i < k; ++i) {
      const int j = (me + 3 * i) % k;
      const auto st = reqs[std::size_t(j)].wait();
      REQUIRE_MESSAGE(st.ok(), st.what());
    }
    for (int j = 0; j < k; ++j) {
      const std::size_t len = 64 + std::size_t(j) * 17, off = std::size_t(j) * 1000;
      if (j % 3 == 0)
        for (std::size_t i = 0; i < out[j].size(); ++i) REQUIRE(out[j][i] == sum_at<std::int32_t>(n, off + i));
      else if (j % 3 == 1)
        for (std::size_t i = 0; i < len; ++i)
          REQUIRE(out[j][i] == sum_at<std::int32_t>(n, off + std::size_t(me) * len + i));
      else
        for (int r = 0; r < n; ++r)
          for (std::size_t i = 0; i < in[j].size(); ++i)
            REQUIRE(out[j][std::size_t(r) * in[j].size() + i] == input<std::int32_t>(r, off + i));
    }
  }
}

TEST_CASE("mpi_communicator: argument disagreements return the same status on every rank") {
  auto comm = world();
  const int n = comm.size(), me = comm.rank();
  INFO("rank ", me, " of ", n);

  SUBCASE("one rank passes a different length") {
    const std::size_t len = me == 1 ? 11 : 10;
    std::vector<float> in(len, 1.0f), out(len);
    const auto s = comm.all_reduce(std::span<const float>(in), std::span<float>(out));
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.message() == "all_reduce: rank 1 passed 11 elements, rank 0 passed 10");
    CHECK(same_on_all_ranks(comm, s.what()));
  }
  SUBCASE("one rank's own spans are inconsistent") {
    const std::size_t block = 8;
    std::vector<std::int64_t> in(block * std::size_t(n)), out(me == n - 1 ? block + 1 : block);
    const auto s = comm.reduce_scatter(std::span<const std::int64_t>(in), std::span<std::int64_t>(out));
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.message() == "reduce_scatter: rank " + std::to_string(n - 1) + ": send has " +
                             std::to_string(block * std::size_t(n)) + " elements, expected world size " +
                             std::to_string(n) + " x recv 9");
    CHECK(same_on_all_ranks(comm, s.what()));
  }
  SUBCASE("the lowest offending rank is named") {
    std::vector<std::uint8_t> buf(16);
    const int root = me == 0 ? 0 : n + 5;  // every rank but 0 names a root outside the world
    const auto s = comm.broadcast(std::span<std::uint8_t>(buf), root);
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.message() == "broadcast: rank 1: root " + std::to_string(n + 5) + " outside [0, " + std::to_string(n) + ")");
    CHECK(same_on_all_ranks(comm, s.what()));
  }
  SUBCASE("ranks name different roots") {
    std::vector<float> in(4, 1.0f), out(4);
    const auto s = comm.reduce(std::span<const float>(in), std::span<float>(out), me == 0 ? 0 : 1);
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.message() == "reduce: rank 1 named root 1, rank 0 named 0");
    CHECK(same_on_all_ranks(comm, s.what()));
  }
  SUBCASE("ranks call different collectives or types") {
    std::vector<float> f(8);
    std::vector<std::int32_t> i32(8);
    {
      const auto s = me == 0 ? comm.all_reduce(std::span<const float>(f), std::span<float>(f))
                             : comm.all_reduce(std::span<const std::int32_t>(i32), std::span<std::int32_t>(i32));
      CHECK(s.code() == errc::invalid_argument);
      CHECK(s.message() == "all_reduce: rank 1 passed int32 while rank 0 passed float");
      CHECK(same_on_all_ranks(comm, s.what()));
    }
    const auto s = me == 0 ? comm.broadcast(std::span<float>(f), 0)
                           : comm.all_reduce(std::span<const float>(f), std::span<float>(f));
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.message() == "rank 1 called all_reduce while rank 0 called broadcast");
  }
  SUBCASE("counts above INT_MAX are refused on every rank") {
    // The spans are never read: the check refuses them before any data moves.
    std::vector<std::uint8_t> small(16);
    const std::size_t huge = std::size_t(INT_MAX) + 6;
    const auto s = me == 0 ? comm.all_reduce(std::span<const std::uint8_t>(small.data(), huge),
                                             std::span<std::uint8_t>(small.data() + 1, huge))
                           : comm.all_reduce(std::span<const std::uint8_t>(small), std::span<std::uint8_t>(small));
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.message().find("rank 0: send has 2147483653 and recv 2147483653 elements") != std::string::npos);
  }
  SUBCASE("partial overlap of send and recv") {
    std::vector<float> buf(20);
    const auto s = comm.all_reduce(std::span<const float>(buf.data(), 10), std::span<float>(buf.data() + 5, 10));
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.message() == "all_reduce: rank 0: send and recv overlap without being the same buffer");
  }
  // Whatever went wrong above, the communicator is still usable.
  std::vector<float> in(3, 1.0f), out(3);
  const auto s = comm.all_reduce(std::span<const float>(in), std::span<float>(out));
  REQUIRE_MESSAGE(s.ok(), s.what());
  CHECK(out[0] == float(n));
}

TEST_CASE("mpi_communicator: unchecked mode reports a local error without calling MPI") {
  auto comm = world(/*checked=*/false);
  INFO("rank ", comm.rank());
  if (comm.rank() == 0) {  // only rank 0 calls: nothing is sent, nobody waits
    std::vector<float> in(5), out(4);
    const auto s = comm.all_reduce(std::span<const float>(in), std::span<float>(out));
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.message() == "all_reduce: rank 0: send has 5 elements but recv has 4");
  }
  CHECK(comm.barrier().ok());
}

TEST_CASE("mpi_communicator: counting decorator forwards") {
  auto comm = world();
  tagc::counting_communicator<mpi_communicator> counted(comm);
  std::vector<float> in(256, 1.0f), out(256);
  REQUIRE(counted.all_reduce(std::span<const float>(in), std::span<float>(out)).ok());
  auto r = counted.start_all_reduce(std::span<const float>(in), std::span<float>(out));
  REQUIRE(r.wait().ok());
  CHECK(counted.counters()[tagc::collective::all_reduce].calls == 2);
  CHECK(out[255] == float(comm.size()));
}

TEST_CASE_TEMPLATE("mpi_communicator: all_to_all_v routes uneven blocks", T, TAGC_REDUCIBLE_TYPES) {
  for (bool checked : {true, false}) {
    auto comm = world(checked);
    const int n = comm.size(), me = comm.rank();
    INFO("rank ", me, " of ", n, std::string(checked ? " checked" : " unchecked"));
    routed<T> r(me, n);
    // A request in flight before it: the all-reduce's MPI call is still issued first.
    const auto a_in = inputs<float>(me, 257);
    std::vector<float> a_out(a_in.size());
    auto ra = comm.start_all_reduce(std::span<const float>(a_in), std::span<float>(a_out));
    const auto s = r.run(comm);
    REQUIRE_MESSAGE(s.ok(), s.what());
    r.check(me, n);
    REQUIRE(ra.wait().ok());
    for (std::size_t i = 0; i < a_out.size(); ++i) REQUIRE(a_out[i] == sum_at<float>(n, i));
    // Nothing at all to route is a valid call too.
    std::vector<std::size_t> zeros(std::size_t(n), 0);
    std::vector<T> none;
    CHECK(comm.all_to_all_v(std::span<const T>(none), std::span<const std::size_t>(zeros), std::span<T>(none),
                            std::span<const std::size_t>(zeros))
              .ok());
  }
}

TEST_CASE("mpi_communicator: all_to_all_v refusals are the same on every rank (checked)") {
  auto comm = world();
  const int n = comm.size(), me = comm.rank();
  INFO("rank ", me, " of ", n);
  const auto str = [](auto x) { return std::to_string(x); };

  SUBCASE("a pair whose counts disagree") {
    // The last rank expects one element more from rank 0 than rank 0 sends it.
    routed<std::int64_t> r(me, n);
    if (me == n - 1) {
      r.recv_counts[0] += 1;
      r.recv.push_back(0);
    }
    const auto s = r.run(comm);
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.message() == "all_to_all_v: rank " + str(n - 1) + ": rank 0 sends " + str(route_count(0, n - 1)) +
                             " elements to rank " + str(n - 1) + ", which expects " + str(route_count(0, n - 1) + 1) +
                             " (exchange the counts first)");
    CHECK(same_on_all_ranks(comm, s.what()));
  }
  SUBCASE("one rank's counts have the wrong number of entries") {
    routed<std::uint8_t> r(me, n);
    if (me == 1) r.send_counts.push_back(0);
    const auto s = r.run(comm);
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.message() == "all_to_all_v: rank 1: send_counts has " + str(n + 1) + " and recv_counts " + str(n) +
                             " entries, expected world size " + str(n));
    CHECK(same_on_all_ranks(comm, s.what()));
  }
  SUBCASE("sums above INT_MAX") {
    // The span is never read: the check refuses it before any data moves.
    std::vector<std::uint8_t> small(16);
    std::vector<std::size_t> send_counts(std::size_t(n), 0), recv_counts(std::size_t(n), 0);
    std::size_t total = 0;
    if (me == 0) {
      send_counts[0] = std::size_t(INT_MAX);
      send_counts[std::size_t(n - 1)] += 6;
      total = std::size_t(INT_MAX) + 6;
    }
    const auto s = comm.all_to_all_v(std::span<const std::uint8_t>(small.data(), total),
                                     std::span<const std::size_t>(send_counts), std::span<std::uint8_t>(),
                                     std::span<const std::size_t>(recv_counts));
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.message() ==
          "all_to_all_v: rank 0: its blocks hold 2147483653 elements; this backend takes at most 2147483647 per "
          "collective");
    CHECK(same_on_all_ranks(comm, s.what()));
  }
  SUBCASE("ranks call different collectives or types") {
    routed<float> r(me, n);
    std::vector<float> f(8);
    {
      const auto s = me == 0 ? r.run(comm) : comm.all_reduce(std::span<const float>(f), std::span<float>(f));
      CHECK(s.code() == errc::invalid_argument);
      CHECK(s.message() == "rank 1 called all_reduce while rank 0 called all_to_all_v");
    }
    routed<double> d(me, n);
    const auto s = me == 0 ? r.run(comm) : d.run(comm);
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.message() == "all_to_all_v: rank 1 passed double while rank 0 passed float");
  }
  // Whatever went wrong above, the communicator is still usable.
  routed<std::int32_t> r(me, n);
  const auto s = r.run(comm);
  REQUIRE_MESSAGE(s.ok(), s.what());
  r.check(me, n);
}

TEST_CASE("mpi_communicator: all_to_all_v unchecked refuses a local error without calling MPI") {
  auto comm = world(/*checked=*/false);
  INFO("rank ", comm.rank());
  if (comm.rank() == 0) {  // only rank 0 calls: nothing is sent, nobody waits
    std::vector<float> buf(8);
    std::vector<std::size_t> counts(std::size_t(comm.size()), 0);
    counts[0] = 4;
    const auto s = comm.all_to_all_v(std::span<const float>(buf.data(), 4), std::span<const std::size_t>(counts),
                                     std::span<float>(buf.data() + 2, 4), std::span<const std::size_t>(counts));
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.message() == "all_to_all_v: rank 0: send and recv overlap");
  }
  CHECK(comm.barrier().ok());
}
