#pragma once
// defines: tagc::nccl_request — the handle of a non-blocking NCCL collective
//          (part of comm/nccl.hpp).

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>

#include "state.hpp"

TAGC_BEGIN_NAMESPACE

class nccl_communicator;

// Completion handle of a start_*() collective (or of start_group_end()):
// nccl_communicator::request. Holds the communicator's state, so it may outlive it.
class nccl_request {
 public:
  nccl_request() = default;
  nccl_request(nccl_request&& o) noexcept { *this = std::move(o); }
  nccl_request& operator=(nccl_request&& o) noexcept {
    if (this != &o) {
      recycle();
      state_ = std::move(o.state_);
      event_ = std::exchange(o.event_, nullptr);
      what_ = o.what_;
      detail::assign(result_, std::move(o.result_));
    }
    return *this;
  }
  nccl_request(const nccl_request&) = delete;
  nccl_request& operator=(const nccl_request&) = delete;
  ~nccl_request() { recycle(); }

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
  nccl_request(std::shared_ptr<detail::nccl_state> s, cudaEvent_t ev, const char* what)
      : state_(std::move(s)), event_(ev), what_(what) {}
  explicit nccl_request(status failed) : result_(std::move(failed)) {}

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

TAGC_END_NAMESPACE
