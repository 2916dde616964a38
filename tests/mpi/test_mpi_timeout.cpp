// defines: deadline tests of tagc::mpi_communicator (run with 3 ranks): a rank
//          that arrives late makes the others return errc::timeout instead of
//          hanging; the communicator then refuses new collectives until the late
//          collective completes (the late rank does arrive here), after which the
//          result is right and the communicator works again. all_to_all_v resumes
//          from its own copy of the counts, after the caller's are gone.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tagc/comm/mpi.hpp"

namespace {
using tagc::errc;
using clock_type = std::chrono::steady_clock;

constexpr auto short_deadline = std::chrono::milliseconds(300);
constexpr auto late_by = std::chrono::milliseconds(1500);
constexpr int late_rank = 1;

double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
}  // namespace

TEST_CASE("mpi_communicator: a late rank makes the others time out; drain() recovers") {
  for (bool checked : {true, false}) {
    tagc::mpi_communicator comm(MPI_COMM_WORLD, {.checked = checked, .timeout = short_deadline});
    const int n = comm.size(), me = comm.rank();
    INFO("rank ", me, " of ", n, std::string(checked ? " checked" : " unchecked"));
    REQUIRE(comm.barrier().ok());

    std::vector<float> in(1000, float(me + 1)), out(1000, 0.0f);
    const float expected = float(n * (n + 1) / 2);
    if (me == late_rank) {
      std::this_thread::sleep_for(late_by);
      comm.set_timeout(std::chrono::seconds(20));
      const auto s = comm.all_reduce(std::span<const float>(in), std::span<float>(out));
      REQUIRE_MESSAGE(s.ok(), s.what());
    } else {
      const auto t0 = clock_type::now();
      const auto s = comm.all_reduce(std::span<const float>(in), std::span<float>(out));
      const double waited = since(t0);
      CHECK(s.code() == errc::timeout);
      CHECK(s.message().find("all_reduce: rank " + std::to_string(me) + " waited 0.") == 0);
      CHECK(s.message().find(checked ? "(agreeing on arguments)" : "(transferring)") != std::string::npos);
      CHECK(waited >= 0.3);
      CHECK(waited < 1.4);  // returned well before the late rank arrived

      // Refused while the timed-out collective is pending.
      std::vector<float> x(4), y(4);
      const auto refused = comm.all_reduce(std::span<const float>(x), std::span<float>(y));
      CHECK(refused.code() == errc::communication);
      CHECK(refused.message().find("earlier all_reduce timed out") != std::string::npos);

      comm.set_timeout(std::chrono::seconds(20));
      const auto d = comm.drain();  // completes once the late rank arrives
      REQUIRE_MESSAGE(d.ok(), d.what());
    }
    for (float v : out) REQUIRE(v == expected);
    // Usable again.
    std::vector<float> again(7);
    REQUIRE(comm.all_reduce(std::span<const float>(in.data(), 7), std::span<float>(again)).ok());
    CHECK(again[6] == expected);
  }
}

TEST_CASE("mpi_communicator: request.wait() times out and can be waited again") {
  tagc::mpi_communicator comm(MPI_COMM_WORLD, {.checked = true, .timeout = short_deadline});
  const int n = comm.size(), me = comm.rank();
  INFO("rank ", me, " of ", n);
  REQUIRE(comm.barrier().ok());

  std::vector<std::int64_t> in(64, me), out(64 * std::size_t(n), -1);
  if (me == late_rank) std::this_thread::sleep_for(late_by);
  auto req = comm.start_all_gather(std::span<const std::int64_t>(in), std::span<std::int64_t>(out));
  if (me != late_rank) {
    const auto s = req.wait();
    CHECK(s.code() == errc::timeout);
    CHECK(s.message().find("all_gather: rank ") == 0);
  }
  comm.set_timeout(std::chrono::seconds(20));
  const auto s = req.wait();
  REQUIRE_MESSAGE(s.ok(), s.what());
  for (int r = 0; r < n; ++r) CHECK(out[std::size_t(r) * 64 + 63] == r);
}

TEST_CASE("mpi_communicator: all_to_all_v times out while agreeing, and completes on drain()") {
  tagc::mpi_communicator comm(MPI_COMM_WORLD, {.checked = true, .timeout = short_deadline});
  const int n = comm.size(), me = comm.rank();
  INFO("rank ", me, " of ", n);
  REQUIRE(comm.barrier().ok());

  // Rank p sends p + q + 1 copies of 100 p + q to rank q.
  std::vector<std::int64_t> in, out;
  {
    std::vector<std::size_t> send_counts, recv_counts;
    for (int q = 0; q < n; ++q) {
      send_counts.push_back(std::size_t(me + q + 1));
      recv_counts.push_back(std::size_t(q + me + 1));
      in.insert(in.end(), send_counts.back(), 100 * me + q);
    }
    out.assign(in.size(), -1);  // the same total: recv_counts is send_counts
    const auto run = [&] {
      return comm.all_to_all_v(std::span<const std::int64_t>(in), std::span<const std::size_t>(send_counts),
                               std::span<std::int64_t>(out), std::span<const std::size_t>(recv_counts));
    };
    if (me == late_rank) {
      std::this_thread::sleep_for(late_by);
      comm.set_timeout(std::chrono::seconds(20));
      const auto s = run();
      REQUIRE_MESSAGE(s.ok(), s.what());
    } else {
      const auto s = run();
      CHECK(s.code() == errc::timeout);
      CHECK(s.message().find("all_to_all_v: rank " + std::to_string(me) + " waited 0.") == 0);
      CHECK(s.message().find("(agreeing on arguments)") != std::string::npos);
    }
    std::fill(send_counts.begin(), send_counts.end(), 0);  // then freed: the collective keeps its own copy
    std::fill(recv_counts.begin(), recv_counts.end(), 0);
  }
  comm.set_timeout(std::chrono::seconds(20));
  const auto d = comm.drain();
  REQUIRE_MESSAGE(d.ok(), d.what());
  std::size_t at = 0;
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < q + me + 1; ++i) REQUIRE(out[at++] == 100 * q + me);
}
