#pragma once
// defines: tagc::counting_communicator<C> — a decorator that forwards every
//          collective to C and records, per collective kind, the number of calls,
//          the bytes this rank sent (ring model, see ring_bytes_sent; all_to_all_v: its
//          blocks for the other ranks, exactly) and wall time.
//
// Benchmarks derive bus bandwidth from these figures the way nccl-tests does;
// tests check the Reducer's traffic against the paper's formulas with them.
// barrier, reduce, start_* and all_to_all_v compile only where C offers them:
// members of a class template are instantiated when called.

#include <array>
#include <chrono>

#include "communicator.hpp"

TAGC_BEGIN_NAMESPACE

struct collective_counters {
  std::uint64_t calls = 0;
  double bytes_sent = 0.0;     // per rank, ring model
  double payload_bytes = 0.0;  // size of the whole (unsharded) buffer, summed over calls
  double seconds = 0.0;        // host wall time from start to completion
  collective_counters& operator+=(const collective_counters& o) {
    calls += o.calls, bytes_sent += o.bytes_sent, payload_bytes += o.payload_bytes, seconds += o.seconds;
    return *this;
  }
  collective_counters& operator-=(const collective_counters& o) {
    calls -= o.calls, bytes_sent -= o.bytes_sent, payload_bytes -= o.payload_bytes, seconds -= o.seconds;
    return *this;
  }
};

struct traffic {
  std::array<collective_counters, std::size_t(collective::count_)> by_kind{};
  collective_counters& operator[](collective c) { return by_kind[std::size_t(c)]; }
  const collective_counters& operator[](collective c) const { return by_kind[std::size_t(c)]; }
  double total_bytes_sent() const {
    double s = 0;
    for (const auto& k : by_kind) s += k.bytes_sent;
    return s;
  }
  void reset() { by_kind = {}; }
  // One rank's traffic over several communicators, or between two reads of the counters.
  traffic& operator+=(const traffic& o) {
    for (std::size_t k = 0; k < by_kind.size(); ++k) by_kind[k] += o.by_kind[k];
    return *this;
  }
  traffic& operator-=(const traffic& o) {
    for (std::size_t k = 0; k < by_kind.size(); ++k) by_kind[k] -= o.by_kind[k];
    return *this;
  }
};

template <communicator C>
class counting_communicator {
 public:
  explicit counting_communicator(C& inner) : inner_(&inner) {}

  int rank() const { return inner_->rank(); }
  int size() const { return inner_->size(); }
  C& inner() { return *inner_; }
  const traffic& counters() const { return t_; }
  void reset() { t_.reset(); }

  // A request that records the time to completion when waited on.
  struct request {
    typename C::request inner;
    collective_counters* counters;
    std::chrono::steady_clock::time_point start;
    status wait() {
      status s = inner.wait();
      counters->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return s;
    }
  };

  status barrier() {
    return timed(collective::barrier, 0.0, [&] { return inner_->barrier(); });
  }
  template <reducible T> status all_reduce(std::span<const T> in, std::span<T> out) {
    return timed(collective::all_reduce, double(in.size_bytes()), [&] { return inner_->all_reduce(in, out); });
  }
  template <reducible T> status reduce_scatter(std::span<const T> in, std::span<T> out) {
    return timed(collective::reduce_scatter, double(in.size_bytes()),
                 [&] { return inner_->reduce_scatter(in, out); });
  }
  template <reducible T> status all_gather(std::span<const T> in, std::span<T> out) {
    return timed(collective::all_gather, double(out.size_bytes()), [&] { return inner_->all_gather(in, out); });
  }
  template <reducible T> status reduce(std::span<const T> in, std::span<T> out, int root) {
    return timed(collective::reduce, double(in.size_bytes()), [&] { return inner_->reduce(in, out, root); });
  }
  template <reducible T> status broadcast(std::span<T> buf, int root) {
    return timed(collective::broadcast, double(buf.size_bytes()), [&] { return inner_->broadcast(buf, root); });
  }
  template <reducible T>
  status all_to_all_v(std::span<const T> in, std::span<const std::size_t> send_counts, std::span<T> out,
                      std::span<const std::size_t> recv_counts) {
    double to_others = 0.0;
    for (std::size_t p = 0; p < send_counts.size(); ++p)
      if (int(p) != rank()) to_others += double(send_counts[p]) * double(sizeof(T));
    auto& k = t_[collective::all_to_all];
    ++k.calls;
    k.payload_bytes += double(in.size_bytes());
    k.bytes_sent += to_others;
    const auto t0 = std::chrono::steady_clock::now();
    status s = inner_->all_to_all_v(in, send_counts, out, recv_counts);
    k.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  }
  template <reducible T> request start_all_reduce(std::span<const T> in, std::span<T> out) {
    auto t0 = record(collective::all_reduce, double(in.size_bytes()));
    return {inner_->start_all_reduce(in, out), &t_[collective::all_reduce], t0};
  }
  template <reducible T> request start_reduce_scatter(std::span<const T> in, std::span<T> out) {
    auto t0 = record(collective::reduce_scatter, double(in.size_bytes()));
    return {inner_->start_reduce_scatter(in, out), &t_[collective::reduce_scatter], t0};
  }
  template <reducible T> request start_all_gather(std::span<const T> in, std::span<T> out) {
    auto t0 = record(collective::all_gather, double(out.size_bytes()));
    return {inner_->start_all_gather(in, out), &t_[collective::all_gather], t0};
  }

 private:
  std::chrono::steady_clock::time_point record(collective c, double whole_bytes) {
    auto& k = t_[c];
    ++k.calls;
    k.payload_bytes += whole_bytes;
    k.bytes_sent += ring_bytes_sent(c, whole_bytes, size());
    return std::chrono::steady_clock::now();
  }
  template <class F> status timed(collective c, double whole_bytes, F&& f) {
    const auto t0 = record(c, whole_bytes);
    status s = f();
    t_[c].seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  }

  C* inner_;
  traffic t_;
};

TAGC_END_NAMESPACE
