#pragma once
// defines: tagc::local_world, tagc::local_communicator — N ranks as threads of
//          one process, with real concurrent collectives (for tests and demos).
//
// Every collective is two rendezvous: ranks post what they pass, meet, check
// that they agree (same collective, element type, length, root), compute their
// own result from everyone's send buffer into private scratch, meet again (so no
// rank overwrites a buffer another is still reading), then copy out. The rules
// and the wording of a refusal are comm/argument_rules.hpp's. A rank whose
// arguments are wrong, or that disagrees with rank 0, makes *every* rank return
// the same status; a rank that
// never arrives makes the others return a timeout instead of hanging, and
// aborts the world so later collectives fail at once.

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "argument_rules.hpp"
#include "communicator.hpp"

TAGC_BEGIN_NAMESPACE

class local_communicator;

class local_world {
 public:
  explicit local_world(int size, std::chrono::milliseconds timeout = std::chrono::seconds(120))
      : size_(size), timeout_(timeout), posts_(size > 0 ? size : 0) {}

  int size() const noexcept { return size_; }
  local_communicator communicator(int rank);

  // Fail every pending and future collective with `why` (e.g. a rank's thread died).
  void abort(std::string why) {
    std::lock_guard lk(m_);
    if (!aborted_) {
      aborted_ = true;
      abort_reason_ = std::move(why);
    }
    cv_.notify_all();
  }
  bool aborted() const {
    std::lock_guard lk(m_);
    return aborted_;
  }

  // Run fn(communicator) on `size()` threads and join them.
  template <class Fn>
  void run(Fn&& fn);

 private:
  friend class local_communicator;

  struct post {
    collective kind = collective::barrier;
    int type_id = -1;
    const void* send = nullptr;
    std::size_t count = 0;  // the length that must agree across ranks (argument_check::count)
    int root = 0;
    status local_error;  // the refusal of this rank's own arguments, if any
    const std::size_t* send_counts = nullptr;  // all_to_all_v: size() entries each (when its arguments are ok)
    const std::size_t* recv_counts = nullptr;
    std::vector<std::byte> scratch;
  };

  // Generation barrier with a deadline.
  status arrive(int rank, const char* what) {
    std::unique_lock lk(m_);
    if (aborted_) return {errc::communication, "local world aborted: " + abort_reason_};
    const std::uint64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return {};
    }
    const bool met = cv_.wait_for(lk, timeout_, [&] { return generation_ != gen || aborted_; });
    if (aborted_) return {errc::communication, "local world aborted: " + abort_reason_};
    if (!met) {
      aborted_ = true;
      abort_reason_ = "rank " + std::to_string(rank) + " waited " + std::to_string(timeout_.count()) +
                      " ms in " + what + " for ranks that never arrived";
      cv_.notify_all();
      return {errc::timeout, abort_reason_};
    }
    return {};
  }

  int size_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string abort_reason_;
  std::vector<post> posts_;
};

namespace detail {
// Sum of element i over ranks, in rank order. Unsigned types wrap; bfloat16 and
// float16 are summed in float and rounded once.
template <class T, class Src> T rank_order_sum(Src src, int n, std::size_t i) {
  if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) {
    float acc = float(src(0)[i]);
    for (int r = 1; r < n; ++r) acc += float(src(r)[i]);
    return T(acc);
  } else {
    T acc = src(0)[i];
    for (int r = 1; r < n; ++r) acc = T(acc + src(r)[i]);
    return acc;
  }
}
}  // namespace detail

class local_communicator {
 public:
  using request = completed_request;  // collectives complete at start: nothing to overlap in-process

  local_communicator(local_world& world, int rank) : world_(&world), rank_(rank) {}

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return world_->size(); }

  status barrier() { return run<float>(collective::barrier, {}, {}, 0); }

  template <reducible T> status all_reduce(std::span<const T> in, std::span<T> out) {
    return run<T>(collective::all_reduce, in, out, 0);
  }
  template <reducible T> status reduce_scatter(std::span<const T> in, std::span<T> out) {
    return run<T>(collective::reduce_scatter, in, out, 0);
  }
  template <reducible T> status all_gather(std::span<const T> in, std::span<T> out) {
    return run<T>(collective::all_gather, in, out, 0);
  }
  template <reducible T> status reduce(std::span<const T> in, std::span<T> out, int root) {
    return run<T>(collective::reduce, in, out, root);
  }
  template <reducible T> status broadcast(std::span<T> buf, int root) {
    return run<T>(collective::broadcast, std::span<const T>(buf), buf, root);
  }
  // Blocks in rank order (communicator.hpp); every rank checks every pair of counts.
  template <reducible T>
  status all_to_all_v(std::span<const T> in, std::span<const std::size_t> send_counts, std::span<T> out,
                      std::span<const std::size_t> recv_counts) {
    local_world& w = *world_;
    const int n = w.size();
    auto& me = w.posts_[rank_];
    me.kind = collective::all_to_all;
    me.type_id = element_type_id<T>;
    me.send = in.data();
    me.count = 0;
    me.root = 0;
    me.send_counts = send_counts.data();
    me.recv_counts = recv_counts.data();
    static_cast<void>(me.local_error = route_refusal(check_all_to_all_arguments(in, send_counts, out, recv_counts, n),
                                                     rank_, n));
    TAGC_TRY(w.arrive(rank_, "all_to_all_v"));
    status verdict = check_agreement(w.posts_);
    if (verdict.ok()) static_cast<void>(verdict = check_pairs(w.posts_));  // nodiscard: see run()
    if (verdict.ok()) {
      auto& scratch = me.scratch;
      if (scratch.size() < out.size_bytes()) scratch.resize(out.size_bytes());
      std::byte* dst = scratch.data();
      for (int q = 0; q < n; ++q) {
        const auto& from = w.posts_[std::size_t(q)];
        std::size_t at = 0;  // rank q's block for this rank starts after its blocks for lower ranks
        for (int r = 0; r < rank_; ++r) at += from.send_counts[r];
        const std::size_t bytes = recv_counts[std::size_t(q)] * sizeof(T);
        if (bytes) std::memcpy(dst, static_cast<const T*>(from.send) + at, bytes);
        dst += bytes;
      }
    }
    TAGC_TRY(w.arrive(rank_, "all_to_all_v"));  // all reads of other ranks' buffers are done
    if (!verdict.ok()) return verdict;
    if (!out.empty()) std::memcpy(out.data(), me.scratch.data(), out.size_bytes());
    return {};
  }

  template <reducible T> request start_all_reduce(std::span<const T> in, std::span<T> out) {
    return {all_reduce(in, out)};
  }
  template <reducible T> request start_reduce_scatter(std::span<const T> in, std::span<T> out) {
    return {reduce_scatter(in, out)};
  }
  template <reducible T> request start_all_gather(std::span<const T> in, std::span<T> out) {
    return {all_gather(in, out)};
  }

 private:
  template <class T>
  status run(collective kind, std::span<const T> in, std::span<T> out, int root) {
    local_world& w = *world_;
    const int n = w.size();
    auto& me = w.posts_[rank_];
    me.kind = kind;
    me.type_id = element_type_id<T>;
    me.send = in.data();
    const argument_check args = check_collective_arguments(kind, in, out, root, rank_, n);
    me.count = args.count;
    me.root = kind == collective::reduce || kind == collective::broadcast ? root : 0;
    // status is [[nodiscard]]; the cast keeps nvcc from warning on the assignment's result.
    static_cast<void>(me.local_error = args.ok() ? status{}
                                                 : argument_refusal(kind, args.error, in.size(), out.size(), root,
                                                                    rank_, n));
    const char* what = collective_name(kind);

    TAGC_TRY(w.arrive(rank_, what));
    // Everyone reads the same posts, so everyone reaches the same verdict.
    status verdict = check_agreement(w.posts_);
    if (verdict.ok() && kind != collective::barrier) compute<T>(kind, out.size());
    TAGC_TRY(w.arrive(rank_, what));  // all reads of other ranks' buffers are done
    if (!verdict.ok()) return verdict;
    if (kind == collective::reduce && rank_ != root) return {};
    if (!out.empty()) std::memcpy(out.data(), me.scratch.data(), out.size_bytes());
    return {};
  }

  static status check_agreement(const std::vector<local_world::post>& posts) {
    // The order of argument_rules.hpp: the collective, each rank's own arguments, then the rest.
    const auto& p0 = posts[0];
    for (std::size_t i = 1; i < posts.size(); ++i)
      if (posts[i].kind != p0.kind)
        return disagreement(p0.kind, agreement_field::collective, int(i), std::int64_t(posts[i].kind), 0,
                            std::int64_t(p0.kind));
    for (const auto& p : posts)
      if (!p.local_error.ok()) return p.local_error;
    for (std::size_t i = 1; i < posts.size(); ++i) {
      const auto& p = posts[i];
      const int r = int(i);
      if (p.type_id != p0.type_id) return disagreement(p.kind, agreement_field::element_type, r, p.type_id, 0, p0.type_id);
      if (p.count != p0.count)
        return disagreement(p.kind, agreement_field::count, r, std::int64_t(p.count), 0, std::int64_t(p0.count));
      if (p.root != p0.root) return disagreement(p.kind, agreement_field::root, r, p.root, 0, p0.root);
    }
    return {};
  }

  // all_to_all_v across ranks: the first receiving rank (in rank order) whose counts
  // disagree with what a sender sends it.
  static status check_pairs(const std::vector<local_world::post>& posts) {
    const int n = int(posts.size());
    std::vector<std::uint64_t> incoming(posts.size());
    for (int q = 0; q < n; ++q) {
      for (int p = 0; p < n; ++p) incoming[std::size_t(p)] = posts[std::size_t(p)].send_counts[q];
      const route_check v = check_route_pairs(incoming, std::span<const std::size_t>(posts[std::size_t(q)].recv_counts, posts.size()));
      if (!v.ok()) return route_refusal(v, q, n);
    }
    return {};
  }

  template <class T>
  void compute(collective kind, std::size_t out_count) {
    local_world& w = *world_;
    const int n = w.size();
    auto& scratch = w.posts_[rank_].scratch;
    if (scratch.size() < out_count * sizeof(T)) scratch.resize(out_count * sizeof(T));
    T* dst = reinterpret_cast<T*>(scratch.data());
    const auto src = [&](int r) { return static_cast<const T*>(w.posts_[r].send); };
    const std::size_t c = w.posts_[0].count;
    switch (kind) {
      case collective::all_reduce:
      case collective::reduce:
        // Sum in rank order so the result is deterministic; unsigned types wrap.
        sum_ranks<T>(dst, src, n, 0, c);
        break;
      case collective::reduce_scatter:
        sum_ranks<T>(dst, src, n, std::size_t(rank_) * c, c);
        break;
      case collective::all_gather:
        for (int r = 0; r < n; ++r)
          if (c) std::memcpy(dst + std::size_t(r) * c, src(r), c * sizeof(T));
        break;
      case collective::broadcast:
        if (c) std::memcpy(dst, src(w.posts_[0].root), c * sizeof(T));
        break;
      default: break;
    }
  }

  // dst[i] = sum over ranks r in order of src(r)[first + i], i < c. Types summed in
  // themselves go rank by rank over the whole range (the same sums in the same
  // order, but loops a compiler vectorises); 16-bit floats add in float and round once.
  template <class T, class Src>
  static void sum_ranks(T* dst, Src src, int n, std::size_t first, std::size_t c) {
    if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) {
      for (std::size_t i = 0; i < c; ++i) dst[i] = detail::rank_order_sum<T>(src, n, first + i);
    } else {
      if (c) std::memcpy(dst, src(0) + first, c * sizeof(T));
      for (int r = 1; r < n; ++r) {
        const T* s = src(r) + first;
        for (std::size_t i = 0; i < c; ++i) dst[i] = T(dst[i] + s[i]);
      }
    }
  }

  local_world* world_;
  int rank_;
};

static_assert(full_communicator<local_communicator> && routing_communicator<local_communicator>);

inline local_communicator local_world::communicator(int rank) { return local_communicator(*this, rank); }

template <class Fn>
void local_world::run(Fn&& fn) {
  std::vector<std::thread> threads;
  threads.reserve(size_);
  for (int r = 0; r < size_; ++r)
    threads.emplace_back([this, r, &fn] {
      auto comm = communicator(r);
      fn(comm);
    });
  for (auto& t : threads) t.join();
}

TAGC_END_NAMESPACE
