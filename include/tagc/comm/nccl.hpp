#pragma once
// defines: tagc::nccl_communicator (one rank per GPU, stream ordered),
//          tagc::nccl_options, tagc::nccl_expected, tagc::nccl_id,
//          tagc::nccl_unique_id(), tagc::exchange_nccl_unique_id() (file rendezvous).
//          MPI bootstrap: comm/nccl_mpi_bootstrap.hpp (kept apart: it needs mpi.h).
//
// Needs the CUDA runtime and NCCL headers and libraries, not nvcc: a host
// compiler with -I<cuda>/include and -lnccl -lcudart builds it.
//
// Streams. The communicator owns a communication stream (non-blocking, so the
// legacy default stream never serializes it) and knows the caller's compute
// stream (set_compute_stream; default: the legacy default stream 0). Every
// collective is ordered after the work already enqueued on the compute stream by
// an event (record on compute, wait on comm) -- the host never waits:
//   - all_reduce, reduce_scatter, all_gather, reduce, broadcast, reduce_each:
//     enqueue, then make the compute stream wait for the result, and return.
//     Later work on the compute stream sees the result, exactly as if the
//     collective had been launched on it (communicator.hpp: "return once
//     enqueued"). Other streams: join(stream).
//   - start_*: enqueue and return a request; the compute stream does NOT wait,
//     so the collective overlaps whatever is enqueued next. request::join(s)
//     makes a stream wait without a host sync (the llm.c pattern); request::wait()
//     waits on the host, polling the event and the communicator's async error
//     with a deadline, and aborts the communicator instead of hanging.
//   - barrier(): a one-element all-reduce waited for on the host (NCCL has no
//     barrier), so it also waits for the compute work enqueued before it.
// Group calls: group_start(); several blocking collectives; group_end() (or
// start_group_end() for a request). NCCL fuses the group into one launch; use it
// for per-shard reduces (reduce_each does so). start_* inside a group is refused:
// a grouped operation is only launched at group_end.
//
// Buffers: spans point to device memory of this rank's GPU (checked with
// cudaPointerGetAttributes unless nccl_options::check_pointers is off). In-place
// as in communicator.hpp: all_reduce/reduce/broadcast with send == recv;
// reduce_scatter with recv == send + rank * recv.size(); all_gather with
// send == recv + rank * send.size(). Any other overlap is refused.
// Lengths are checked locally only: NCCL cannot compare them across ranks, so a
// rank passing a different length hangs its peers until a deadline (wait(),
// barrier(), synchronize()) aborts the communicator.
//
// Errors. Every call returns a status naming the collective and carrying
// ncclGetErrorString + ncclGetLastError. The communicator is non-blocking
// (ncclConfig_t::blocking = 0): every NCCL call that reports ncclInProgress is
// polled with ncclCommGetAsyncError up to a deadline. A transport error or a
// deadline aborts the communicator (ncclCommAbort); every later call returns
// that first error. Destruction: ncclCommFinalize + ncclCommDestroy (abort
// after an error); finalize() does the same and reports what happened.
//
// With a Reducer on exec::cuda{s}: set_compute_stream(s), so the Reducer's
// kernels and the collectives between them form one stream-ordered sequence.
//
// Threads: one communicator is used by one host thread at a time (as NCCL
// requires); several communicators may live in one process, one per thread and
// GPU. Requests keep the communicator's state alive, so they may outlive it.

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <cuda/std/expected>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "../exec/cuda.hpp"
#include "communicator.hpp"

TAGC_BEGIN_NAMESPACE

// A value or the status that says why there is none.
template <class T>
using nccl_expected = ::cuda::std::expected<T, status>;

// The id every rank of one communicator joins with (ncclGetUniqueId's bytes).
// A named wrapper: ncclUniqueId is a typedef of an unnamed struct, and nvcc 13's
// front end dies with an internal error on cuda::std::expected<ncclUniqueId, ...>.
struct nccl_id {
  ncclUniqueId value{};
};

struct nccl_options {
  // CUDA device of this rank; create() makes it the calling thread's current
  // device. -1: keep the current device.
  int device = -1;
  // Deadline for ncclCommInitRankConfig to meet every peer.
  std::chrono::milliseconds init_timeout = std::chrono::minutes(5);
  // Deadline for one collective to complete in wait()/barrier()/synchronize(),
  // and for an enqueue that NCCL reports as in progress.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  // Deadline for ncclCommFinalize to quiesce before falling back to abort.
  std::chrono::milliseconds finalize_timeout = std::chrono::minutes(1);
  // Refuse host pointers up front (one cudaPointerGetAttributes per buffer).
  bool check_pointers = true;
  // ncclConfig_t::commName, shown in NCCL's logs; nullptr: none.
  const char* name = nullptr;
};

namespace detail {

template <reducible T>
constexpr ncclDataType_t nccl_type_of() noexcept {
  if constexpr (std::is_same_v<T, float>) return ncclFloat;
  else if constexpr (std::is_same_v<T, double>) return ncclDouble;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return ncclUint8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return ncclInt32;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return ncclUint32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return ncclInt64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return ncclUint64;
  else if constexpr (std::is_same_v<T, bfloat16>) return ncclBfloat16;
  else if constexpr (std::is_same_v<T, float16>) return ncclFloat16;
  else static_assert(sizeof(T) == 0, "tagc: no NCCL datatype for this element type");
}

// "all_reduce: unhandled system error (run with NCCL_DEBUG=INFO for details) (last NCCL error: ...)"
inline status nccl_status(errc code, std::string_view what, ncclResult_t r, ncclComm_t comm) {
  std::string m(what);
  m += ": ";
  m += ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') {
    m += " (last NCCL error: ";
    m += last;
    m += ")";
  }
  return {code, std::move(m)};
}

// `dst = src` for a status. status is [[nodiscard]] as a class, so nvcc's front
// end warns (#2810-D) on a plain assignment, whose result is a status&.
inline void assign(status& dst, status src) { static_cast<void>(dst = std::move(src)); }

inline std::string ms_string(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// Polls fast at first (a collective of a few KB completes in microseconds), then
// backs off to 1 ms so a long wait does not burn a core.
class backoff {
 public:
  void pause() {
    if (++n_ < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(n_ < 4000 ? std::chrono::microseconds(50) : std::chrono::microseconds(1000));
    }
  }

 private:
  unsigned n_ = 0;
};

// Makes `device` current for a scope and restores the previous one.
class device_guard {
 public:
  explicit device_guard(int device) {
    if (cudaGetDevice(&old_) == cudaSuccess && old_ != device && cudaSetDevice(device) == cudaSuccess) restore_ = true;
  }
  ~device_guard() {
    if (restore_) (void)cudaSetDevice(old_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int old_ = 0;
  bool restore_ = false;
};

// Everything a communicator owns. Shared with its requests, so a request that
// outlives the communicator still finds its event and the NCCL handle.
struct nccl_state {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int size = 0;
  int device = 0;
  cudaStream_t stream = nullptr;   // communication stream, owned
  cudaStream_t compute = nullptr;  // the caller's compute stream, not owned
  cudaEvent_t ready = nullptr;     // compute -> comm ordering
  cudaEvent_t done = nullptr;      // comm -> compute ordering
  std::uint32_t* token = nullptr;  // one device word that barrier() all-reduces
  std::vector<cudaEvent_t> spare_events;  // recycled request events: none created in a steady step loop
  int group_depth = 0;
  bool finalized = false;
  status broken;  // the first fatal error; every later call returns it
  nccl_options opt;

  nccl_state() = default;
  nccl_state(const nccl_state&) = delete;
  nccl_state& operator=(const nccl_state&) = delete;
  ~nccl_state() { (void)shutdown(); }

  bool usable() const noexcept { return comm != nullptr && broken.ok() && !finalized; }

  // The status a call on an unusable communicator returns, naming the call.
  status refuse(std::string_view what) const {
    if (!broken.ok()) return {broken.code(), std::string(what) + ": communicator unusable after an earlier error: " +
                                                 broken.message()};
    return {errc::invalid_argument, std::string(what) + ": communicator " +
                                        (finalized ? "was finalized" : "is empty (moved from or never created)")};
  }

  // Abort after a transport error or a missed deadline: kills the NCCL kernels
  // so nothing can hang on this communicator, and remembers why.
  status fail(status why) {
    if (broken.ok()) assign(broken, why);
    if (comm != nullptr) {
      device_guard g(device);
      // Close the NCCL group levels this thread still has open, so the thread
      // can use other communicators afterwards; group_end() then only unwinds.
      for (int i = 0; i < group_depth; ++i) (void)ncclGroupEnd();
      (void)ncclCommAbort(comm);
      comm = nullptr;
    }
    return why;
  }

  // Settles an NCCL call: ncclInProgress (non-blocking communicator) is polled
  // until it resolves or the deadline passes.
  status settle(ncclResult_t r, std::string_view what) {
    if (r == ncclInProgress) {
      const auto deadline = std::chrono::steady_clock::now() + opt.timeout;
      backoff b;
      for (;;) {
        ncclResult_t state = ncclSuccess;
        if (const ncclResult_t q = ncclCommGetAsyncError(comm, &state); q != ncclSuccess) {
          r = q;
          break;
        }
        if (state != ncclInProgress) {
          r = state;
          break;
        }
        if (std::chrono::steady_clock::now() > deadline)
          return fail({errc::timeout, std::string(what) + ": rank " + std::to_string(rank) + " of " +
                                          std::to_string(size) + ": NCCL still in progress after " +
                                          ms_string(opt.timeout) + "; communicator aborted"});
        b.pause();
      }
    }
    if (r == ncclSuccess) return {};
    // A bad argument is this rank's own mistake and leaves the communicator intact.
    if (r == ncclInvalidArgument || r == ncclInvalidUsage) return nccl_status(errc::invalid_argument, what, r, comm);
    return fail(nccl_status(errc::communication, what, r, comm));
  }

  status cuda_fail(cudaError_t e, std::string_view what) {
    return fail(cuda_status(e, what, errc::communication));
  }

  // A failed stream/event call: a stream of another device (or a destroyed one)
  // is the caller's mistake and leaves the communicator intact; anything else
  // (a sticky device error) aborts it.
  status stream_error(cudaError_t e, std::string_view what) {
    if (e == cudaErrorInvalidResourceHandle || e == cudaErrorInvalidValue) {
      (void)cudaGetLastError();
      return cuda_status(e, std::string(what) + " (is the stream a live stream of device " + std::to_string(device) + "?)",
                         errc::invalid_argument);
    }
    return cuda_fail(e, what);
  }

  // stream `waiter` waits for everything enqueued so far on `signaller`.
  status order(cudaStream_t signaller, cudaStream_t waiter, cudaEvent_t ev, std::string_view what) {
    if (signaller == waiter) return {};
    if (const cudaError_t e = cudaEventRecord(ev, signaller); e != cudaSuccess)
      return stream_error(e, std::string(what) + ": cudaEventRecord");
    if (const cudaError_t e = cudaStreamWaitEvent(waiter, ev, 0); e != cudaSuccess)
      return stream_error(e, std::string(what) + ": cudaStreamWaitEvent");
    return {};
  }

  nccl_expected<cudaEvent_t> acquire_event(std::string_view what) {
    if (!spare_events.empty()) {
      cudaEvent_t ev = spare_events.back();
      spare_events.pop_back();
      return ev;
    }
    device_guard g(device);
    cudaEvent_t ev = nullptr;
    if (const cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess)
      return ::cuda::std::unexpected(cuda_status(e, std::string(what) + ": cudaEventCreateWithFlags",
                                                 errc::communication));
    return ev;
  }
  void release_event(cudaEvent_t ev) {
    if (ev != nullptr) spare_events.push_back(ev);
  }

  // Host wait for `ev` (recorded on the communication stream), with the deadline.
  status wait_event(cudaEvent_t ev, std::string_view what) {
    const auto deadline = std::chrono::steady_clock::now() + opt.timeout;
    backoff b;
    for (;;) {
      // After an abort the event may complete with garbage in the buffers.
      if (!broken.ok()) return refuse(what);
      const cudaError_t e = cudaEventQuery(ev);
      if (e == cudaSuccess) return {};
      if (e != cudaErrorNotReady) return cuda_fail(e, std::string(what) + ": cudaEventQuery");
      if (!usable()) return refuse(what);
      ncclResult_t async = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm, &async);
      if (q != ncclSuccess) return fail(nccl_status(errc::communication, std::string(what) + ": ncclCommGetAsyncError", q, comm));
      if (async != ncclSuccess && async != ncclInProgress)
        return fail(nccl_status(errc::communication, std::string(what) + " failed asynchronously", async, comm));
      if (std::chrono::steady_clock::now() > deadline)
        return fail({errc::timeout, std::string(what) + ": rank " + std::to_string(rank) + " of " +
                                        std::to_string(size) + " did not complete within " + ms_string(opt.timeout) +
                                        " (a peer missing, or passing a different length?); communicator aborted"});
      b.pause();
    }
  }

  // Finalize (flush, wait for global quiescence) and destroy; abort instead
  // after an error or when finalizing misses its deadline. Idempotent.
  status shutdown() {
    status result;
    device_guard g(device);
    if (comm != nullptr) {
      if (broken.ok() && group_depth == 0) {
        ncclResult_t r = ncclCommFinalize(comm);
        if (r == ncclSuccess || r == ncclInProgress) {
          const auto deadline = std::chrono::steady_clock::now() + opt.finalize_timeout;
          backoff b;
          for (;;) {
            ncclResult_t state = ncclSuccess;
            if (const ncclResult_t q = ncclCommGetAsyncError(comm, &state); q != ncclSuccess) state = q;
            if (state != ncclInProgress) {
              r = state;
              break;
            }
            if (std::chrono::steady_clock::now() > deadline) {
              r = ncclInProgress;
              break;
            }
            b.pause();
          }
        }
        if (r == ncclSuccess) {
          r = ncclCommDestroy(comm);
          comm = nullptr;
          if (r != ncclSuccess) assign(result, nccl_status(errc::communication, "finalize: ncclCommDestroy", r, nullptr));
        } else if (r == ncclInProgress) {
          assign(result, fail({errc::timeout, "finalize: ncclCommFinalize did not quiesce within " +
                                                    ms_string(opt.finalize_timeout) + "; communicator aborted"}));
        } else {
          assign(result, fail(nccl_status(errc::communication, "finalize: ncclCommFinalize", r, comm)));
        }
      } else {
        if (group_depth != 0)
          assign(result, {errc::invalid_argument, "finalize: called inside group_start()/group_end(); communicator aborted"});
        (void)ncclCommAbort(comm);
        comm = nullptr;
      }
    }
    finalized = true;
    for (cudaEvent_t ev : spare_events) (void)cudaEventDestroy(ev);
    spare_events.clear();
    if (ready != nullptr) (void)cudaEventDestroy(ready);
    if (done != nullptr) (void)cudaEventDestroy(done);
    ready = done = nullptr;
    if (token != nullptr) (void)cudaFree(token);
    token = nullptr;
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    stream = nullptr;
    return result;
  }
};

// Where [p, p+n) and [q, q+m) (bytes) overlap.
inline bool overlaps(const void* p, std::size_t n, const void* q, std::size_t m) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto b = reinterpret_cast<std::uintptr_t>(q);
  return n != 0 && m != 0 && a < b + m && b < a + n;
}

}  // namespace detail

class nccl_communicator {
 public:
  // Completion handle of a start_*() collective (or of start_group_end()).
  class request {
   public:
    request() = default;
    request(request&& o) noexcept { *this = std::move(o); }
    request& operator=(request&& o) noexcept {
      if (this != &o) {
        recycle();
        state_ = std::move(o.state_);
        event_ = std::exchange(o.event_, nullptr);
        what_ = o.what_;
        detail::assign(result_, std::move(o.result_));
      }
      return *this;
    }
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() { recycle(); }

    // Host wait until the collective has completed; polls the event and the
    // communicator's async error. Never hangs: past nccl_options::timeout it
    // aborts the communicator and returns a timeout naming the collective.
    status wait() {
      if (event_ == nullptr) return std::exchange(result_, status{});
      status s = state_->wait_event(event_, what_);
      recycle();
      return s;
    }

    // Make `stream` wait for the collective, without a host sync. The request
    // stays pending: wait() may still be called (and returns at once after
    // completion); dropping the request is also fine.
    status join(cudaStream_t stream) {
      if (event_ == nullptr) return result_;
      if (!state_->usable()) return state_->refuse(what_);
      if (const cudaError_t e = cudaStreamWaitEvent(stream, event_, 0); e != cudaSuccess)
        return state_->stream_error(e, std::string(what_) + ": cudaStreamWaitEvent");
      return {};
    }

    // Non-blocking poll: true once complete (or failed; wait() then says why).
    bool ready() const {
      if (event_ == nullptr) return true;
      return cudaEventQuery(event_) != cudaErrorNotReady || !state_->usable();
    }

   private:
    friend class nccl_communicator;
    request(std::shared_ptr<detail::nccl_state> s, cudaEvent_t ev, const char* what)
        : state_(std::move(s)), event_(ev), what_(what) {}
    explicit request(status failed) : result_(std::move(failed)) {}

    void recycle() {
      if (event_ != nullptr && state_) {
        if (state_->finalized) (void)cudaEventDestroy(event_);
        else state_->release_event(event_);
      }
      event_ = nullptr;
      state_.reset();
    }

    std::shared_ptr<detail::nccl_state> state_;
    cudaEvent_t event_ = nullptr;
    const char* what_ = "";
    status result_;  // for a request that failed at start (or has no event)
  };

  nccl_communicator() = default;  // empty: every call returns invalid_argument
  // Moves are written out, not `= default`: nvcc treats a special member that is
  // defaulted on its first declaration as implicitly __host__ __device__, and
  // this one moves a std::shared_ptr (host-only). cuda::std::expected's
  // __host__ __device__ members (nccl_expected) instantiate it, and with
  // --diag-error=20011 the build failed ("calling a __host__ function from a
  // __host__ __device__ function", misattributed to whichever header nvcc was
  // in when it emitted its deferred diagnostics, e.g. bfloat16's operator float).
  // A user-provided move is plainly __host__.
  nccl_communicator(nccl_communicator&& o) noexcept : s_(std::move(o.s_)) {}
  nccl_communicator& operator=(nccl_communicator&& o) noexcept {
    s_ = std::move(o.s_);
    return *this;
  }
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;
  ~nccl_communicator() = default;  // the state finalizes when its last holder goes

  // Joins the communicator `id` names as `rank` of `nranks`; every rank calls it
  // with the same id and nranks (distribute the id with exchange_nccl_unique_id
  // or nccl_mpi_bootstrap.hpp). Non-blocking init, polled up to opt.init_timeout.
  static nccl_expected<nccl_communicator> create(const nccl_id& id, int nranks, int rank, nccl_options opt = {}) {
    return create(id.value, nranks, rank, opt);
  }
  static nccl_expected<nccl_communicator> create(const ncclUniqueId& id, int nranks, int rank,
                                                 nccl_options opt = {}) {
    return join("nccl_communicator::create", "ncclCommInitRankConfig", nranks, rank, opt,
                [&](ncclComm_t* comm, ncclConfig_t* config) {
                  return ncclCommInitRankConfig(comm, nranks, id, rank, config);
                });
  }

  // A communicator of the ranks of this one that pass the same `color`, ordered by `key`
  // (ncclCommSplit; every rank of this communicator calls it; two-level reduction's node
  // and cross levels, comm/two_level.hpp). A color < 0 joins none (NCCL_SPLIT_NOCOLOR);
  // the result's size and rank are NCCL's.
  nccl_expected<nccl_communicator> split(int color, int key, int new_size, int new_rank, nccl_options opt = {}) const {
    if (!usable())
      return ::cuda::std::unexpected(
          status{errc::communication, "nccl_communicator::split: the communicator is not usable"});
    if (opt.device < 0) opt.device = s_->device;
    ncclComm_t parent = s_->comm;
    return join("nccl_communicator::split", "ncclCommSplit", new_size, new_rank, opt,
                [&](ncclComm_t* comm, ncclConfig_t* config) {
                  return ncclCommSplit(parent, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, comm, config);
                });
  }

  int rank() const noexcept { return s_ ? s_->rank : 0; }
  int size() const noexcept { return s_ ? s_->size : 0; }
  int device() const noexcept { return s_ ? s_->device : -1; }
  cudaStream_t stream() const noexcept { return s_ ? s_->stream : nullptr; }  // the communication stream
  cudaStream_t compute_stream() const noexcept { return s_ ? s_->compute : nullptr; }
  ncclComm_t native_handle() const noexcept { return s_ ? s_->comm : nullptr; }
  bool usable() const noexcept { return s_ && s_->usable(); }

  // The stream whose work every collective is ordered after, and which blocking
  // collectives make wait for their result. Same device as the communicator.
  void set_compute_stream(cudaStream_t s) noexcept {
    if (s_) s_->compute = s;
  }

  // Make `s` wait for everything enqueued so far on the communication stream
  // (an event; no host sync).
  status join(cudaStream_t s) {
    if (!usable()) return refuse("join");
    return s_->order(s_->stream, s, s_->done, "join");
  }

  // Host wait for everything enqueued so far on the communication stream, with
  // the deadline. Does not wait for the compute stream.
  status synchronize() {
    if (!usable()) return refuse("synchronize");
    auto ev = s_->acquire_event("synchronize");
    if (!ev) return ev.error();
    request r(s_, *ev, "synchronize");
    if (const cudaError_t e = cudaEventRecord(*ev, s_->stream); e != cudaSuccess)
      return s_->cuda_fail(e, "synchronize: cudaEventRecord");
    return r.wait();
  }

  // Finalize and destroy now, reporting how it went (the destructor does the
  // same silently). The communicator is unusable afterwards.
  status finalize() {
    if (!s_) return {};
    return s_->shutdown();
  }

  // ---- collectives (spans in device memory) ----

  template <reducible T>
  status all_reduce(std::span<const T> in, std::span<T> out) {
    return blocking("all_reduce", check_all_reduce(in, out), [&] {
      return ncclAllReduce(in.data(), out.data(), in.size(), detail::nccl_type_of<T>(), ncclSum, s_->comm, s_->stream);
    }, in.size());
  }
  template <reducible T>
  status reduce_scatter(std::span<const T> in, std::span<T> out) {
    return blocking("reduce_scatter", check_reduce_scatter(in, out), [&] {
      return ncclReduceScatter(in.data(), out.data(), out.size(), detail::nccl_type_of<T>(), ncclSum, s_->comm,
                               s_->stream);
    }, out.size());
  }
  template <reducible T>
  status all_gather(std::span<const T> in, std::span<T> out) {
    return blocking("all_gather", check_all_gather(in, out), [&] {
      return ncclAllGather(in.data(), out.data(), in.size(), detail::nccl_type_of<T>(), s_->comm, s_->stream);
    }, in.size());
  }
  // Only root's `out` is written; every rank passes one of the same length.
  template <reducible T>
  status reduce(std::span<const T> in, std::span<T> out, int root) {
    return blocking("reduce", check_rooted("reduce", in, out, root), [&] {
      return ncclReduce(in.data(), out.data(), in.size(), detail::nccl_type_of<T>(), ncclSum, root, s_->comm,
                        s_->stream);
    }, in.size());
  }
  template <reducible T>
  status broadcast(std::span<T> buf, int root) {
    return blocking("broadcast", check_rooted("broadcast", std::span<const T>(buf), buf, root), [&] {
      return ncclBroadcast(buf.data(), buf.data(), buf.size(), detail::nccl_type_of<T>(), root, s_->comm, s_->stream);
    }, buf.size());
  }

  // Uneven shards: rank r receives the sum of in[offsets[r], offsets[r+1]) into
  // its `out` (size offsets[rank+1] - offsets[rank]); offsets has size()+1
  // non-decreasing entries within in.size(). One NCCL group of size() reduces,
  // i.e. a reduce-scatter whose blocks need not be equal. `out` may be this
  // rank's own block of `in` (in place); any other overlap is refused.
  template <reducible T>
  status reduce_each(std::span<const T> in, std::span<const std::size_t> offsets, std::span<T> out) {
    if (!usable()) return refuse("reduce_each");
    TAGC_TRY(check_reduce_each(in, offsets, out));
    TAGC_TRY(group_start());
    status first;
    for (int r = 0; r < size(); ++r) {
      const std::size_t n = offsets[r + 1] - offsets[r];
      if (n == 0) continue;
      const T* send = in.data() + offsets[r];
      // recvbuff is only written at the root; elsewhere pass the send block (NCCL's in-place form).
      T* recv = r == rank() ? out.data() : const_cast<T*>(send);
      detail::assign(first, s_->settle(ncclReduce(send, recv, n, detail::nccl_type_of<T>(), ncclSum, r, s_->comm, s_->stream),
                                       "reduce_each"));
      if (!first.ok()) break;
    }
    status end = group_end();  // always close the group we opened
    if (!first.ok()) return first;
    return end;
  }

  status barrier() {
    if (!usable()) return refuse("barrier");
    if (s_->group_depth > 0) return {errc::invalid_argument, "barrier: not allowed inside group_start()/group_end()"};
    request r = start("barrier", status{}, [&] {
      return ncclAllReduce(s_->token, s_->token, 1, ncclUint32, ncclSum, s_->comm, s_->stream);
    }, 1);
    return r.wait();
  }

  // ---- non-blocking collectives: the compute stream does not wait ----

  template <reducible T>
  request start_all_reduce(std::span<const T> in, std::span<T> out) {
    return start("all_reduce", check_all_reduce(in, out), [&] {
      return ncclAllReduce(in.data(), out.data(), in.size(), detail::nccl_type_of<T>(), ncclSum, s_->comm, s_->stream);
    }, in.size());
  }
  template <reducible T>
  request start_reduce_scatter(std::span<const T> in, std::span<T> out) {
    return start("reduce_scatter", check_reduce_scatter(in, out), [&] {
      return ncclReduceScatter(in.data(), out.data(), out.size(), detail::nccl_type_of<T>(), ncclSum, s_->comm,
                               s_->stream);
    }, out.size());
  }
  template <reducible T>
  request start_all_gather(std::span<const T> in, std::span<T> out) {
    return start("all_gather", check_all_gather(in, out), [&] {
      return ncclAllGather(in.data(), out.data(), in.size(), detail::nccl_type_of<T>(), s_->comm, s_->stream);
    }, in.size());
  }

  // ---- groups ----

  // Opens (or nests) an NCCL group; the first level orders the communication
  // stream after the compute stream once for the whole group.
  status group_start() {
    if (!usable()) return refuse("group_start");
    if (s_->group_depth == 0) TAGC_TRY(s_->order(s_->compute, s_->stream, s_->ready, "group_start"));
    TAGC_TRY(s_->settle(ncclGroupStart(), "group_start"));
    ++s_->group_depth;
    return {};
  }
  // Closes a group level; the outermost launches the group and makes the
  // compute stream wait for it.
  status group_end() {
    TAGC_TRY(end_group("group_end"));
    if (s_->group_depth == 0) return s_->order(s_->stream, s_->compute, s_->done, "group_end");
    return {};
  }
  // Closes the outermost group level and returns a request for the whole group
  // (the compute stream does not wait; join or wait on the request).
  request start_group_end() {
    if (s_ && s_->group_depth != 1)
      return request(status{errc::invalid_argument, "start_group_end: needs exactly one open group level, found " +
                                                        std::to_string(s_->group_depth)});
    if (status st = end_group("group"); !st.ok()) return request(std::move(st));
    return record("group");
  }

 private:
  // Set-up shared by create() and split(): streams, events and the barrier word, then
  // `init` (ncclCommInitRankConfig or ncclCommSplit) non-blocking, polled up to
  // opt.init_timeout; the first failure is returned and nothing is left behind.
  template <class Init>
  static nccl_expected<nccl_communicator> join(const char* caller, const char* call, int nranks, int rank,
                                               nccl_options opt, Init&& init) {
    const auto bad = [caller](errc c, std::string m) {
      return ::cuda::std::unexpected(status{c, std::string(caller) + ": " + std::move(m)});
    };
    if (nranks < 1) return bad(errc::invalid_argument, "nranks " + std::to_string(nranks) + " must be at least 1");
    if (rank < 0 || rank >= nranks)
      return bad(errc::invalid_argument,
                 "rank " + std::to_string(rank) + " outside [0, " + std::to_string(nranks) + ")");
    if (opt.device >= 0) {
      if (const cudaError_t e = cudaSetDevice(opt.device); e != cudaSuccess)
        return ::cuda::std::unexpected(detail::cuda_status(
            e, std::string(caller) + ": cudaSetDevice(" + std::to_string(opt.device) + ")", errc::communication));
    }
    auto s = std::make_shared<detail::nccl_state>();
    s->rank = rank;
    s->size = nranks;
    s->opt = opt;
    const auto cuda_try = [&](cudaError_t e, const char* expr) -> status {
      if (e == cudaSuccess) return {};
      return detail::cuda_status(e, std::string(caller) + ": " + expr, errc::communication);
    };
    if (status st = cuda_try(cudaGetDevice(&s->device), "cudaGetDevice"); !st.ok())
      return ::cuda::std::unexpected(std::move(st));
    if (status st = cuda_try(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        !st.ok())
      return ::cuda::std::unexpected(std::move(st));
    for (cudaEvent_t* ev : {&s->ready, &s->done})
      if (status st = cuda_try(cudaEventCreateWithFlags(ev, cudaEventDisableTiming), "cudaEventCreateWithFlags"); !st.ok())
        return ::cuda::std::unexpected(std::move(st));
    if (status st = cuda_try(cudaMalloc(reinterpret_cast<void**>(&s->token), sizeof(std::uint32_t)), "cudaMalloc");
        !st.ok())
      return ::cuda::std::unexpected(std::move(st));
    if (status st = cuda_try(cudaMemset(s->token, 0, sizeof(std::uint32_t)), "cudaMemset"); !st.ok())
      return ::cuda::std::unexpected(std::move(st));

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every call returns at once; we poll with a deadline instead of hanging
    if (opt.name != nullptr) config.commName = opt.name;
    const std::string who =
        "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " on device " + std::to_string(s->device);
    ncclResult_t r = init(&s->comm, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      status st = detail::nccl_status(errc::communication, std::string(caller) + ": " + call + " (" + who + ")",
                                      r, s->comm);
      return ::cuda::std::unexpected(s->fail(std::move(st)));
    }
    const auto deadline = std::chrono::steady_clock::now() + opt.init_timeout;
    detail::backoff b;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      if (const ncclResult_t q = ncclCommGetAsyncError(s->comm, &state); q != ncclSuccess) state = q;
      if (state == ncclSuccess) break;
      if (state != ncclInProgress)
        return ::cuda::std::unexpected(s->fail(detail::nccl_status(
            errc::communication, std::string(caller) + ": " + call + " (" + who + ")", state, s->comm)));
      if (std::chrono::steady_clock::now() > deadline)
        return ::cuda::std::unexpected(s->fail(
            {errc::timeout, std::string(caller) + ": " + who + " waited " + detail::ms_string(opt.init_timeout) +
                                " for its peers (does every rank make the same call with the same arguments?)"}));
      b.pause();
    }
    int count = 0, user_rank = -1;
    if (ncclCommCount(s->comm, &count) != ncclSuccess || ncclCommUserRank(s->comm, &user_rank) != ncclSuccess ||
        count != nranks || user_rank != rank)
      return ::cuda::std::unexpected(s->fail({errc::internal, std::string(caller) + ": NCCL reports rank " +
                                                                  std::to_string(user_rank) + " of " +
                                                                  std::to_string(count) + ", asked for " + who}));
    nccl_communicator c;
    c.s_ = std::move(s);
    return c;
  }

  status refuse(std::string_view what) const {
    if (!s_) return {errc::invalid_argument, std::string(what) + ": communicator is empty (moved from or never created)"};
    return s_->refuse(what);
  }

  // Always closes NCCL's group level while the communicator lives, so an
  // error inside a group does not leave the thread's group state open.
  status end_group(const char* what) {
    if (!s_) return refuse(what);
    if (s_->group_depth == 0) return {errc::invalid_argument, std::string(what) + ": no group_start() to close"};
    --s_->group_depth;
    if (s_->comm == nullptr) return refuse(what);
    const ncclResult_t r = ncclGroupEnd();
    if (!usable()) return refuse(what);
    return s_->settle(r, what);
  }

  // Enqueues `call` ordered after the compute stream (unless inside a group,
  // where group_start did it). count == 0 is a no-op on every rank.
  template <class F>
  status enqueue(const char* what, const status& checked, F&& call, std::size_t count) {
    if (!usable()) return refuse(what);
    if (!checked.ok()) return checked;
    if (count == 0) return {};
    if (s_->group_depth == 0) TAGC_TRY(s_->order(s_->compute, s_->stream, s_->ready, what));
    return s_->settle(call(), what);
  }

  template <class F>
  status blocking(const char* what, const status& checked, F&& call, std::size_t count) {
    TAGC_TRY(enqueue(what, checked, std::forward<F>(call), count));
    if (count == 0 || s_->group_depth > 0) return {};
    return s_->order(s_->stream, s_->compute, s_->done, what);
  }

  template <class F>
  request start(const char* what, const status& checked, F&& call, std::size_t count) {
    if (usable() && s_->group_depth > 0)
      return request(status{errc::invalid_argument,
                            std::string("start_") + what +
                                ": not allowed inside group_start()/group_end() (the group launches at its end); use "
                                "the blocking form and start_group_end()"});
    if (status st = enqueue(what, checked, std::forward<F>(call), count); !st.ok()) return request(std::move(st));
    if (count == 0) return request(status{});
    return record(what);
  }

  // A request completing with everything enqueued so far on the communication stream.
  request record(const char* what) {
    auto ev = s_->acquire_event(what);
    if (!ev) return request(ev.error());
    if (const cudaError_t e = cudaEventRecord(*ev, s_->stream); e != cudaSuccess) {
      s_->release_event(*ev);
      return request(s_->cuda_fail(e, std::string(what) + ": cudaEventRecord"));
    }
    return request(s_, *ev, what);
  }

  // ---- this rank's own argument checks (messages as in local.hpp) ----

  template <class T>
  status check_pointer(const char* what, const char* name, const T* p, std::size_t n) const {
    if (!s_->opt.check_pointers || n == 0) return {};
    cudaPointerAttributes a{};
    if (const cudaError_t e = cudaPointerGetAttributes(&a, p); e != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky; do not leave it for the caller's next check
      return detail::cuda_status(e, std::string(what) + ": cudaPointerGetAttributes(" + name + ")",
                                 errc::invalid_argument);
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      return {errc::invalid_argument, std::string(what) + ": " + name +
                                          " is host memory; NCCL spans must point to device memory"};
    if (a.type == cudaMemoryTypeDevice && a.device != s_->device)
      return {errc::invalid_argument, std::string(what) + ": " + name + " is on device " + std::to_string(a.device) +
                                          ", the communicator on device " + std::to_string(s_->device)};
    return {};
  }

  template <class T>
  status check_buffers(const char* what, std::span<const T> in, std::span<T> out) const {
    TAGC_TRY(check_pointer(what, "send", in.data(), in.size()));
    TAGC_TRY(check_pointer(what, "recv", out.data(), out.size()));
    return {};
  }

  static status mismatch(const char* what, const std::string& m) {
    return {errc::size_mismatch, std::string(what) + ": " + m};
  }
  static status bad_alias(const char* what, const std::string& m) {
    return {errc::invalid_argument, std::string(what) + ": " + m};
  }

  template <class T>
  status check_all_reduce(std::span<const T> in, std::span<T> out) const {
    if (!usable()) return {};
    if (in.size() != out.size())
      return mismatch("all_reduce", "send has " + std::to_string(in.size()) + " elements but recv has " +
                                        std::to_string(out.size()));
    if (in.data() != out.data() && detail::overlaps(in.data(), in.size_bytes(), out.data(), out.size_bytes()))
      return bad_alias("all_reduce", "send and recv overlap without being the same buffer");
    return check_buffers("all_reduce", in, out);
  }

  template <class T>
  status check_reduce_scatter(std::span<const T> in, std::span<T> out) const {
    if (!usable()) return {};
    const std::size_t n = std::size_t(size());
    if (in.size() != out.size() * n)
      return mismatch("reduce_scatter", "send has " + std::to_string(in.size()) + " elements, expected world size " +
                                            std::to_string(n) + " x recv " + std::to_string(out.size()));
    const T* own = in.data() + std::size_t(rank()) * out.size();
    if (out.data() != own && detail::overlaps(in.data(), in.size_bytes(), out.data(), out.size_bytes()))
      return bad_alias("reduce_scatter", "recv overlaps send but is not send's block for rank " +
                                             std::to_string(rank()) + " (in place needs recv == send + rank * recv.size())");
    return check_buffers("reduce_scatter", in, out);
  }

  template <class T>
  status check_all_gather(std::span<const T> in, std::span<T> out) const {
    if (!usable()) return {};
    const std::size_t n = std::size_t(size());
    if (out.size() != in.size() * n)
      return mismatch("all_gather", "recv has " + std::to_string(out.size()) + " elements, expected world size " +
                                        std::to_string(n) + " x send " + std::to_string(in.size()));
    const T* own = out.data() + std::size_t(rank()) * in.size();
    if (in.data() != own && detail::overlaps(in.data(), in.size_bytes(), out.data(), out.size_bytes()))
      return bad_alias("all_gather", "send overlaps recv but is not recv's block for rank " + std::to_string(rank()) +
                                         " (in place needs send == recv + rank * send.size())");
    return check_buffers("all_gather", in, out);
  }

  template <class T>
  status check_rooted(const char* what, std::span<const T> in, std::span<T> out, int root) const {
    if (!usable()) return {};
    if (root < 0 || root >= size())
      return {errc::invalid_argument,
              std::string(what) + ": root " + std::to_string(root) + " outside [0, " + std::to_string(size()) + ")"};
    if (in.size() != out.size())
      return mismatch(what, "send has " + std::to_string(in.size()) + " elements but recv has " +
                                std::to_string(out.size()));
    if (in.data() != out.data() && detail::overlaps(in.data(), in.size_bytes(), out.data(), out.size_bytes()))
      return bad_alias(what, "send and recv overlap without being the same buffer");
    return check_buffers(what, in, out);
  }

  template <class T>
  status check_reduce_each(std::span<const T> in, std::span<const std::size_t> offsets, std::span<T> out) const {
    const std::size_t n = std::size_t(size());
    if (offsets.size() != n + 1)
      return mismatch("reduce_each", "offsets has " + std::to_string(offsets.size()) + " entries, expected world size " +
                                         std::to_string(n) + " + 1");
    for (std::size_t r = 0; r < n; ++r)
      if (offsets[r] > offsets[r + 1])
        return {errc::invalid_argument, "reduce_each: offsets decrease at rank " + std::to_string(r) + " (" +
                                            std::to_string(offsets[r]) + " > " + std::to_string(offsets[r + 1]) + ")"};
    if (offsets[n] > in.size())
      return mismatch("reduce_each", "offsets end at " + std::to_string(offsets[n]) + " but send has " +
                                         std::to_string(in.size()) + " elements");
    const std::size_t me = std::size_t(rank());
    const std::size_t mine = offsets[me + 1] - offsets[me];
    if (out.size() != mine)
      return mismatch("reduce_each", "recv has " + std::to_string(out.size()) + " elements but rank " +
                                         std::to_string(me) + "'s block has " + std::to_string(mine));
    if (out.data() != in.data() + offsets[me] &&
        detail::overlaps(in.data(), in.size_bytes(), out.data(), out.size_bytes()))
      return bad_alias("reduce_each", "recv overlaps send but is not send's block for rank " + std::to_string(me));
    return check_buffers("reduce_each", in, out);
  }

  std::shared_ptr<detail::nccl_state> s_;
};

// ---- bootstrap: distributing the ncclUniqueId ----

// A fresh id; call it on one rank and hand the bytes to the others.
inline nccl_expected<nccl_id> nccl_unique_id() {
  nccl_id id{};
  if (const ncclResult_t r = ncclGetUniqueId(&id.value); r != ncclSuccess)
    return ::cuda::std::unexpected(detail::nccl_status(errc::communication, "ncclGetUniqueId", r, nullptr));
  return id;
}

// File rendezvous (ranks sharing a file system, no MPI). Rank 0 creates an id
// and publishes it at `path`: written to a temporary file beside it, then
// renamed, so a reader never sees half a file. The other ranks poll for the
// file until `timeout`. `tag` is stored with the id and must match on every
// rank: give each job its own (e.g. a scheduler job id), so a stale file from
// an earlier run is never taken for this one's. Rank 0 removes an old file
// first; removing the new one once every rank has joined is the caller's call.
inline nccl_expected<nccl_id> exchange_nccl_unique_id(const std::filesystem::path& path, int rank,
                                                            std::string_view tag = {},
                                                            std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
  static constexpr char magic[8] = {'t', 'a', 'g', 'c', 'n', 'i', 'd', '1'};
  const auto fail = [&](errc c, const std::string& m) {
    return ::cuda::std::unexpected(status{c, "exchange_nccl_unique_id(" + path.string() + "): " + m});
  };
  if (rank == 0) {
    auto id = nccl_unique_id();
    if (!id) return id;
    std::error_code ec;
    std::filesystem::remove(path, ec);  // a stale id must not be read while we write
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    std::filesystem::path tmp = path;
    tmp += ".tmp." + std::to_string(stamp);
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      const auto len = std::uint32_t(tag.size());
      f.write(magic, sizeof magic);
      f.write(reinterpret_cast<const char*>(&len), sizeof len);
      f.write(tag.data(), std::streamsize(tag.size()));
      f.write(id->value.internal, sizeof id->value.internal);
      f.flush();
      if (!f) return fail(errc::io, "cannot write " + tmp.string());
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
      std::filesystem::remove(tmp, ec);
      return fail(errc::io, "cannot rename " + tmp.string() + " to it: " + ec.message());
    }
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_problem = "the file never appeared";
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      char m[sizeof magic] = {};
      std::uint32_t len = 0;
      f.read(m, sizeof m);
      f.read(reinterpret_cast<char*>(&len), sizeof len);
      if (!f || std::memcmp(m, magic, sizeof magic) != 0 || len > 4096) {
        last_problem = "the file is not a tagc NCCL id";
      } else {
        std::string t(len, '\0');
        f.read(t.data(), std::streamsize(len));
        nccl_id id{};
        f.read(id.value.internal, sizeof id.value.internal);
        if (!f) last_problem = "the file is truncated";
        else if (t != tag) last_problem = "its tag is '" + t + "', expected '" + std::string(tag) + "' (stale file?)";
        else return id;
      }
    }
    if (std::chrono::steady_clock::now() > deadline)
      return fail(errc::timeout, "rank " + std::to_string(rank) + " waited " + detail::ms_string(timeout) +
                                     " for rank 0's id: " + last_problem);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

static_assert(communicator<nccl_communicator>);

TAGC_END_NAMESPACE
