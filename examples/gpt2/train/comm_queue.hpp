// comm_queue.hpp: the order between the model's compute and the collectives, written
// once for every execution space.
// defines: train::CommQueue<Exec>, train::StreamOrder<exec::host>
//
// CommWorker (comm_worker.hpp) is a thread that issues every collective in enqueue
// order; the compute thread waits on a ticket when it needs the result. The trainer
// keeps that thread on every space, for two reasons:
//   - MPI only progresses while some thread drives it (exec::host + MPI), and
//   - tagc::Reducer reads small results back to the host inside a call (agreement check,
//     counters): on a GPU those are host syncs, which must block the worker, not the
//     thread that enqueues the model's kernels (exec::cuda + NCCL).
// On a device space there are two streams besides: the model stream, on which the
// compute thread enqueues forward/backward/optimizer kernels, and the side stream, on
// which the worker's collectives and the Reducer's kernels run. StreamOrder<Exec> adds
// the two event edges that make the streams agree with the enqueue order:
//   enqueue (compute thread): record "ready" on the model stream; the task starts by
//       making the side stream wait for it (a gather into a slot overwrites what the
//       model stream was still reading; a reduce reads the gradient the model stream
//       just wrote).
//   task end (worker): record "done" on the side stream.
//   wait(ticket) (compute thread): wait until the worker has *issued* the task, then
//       make the model stream wait for "done" (no host sync on a GPU).
// On exec::host both edges are empty: the compute thread's work is complete when it
// enqueues, and the worker's when it reports the ticket done.
//
// Errors are sticky (CommWorker's rule): after one task fails, every wait returns it.
#pragma once

#include "comm_worker.hpp"

#include "tagc/core/status.hpp"
#include "tagc/exec/host.hpp"

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <utility>

namespace train {

// The event edges between the model stream and the side stream (see above). The
// exec::cuda specialization is in stream_order_cuda.hpp (nvcc only).
template <class Exec>
class StreamOrder;

template <>
class StreamOrder<tagc::exec::host> {
 public:
  StreamOrder(const tagc::exec::host&, const tagc::exec::host&) {}
  tagc::status on_worker_start() { return {}; }           // worker thread, first task
  tagc::status record_ready(uint64_t) { return {}; }      // compute thread, at enqueue
  tagc::status side_wait_ready(uint64_t) { return {}; }   // worker, before the task
  tagc::status record_done(uint64_t) { return {}; }       // worker, after the task
  tagc::status model_wait_done(uint64_t) { return {}; }   // compute thread, in wait()
};

template <class Exec>
class CommQueue {
 public:
  using Ticket = CommWorker::Ticket;
  using Task = std::function<tagc::status()>;

  // model: the space the compute thread launches on; side: the space of the tasks.
  CommQueue(const Exec& model, const Exec& side) : order_(model, side), side_(side) {
    // The worker's first task, outside the event edges: on a GPU it makes the trainer's
    // device current on that thread before the thread touches a stream or an event.
    issued_ = worker_.enqueue([this] { return order_.on_worker_start(); });
    if (auto s = worker_.wait(issued_); !s.ok()) throw std::runtime_error("communication worker start: " + s.what());
  }

  // The space a task launches its kernels on (the Reducer's, the plain path's).
  const Exec& side() const { return side_; }

  Ticket enqueue(Task task) {
    const Ticket k = ++issued_;
    tagc::status ready = order_.record_ready(k);
    const Ticket t = worker_.enqueue([this, k, ready = std::move(ready), task = std::move(task)]() -> tagc::status {
      TAGC_TRY(ready);
      TAGC_TRY(order_.side_wait_ready(k));
      TAGC_TRY(task());
      return order_.record_done(k);
    });
    if (t != k) throw std::logic_error("CommQueue: the worker's ticket numbering diverged from the queue's");
    return t;
  }
  // The model's later work sees the task's results (device: a stream edge, no host
  // sync; the host only waits for the worker to have issued the task).
  // Ticket 0 is "nothing to wait for" (a 1-rank gather that needs no collective).
  tagc::status wait(Ticket t) {
    TAGC_TRY(worker_.wait(t));
    if (t == 0) return {};
    return order_.model_wait_done(t);
  }
  tagc::status wait_all() { return wait(issued_); }
  // Run a task whose results the host reads right after: it must leave them on the
  // host itself (copy_to_host on the side space completes before returning).
  tagc::status run(Task task) { return worker_.wait(enqueue(std::move(task))); }

  double take_busy_seconds() { return worker_.take_busy_seconds(); }
  double take_wait_seconds() { return worker_.take_wait_seconds(); }

 private:
  StreamOrder<Exec> order_;
  Exec side_;
  Ticket issued_ = 0;
  CommWorker worker_;  // last: joined first, before the order's events go
};

}  // namespace train
