#pragma once
// defines: tagc::detail::nccl_state — everything an nccl_communicator owns, and how
//          it settles NCCL calls, orders streams, waits with a deadline, aborts and
//          shuts down (part of comm/nccl.hpp).

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail {

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

}  // namespace detail

TAGC_END_NAMESPACE
