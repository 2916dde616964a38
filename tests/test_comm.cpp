// The in-process communicator and the byte-counting decorator.
#include <doctest/doctest.h>

#include <map>
#include <mutex>

#include <tagc/comm/counting.hpp>
#include <tagc/comm/local.hpp>

using namespace tagc;

static_assert(communicator<local_communicator>);
static_assert(communicator<counting_communicator<local_communicator>>);
static_assert(routing_communicator<counting_communicator<local_communicator>>);

namespace {
template <class Body> void on_ranks(int n, Body&& body, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  local_world w(n, timeout);
  w.run([&](local_communicator& c) { body(c); });
}
float value(int rank, std::size_t i) { return float(rank + 1) * 0.25f + float(i % 13); }

// all_to_all_v's block sizes: uneven, some zero, and the last rank of 3 or more sends nothing.
std::size_t route_count(int from, int to, int n) {
  return n >= 3 && from == n - 1 ? 0 : std::size_t((from * 5 + to * 3 + 1) % 4) * 7;
}
// Element i of rank `from`'s block for rank `to`.
template <class T> T routed_value(int from, int to, std::size_t i) { return T(from * 50 + to * 10 + int(i % 7)); }

template <class T, class C> void route_and_check(C& c) {
  const int n = c.size(), me = c.rank();
  std::vector<std::size_t> send_counts, recv_counts;
  std::vector<T> in;
  std::size_t expected = 0;
  for (int q = 0; q < n; ++q) {
    send_counts.push_back(route_count(me, q, n));
    recv_counts.push_back(route_count(q, me, n));
    expected += recv_counts.back();
    for (std::size_t i = 0; i < send_counts.back(); ++i) in.push_back(routed_value<T>(me, q, i));
  }
  std::vector<T> out(expected, T(99));
  const status s = c.all_to_all_v(std::span<const T>(in), std::span<const std::size_t>(send_counts),
                                  std::span<T>(out), std::span<const std::size_t>(recv_counts));
  REQUIRE_MESSAGE(s.ok(), s.message());
  std::size_t at = 0;
  for (int q = 0; q < n; ++q)
    for (std::size_t i = 0; i < recv_counts[std::size_t(q)]; ++i) CHECK(out[at++] == routed_value<T>(q, me, i));
}
}  // namespace

TEST_CASE("every collective matches a reference, for several world sizes") {
  for (int n : {1, 2, 3, 4, 7}) {
    CAPTURE(n);
    const std::size_t count = 37;  // not a multiple of anything
    on_ranks(n, [&](local_communicator& c) {
      const int r = c.rank();
      std::vector<float> in(count * std::size_t(n));
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = value(r, i);
      const auto sum_at = [&](std::size_t i) {
        float s = 0;
        for (int q = 0; q < n; ++q) s += value(q, i);
        return s;
      };
      std::vector<float> all(in.size());
      REQUIRE(c.all_reduce(std::span<const float>(in), std::span<float>(all)).ok());
      for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == doctest::Approx(sum_at(i)));

      std::vector<float> part(count);
      REQUIRE(c.reduce_scatter(std::span<const float>(in), std::span<float>(part)).ok());
      for (std::size_t i = 0; i < count; ++i) CHECK(part[i] == doctest::Approx(sum_at(std::size_t(r) * count + i)));

      std::vector<float> mine(count, float(r)), gathered(count * std::size_t(n));
      REQUIRE(c.all_gather(std::span<const float>(mine), std::span<float>(gathered)).ok());
      for (std::size_t i = 0; i < gathered.size(); ++i) CHECK(gathered[i] == float(i / count));

      std::vector<float> red(in.size(), -1.0f);
      REQUIRE(c.reduce(std::span<const float>(in), std::span<float>(red), n - 1).ok());
      if (r == n - 1) CHECK(red[5] == doctest::Approx(sum_at(5)));
      else CHECK(red[5] == -1.0f);

      std::vector<double> b(3, r == 0 ? 2.5 : 0.0);
      REQUIRE(c.broadcast(std::span<double>(b), 0).ok());
      CHECK(b[2] == 2.5);

      // In place (send == recv), and non-blocking forms.
      std::vector<std::int64_t> x(5, r + 1);
      auto req = c.start_all_reduce(std::span<const std::int64_t>(x), std::span<std::int64_t>(x));
      REQUIRE(req.wait().ok());
      CHECK(x[4] == std::int64_t(n) * (n + 1) / 2);
      REQUIRE(c.barrier().ok());
    });
  }
}

TEST_CASE("all_to_all_v routes uneven blocks, zero blocks and a rank that sends nothing") {
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    on_ranks(n, [&](local_communicator& c) {
      route_and_check<std::uint8_t>(c);
      route_and_check<std::int64_t>(c);
      route_and_check<float>(c);
      route_and_check<std::uint8_t>(c);  // again, after a call whose result was larger
    });
  }
}

TEST_CASE("unsigned sums wrap per element, never across elements (what the index relies on)") {
  on_ranks(3, [](local_communicator& c) {
    std::vector<std::uint8_t> v{200, 1, 0x80};
    REQUIRE(c.all_reduce(std::span<const std::uint8_t>(v), std::span<std::uint8_t>(v)).ok());
    CHECK(v[0] == std::uint8_t(600 % 256));
    CHECK(v[1] == 3);
    CHECK(v[2] == std::uint8_t(0x180 % 256));
  });
}

TEST_CASE("ranks that disagree all get the same clear error, nobody hangs") {
  std::mutex m;
  std::vector<std::string> messages;
  on_ranks(3, [&](local_communicator& c) {
    std::vector<float> v(c.rank() == 2 ? 9 : 10, 1.0f);
    const status s = c.all_reduce(std::span<const float>(v), std::span<float>(v));
    CHECK(s.code() == errc::size_mismatch);
    // The world is still usable afterwards.
    std::vector<float> w(4, 1.0f);
    CHECK(c.all_reduce(std::span<const float>(w), std::span<float>(w)).ok());
    CHECK(w[0] == 3.0f);
    std::lock_guard lk(m);
    messages.push_back(s.message());
  });
  for (const auto& msg : messages) CHECK(msg == "all_reduce: rank 2 passed 9 elements, rank 0 passed 10");

  on_ranks(2, [&](local_communicator& c) {
    std::vector<float> v(4);
    const status s = c.rank() == 0 ? c.all_reduce(std::span<const float>(v), std::span<float>(v))
                                   : c.all_gather(std::span<const float>(v.data(), 2), std::span<float>(v));
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.message().find("rank 1 called all_gather while rank 0 called all_reduce") != std::string::npos);
  });
  on_ranks(2, [&](local_communicator& c) {
    std::vector<float> in(6), out(c.rank() == 0 ? 3 : 2);  // rank 0's own arguments are inconsistent
    const status s = c.reduce_scatter(std::span<const float>(in), std::span<float>(out));
    CHECK(s.code() == errc::size_mismatch);
  });
}

TEST_CASE("a rank that never arrives: the others time out, and the world stays aborted") {
  std::mutex m;
  std::map<int, status> got;
  local_world w(3, std::chrono::milliseconds(200));
  w.run([&](local_communicator& c) {
    if (c.rank() == 1) return;
    std::vector<float> v(4, 1.0f);
    const status first = c.all_reduce(std::span<const float>(v), std::span<float>(v));
    const status second = c.barrier();
    CHECK(second.code() == errc::communication);
    std::lock_guard lk(m);
    got[c.rank()] = first;
  });
  REQUIRE(got.size() == 2);
  int timeouts = 0;
  for (auto& [r, s] : got) {
    CHECK((s.code() == errc::timeout || s.code() == errc::communication));
    timeouts += s.code() == errc::timeout;
    CHECK(s.message().find("never arrived") != std::string::npos);
  }
  CHECK(timeouts >= 1);
  CHECK(w.aborted());
}

TEST_CASE("counting decorator: ring-model bytes per collective") {
  std::mutex m;
  std::map<int, traffic> seen;
  on_ranks(4, [&](local_communicator& inner) {
    counting_communicator<local_communicator> c(inner);
    std::vector<float> big(1000), part(250);
    std::vector<std::uint8_t> idx(64);
    REQUIRE(c.all_reduce(std::span<const float>(big), std::span<float>(big)).ok());
    REQUIRE(c.all_reduce(std::span<const std::uint8_t>(idx), std::span<std::uint8_t>(idx)).ok());
    REQUIRE(c.reduce_scatter(std::span<const float>(big), std::span<float>(part)).ok());
    REQUIRE(c.start_all_gather(std::span<const float>(part), std::span<float>(big)).wait().ok());
    REQUIRE(c.barrier().ok());
    std::lock_guard lk(m);
    seen[c.rank()] = c.counters();
  });
  for (auto& [r, t] : seen) {
    CHECK(t[collective::all_reduce].calls == 2);
    CHECK(t[collective::all_reduce].bytes_sent == doctest::Approx(2.0 * 3.0 / 4.0 * (4000 + 64)));
    CHECK(t[collective::reduce_scatter].bytes_sent == doctest::Approx(3.0 / 4.0 * 4000));
    CHECK(t[collective::all_gather].bytes_sent == doctest::Approx(3.0 / 4.0 * 4000));
    CHECK(t[collective::barrier].calls == 1);
    CHECK(t[collective::barrier].bytes_sent == 0.0);
    CHECK(t.total_bytes_sent() == doctest::Approx(2.0 * 0.75 * 4064 + 0.75 * 8000));
  }
}

TEST_CASE("counting decorator: all_to_all_v counts the bytes of the blocks for other ranks") {
  std::mutex m;
  std::map<int, traffic> seen;
  const int n = 3;
  on_ranks(n, [&](local_communicator& inner) {
    counting_communicator<local_communicator> c(inner);
    route_and_check<std::int64_t>(c);
    route_and_check<std::uint8_t>(c);
    std::lock_guard lk(m);
    seen[c.rank()] = c.counters();
  });
  REQUIRE(seen.size() == std::size_t(n));
  for (auto& [r, t] : seen) {
    CAPTURE(r);
    double to_others = 0, payload = 0;
    for (int q = 0; q < n; ++q) {
      const double elems = double(route_count(r, q, n));
      payload += elems * (8 + 1);
      if (q != r) to_others += elems * (8 + 1);  // int64 then uint8: 9 bytes per element over the two calls
    }
    CHECK(t[collective::all_to_all].calls == 2);
    CHECK(t[collective::all_to_all].bytes_sent == to_others);
    CHECK(t[collective::all_to_all].payload_bytes == payload);
    CHECK(t.total_bytes_sent() == to_others);
  }
  CHECK(seen[n - 1][collective::all_to_all].bytes_sent == 0.0);  // the rank that sends nothing
}
