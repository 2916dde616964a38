// stream_order_cuda.hpp: StreamOrder<tagc::exec::cuda> — the two event edges of
// comm_queue.hpp between the model stream and the side stream (nvcc only: it names
// tagc::exec::cuda).
//
// One "ready" and one "done" event per ticket, from a ring of `ring` pairs: ticket k
// uses pair k % ring. A pair is recorded again only `ring` tickets later; the trainer
// waits on every ticket it needs within a few enqueues (the prefetch depth is 2) and on
// the last one at the end of a step, so a ring of 1024 never hands out a pair whose
// previous ticket is still to be waited on (d12 issues ~80 tickets a step).
#pragma once

#include "comm_queue.hpp"

#include "tagc/exec/cuda.hpp"

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace train {

template <>
class StreamOrder<tagc::exec::cuda> {
 public:
  static constexpr size_t ring = 1024;

  StreamOrder(const tagc::exec::cuda& model, const tagc::exec::cuda& side) : model_(model.stream), side_(side.stream) {
    if (cudaGetDevice(&device_) != cudaSuccess) throw std::runtime_error("StreamOrder: cudaGetDevice failed");
    if (model_ == side_ || model_ == nullptr || side_ == nullptr)
      throw std::invalid_argument("StreamOrder: the model and side streams must be two distinct created streams");
    ready_.resize(ring, nullptr);
    done_.resize(ring, nullptr);
    for (size_t i = 0; i < ring; ++i) {
      // Ordering only: no timing, so recording costs nothing on the GPU.
      if (cudaEventCreateWithFlags(&ready_[i], cudaEventDisableTiming) != cudaSuccess ||
          cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming) != cudaSuccess) {
        destroy();
        throw std::runtime_error("StreamOrder: cudaEventCreate failed");
      }
    }
  }
  ~StreamOrder() { destroy(); }
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  // The current device is per host thread: the worker must use the trainer's GPU.
  tagc::status on_worker_start() { return checked(cudaSetDevice(device_), "cudaSetDevice"); }
  tagc::status record_ready(uint64_t k) { return checked(cudaEventRecord(ready_[k % ring], model_), "record ready"); }
  tagc::status side_wait_ready(uint64_t k) {
    return checked(cudaStreamWaitEvent(side_, ready_[k % ring], 0), "side stream waits for ready");
  }
  tagc::status record_done(uint64_t k) { return checked(cudaEventRecord(done_[k % ring], side_), "record done"); }
  tagc::status model_wait_done(uint64_t k) {
    return checked(cudaStreamWaitEvent(model_, done_[k % ring], 0), "model stream waits for done");
  }

 private:
  // ok, or the error of `what` naming the CUDA error.
  static tagc::status checked(cudaError_t e, const char* what) {
    return e == cudaSuccess ? tagc::status{} : tagc::detail::cuda_status(e, what);
  }
  void destroy() {
    for (auto* v : {&ready_, &done_})
      for (cudaEvent_t& e : *v)
        if (e) (void)cudaEventDestroy(std::exchange(e, nullptr));
  }

  int device_ = 0;
  cudaStream_t model_, side_;
  std::vector<cudaEvent_t> ready_, done_;
};

}  // namespace train
