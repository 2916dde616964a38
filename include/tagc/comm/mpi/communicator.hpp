#pragma once
// defines: tagc::mpi_communicator (part of comm/mpi.hpp, which documents it).

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "../argument_rules.hpp"
#include "state.hpp"

TAGC_BEGIN_NAMESPACE

class mpi_communicator {
 public:
  struct options {
    bool checked = true;                                          // cross-rank argument check, see above
    std::chrono::milliseconds timeout = std::chrono::seconds(300);  // per wait()
  };

  // The handle of a non-blocking collective. Movable; wait() may be called again
  // after it returned errc::timeout.
  class request {
   public:
    request() = default;
    request(request&& o) noexcept
        : s_(std::exchange(o.s_, nullptr)), p_(std::exchange(o.p_, nullptr)), immediate_(std::move(o.immediate_)),
          has_immediate_(std::exchange(o.has_immediate_, false)) {}
    request& operator=(request&& o) noexcept {
      if (this != &o) {
        reset();
        s_ = std::exchange(o.s_, nullptr);
        p_ = std::exchange(o.p_, nullptr);
        immediate_ = std::move(o.immediate_);
        has_immediate_ = std::exchange(o.has_immediate_, false);
      }
      return *this;
    }
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() { reset(); }

    // Completes the collective or returns errc::timeout after the communicator's deadline.
    status wait() {
      if (has_immediate_) return immediate_;
      if (!p_) return {errc::invalid_argument, "request: wait() on an empty (default or moved-from) request"};
      return s_->wait(*p_);
    }
    // Progresses without blocking; true once wait() would return at once.
    bool test() {
      if (has_immediate_ || !p_) return true;
      s_->advance();
      return p_->ph == detail::mpi::phase::done;
    }

   private:
    friend class mpi_communicator;
    request(detail::mpi::state* s, detail::mpi::pending* p) : s_(s), p_(p) {}
    explicit request(status immediate) : immediate_(std::move(immediate)), has_immediate_(true) {}
    void reset() {
      if (p_) s_->release(p_);
      s_ = nullptr;
      p_ = nullptr;
    }
    detail::mpi::state* s_ = nullptr;
    detail::mpi::pending* p_ = nullptr;
    status immediate_;
    bool has_immediate_ = false;
  };

  explicit mpi_communicator(MPI_Comm comm) : mpi_communicator(comm, options{}) {}
  mpi_communicator(MPI_Comm comm, options opt) : s_(std::make_unique<detail::mpi::state>()) {
    s_->checked = opt.checked;
    s_->timeout = opt.timeout;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      s_->init = {errc::communication, "mpi_communicator: MPI is not initialized (call MPI_Init first)"};
      return;
    }
    // Each set-up call in turn; the first that fails is recorded in init and ends set-up.
    const auto ok = [&](const char* call, int rc) {
      if (rc != MPI_SUCCESS)
        s_->init = {errc::communication,
                    std::string("mpi_communicator: ") + call + ": " + detail::mpi::error_string(rc)};
      return rc == MPI_SUCCESS;
    };
    // Commutative ops: float addition is, and rounding a commutative sum keeps it so
    // (it is not associative: the reduction order decides the roundings).
    if (!ok("MPI_Comm_dup", MPI_Comm_dup(comm, &s_->comm)) ||
        !ok("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(s_->comm, MPI_ERRORS_RETURN)) ||
        !ok("MPI_Comm_dup", MPI_Comm_dup(s_->comm, &s_->check_comm)) ||
        !ok("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(s_->check_comm, MPI_ERRORS_RETURN)) ||
        !ok("MPI_Op_create", MPI_Op_create(&detail::mpi::wrapping_sum_u8, /*commute=*/1, &s_->u8_sum)) ||
        !ok("MPI_Op_create", MPI_Op_create(&detail::mpi::half_sum<bfloat16>, /*commute=*/1, &s_->bf16_op)) ||
        !ok("MPI_Op_create", MPI_Op_create(&detail::mpi::half_sum<float16>, /*commute=*/1, &s_->fp16_op)))
      return;
    MPI_Comm_rank(s_->comm, &s_->rank);
    MPI_Comm_size(s_->comm, &s_->size);
  }

  mpi_communicator(mpi_communicator&&) noexcept = default;
  mpi_communicator& operator=(mpi_communicator&& o) noexcept {
    if (this != &o) {
      free_comms();
      s_ = std::move(o.s_);
    }
    return *this;
  }
  mpi_communicator(const mpi_communicator&) = delete;
  mpi_communicator& operator=(const mpi_communicator&) = delete;
  ~mpi_communicator() { free_comms(); }

  // Not ok when the constructor could not set the communicator up; every
  // collective then returns this status.
  const status& init_status() const { return s_->init; }

  int rank() const noexcept { return s_->rank; }
  int size() const noexcept { return s_->size; }
  MPI_Comm native() const noexcept { return s_->comm; }

  bool checked() const noexcept { return s_->checked; }
  // Every rank must switch at the same point of its collective sequence.
  void set_checked(bool on) noexcept { s_->checked = on; }
  std::chrono::milliseconds timeout() const noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(s_->timeout);
  }
  void set_timeout(std::chrono::milliseconds t) noexcept { s_->timeout = t; }

  status barrier() { return start<float>(collective::barrier, {}, {}, 0).wait(); }

  template <reducible T> status all_reduce(std::span<const T> in, std::span<T> out) {
    return start_all_reduce(in, out).wait();
  }
  template <reducible T> status reduce_scatter(std::span<const T> in, std::span<T> out) {
    return start_reduce_scatter(in, out).wait();
  }
  template <reducible T> status all_gather(std::span<const T> in, std::span<T> out) {
    return start_all_gather(in, out).wait();
  }
  template <reducible T> status reduce(std::span<const T> in, std::span<T> out, int root) {
    return start<T>(collective::reduce, in, out, root).wait();
  }
  template <reducible T> status broadcast(std::span<T> buf, int root) {
    return start<T>(collective::broadcast, std::span<const T>(buf), buf, root).wait();
  }
  // Blocks of any size to each rank (communicator.hpp); blocking like the others, with
  // the deadline, after every collective started before it. Checked mode refuses a
  // pair of ranks whose counts disagree, on every rank (mpi/route.hpp).
  template <reducible T>
  status all_to_all_v(std::span<const T> in, std::span<const std::size_t> send_counts, std::span<T> out,
                      std::span<const std::size_t> recv_counts) {
    return start_all_to_all(in, send_counts, out, recv_counts).wait();
  }

  template <reducible T> request start_all_reduce(std::span<const T> in, std::span<T> out) {
    return start<T>(collective::all_reduce, in, out, 0);
  }
  template <reducible T> request start_reduce_scatter(std::span<const T> in, std::span<T> out) {
    return start<T>(collective::reduce_scatter, in, out, 0);
  }
  template <reducible T> request start_all_gather(std::span<const T> in, std::span<T> out) {
    return start<T>(collective::all_gather, in, out, 0);
  }

  // Waits (up to timeout() in all) for every collective still in flight,
  // including those whose request was dropped or whose wait() timed out.
  status drain() {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    for (;;) {
      s_->advance();
      std::size_t open = 0;
      for (const auto& p : s_->live) open += p->ph != detail::mpi::phase::done;
      if (open == 0) {
        for (auto& p : s_->live) p->timed_out = false;
        return {};
      }
      const auto waited = clock::now() - t0;
      if (waited >= s_->timeout)
        return {errc::timeout, "drain: rank " + std::to_string(s_->rank) + " waited " +
                                   detail::mpi::seconds(std::chrono::duration<double>(waited).count()) + " and " +
                                   std::to_string(open) + " collective(s) are still pending"};
      std::this_thread::yield();
    }
  }

  // Ends every process of the communicator (MPI_Abort). Does not return.
  [[noreturn]] void abort(int code) {
    MPI_Abort(s_ && s_->comm != MPI_COMM_NULL ? s_->comm : MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort should not return; make sure
  }

 private:
  template <class T>
  request start(collective kind, std::span<const T> in, std::span<T> out, int root) {
    namespace m = detail::mpi;
    auto& s = *s_;
    if (status refused = admit(kind); !refused.ok()) return request(std::move(refused));
    const argument_check args = check_collective_arguments(kind, in, out, root, s.rank, s.size, m::max_count);
    if (kind != collective::reduce && kind != collective::broadcast) root = 0;
    if (!s.checked && !args.ok())
      return request(argument_refusal(kind, args.error, in.size(), out.size(), root, s.rank, s.size, m::max_count));

    auto p = new_pending<T>(kind, in.data(), out.data());
    p->count = int(args.count <= m::max_count ? args.count : 0);
    p->root = root;
    p->in_place = args.in_place;
    const m::check_vector mine = m::encode_check(kind, p->type_id, args, in.size(), out.size(), root, s.rank);
    return launch(std::move(p), mine);
  }

  template <class T>
  request start_all_to_all(std::span<const T> in, std::span<const std::size_t> send_counts, std::span<T> out,
                           std::span<const std::size_t> recv_counts) {
    namespace m = detail::mpi;
    auto& s = *s_;
    if (status refused = admit(collective::all_to_all); !refused.ok()) return request(std::move(refused));
    const route_check args = check_all_to_all_arguments(in, send_counts, out, recv_counts, s.size, m::max_count);
    if (!s.checked && !args.ok()) return request(route_refusal(args, s.rank, s.size, m::max_count));

    auto p = new_pending<T>(collective::all_to_all, in.data(), out.data());
    if (args.ok()) p->routed.plan(send_counts, recv_counts, s.checked);
    const m::check_vector mine = m::encode_route_check(p->type_id, args, s.rank);
    return launch(std::move(p), mine);
  }

  // Why a new collective cannot start now (ok: it may).
  status admit(collective kind) {
    namespace m = detail::mpi;
    auto& s = *s_;
    if (!s.init.ok()) return s.init;
    s.advance();
    if (const m::pending* p = s.stuck())
      return {errc::communication, std::string(collective_name(kind)) + ": refused: an earlier " +
                                       collective_name(p->kind) + " timed out after " + m::seconds(p->waited_s) +
                                       " and is still pending; wait() on it again, drain(), or abort()"};
    return {};
  }

  template <class T>
  std::unique_ptr<detail::mpi::pending> new_pending(collective kind, const void* send, void* recv) {
    auto p = std::make_unique<detail::mpi::pending>();
    p->kind = kind;
    p->type_id = element_type_id<T>;
    p->datatype = detail::mpi::datatype_of<T>();
    p->elem_size = sizeof(T);
    p->send = send;
    p->recv = recv;
    return p;
  }

  // Queues p (checked: after starting the argument check with this rank's
  // contribution `mine`).
  request launch(std::unique_ptr<detail::mpi::pending> owned, const detail::mpi::check_vector& mine) {
    namespace m = detail::mpi;
    auto& s = *s_;
    m::pending& p = *owned;
    if (s.checked) {
      p.mine = mine;
      if (int rc = MPI_Iallreduce(p.mine.data(), p.agreed.data(), m::check_slots, MPI_INT64_T, MPI_MAX, s.check_comm,
                                  &p.req);
          rc != MPI_SUCCESS) {
        return request(m::mpi_error(p.kind, "MPI_Iallreduce (argument check)", rc));
      }
      p.ph = m::phase::checking;
    } else {
      p.ph = m::phase::ready;
    }
    s.live.push_back(std::move(owned));
    s.advance();  // starts the collective now if nothing earlier holds it back
    return request(&s, &p);
  }

  void free_comms() {
    if (!s_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    // Collectives MPI may still write into: keep their memory alive (leak it).
    for (auto& p : s_->live)
      if (p->ph != detail::mpi::phase::done) (void)p.release();
    s_->live.clear();
    if (!finalized) {
      if (s_->check_comm != MPI_COMM_NULL) MPI_Comm_free(&s_->check_comm);
      if (s_->comm != MPI_COMM_NULL) MPI_Comm_free(&s_->comm);
      if (s_->u8_sum != MPI_OP_NULL) MPI_Op_free(&s_->u8_sum);
      if (s_->bf16_op != MPI_OP_NULL) MPI_Op_free(&s_->bf16_op);
      if (s_->fp16_op != MPI_OP_NULL) MPI_Op_free(&s_->fp16_op);
    }
    s_.reset();
  }

  std::unique_ptr<detail::mpi::state> s_;
};

static_assert(full_communicator<mpi_communicator> && routing_communicator<mpi_communicator>);

TAGC_END_NAMESPACE
