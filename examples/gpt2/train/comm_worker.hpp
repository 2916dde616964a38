// comm_worker.hpp: the communication "stream" — one thread that issues every collective
// of the trainer, in the order they were enqueued (FIFO), like a CUDA stream for NCCL.
//
// Why a thread: MPI collectives on the CPU only make progress while some thread drives
// them. The compute thread enqueues a task (all-gather a unit's parameters, reduce-
// scatter a unit's gradients) and goes on computing; it waits on the task's ticket only
// when it needs the result. MPI is initialised with MPI_THREAD_SERIALIZED and only this
// thread calls it while it runs, so the order of collectives is the enqueue order on
// every rank — which is what keeps ranks from deadlocking.
//
// Errors are sticky: after a task fails, later tasks are skipped and every wait()
// returns the first error (what a CUDA stream does after a fault).
#pragma once

#include "tagc/core/status.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace train {

class CommWorker {
 public:
  using Task = std::function<tagc::status()>;
  using Ticket = uint64_t;

  CommWorker();
  ~CommWorker();  // skips what is still queued, joins the thread
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  Ticket enqueue(Task task);
  // Blocks until `ticket` (and everything before it) has run; the time blocked counts
  // as wait time. Returns the first error of any task so far.
  tagc::status wait(Ticket ticket);
  tagc::status wait_all() { return wait(last_); }
  tagc::status run(Task task) { return wait(enqueue(std::move(task))); }

  // Seconds the worker spent inside tasks / the caller spent in wait(), since the last
  // call (each call resets its counter).
  double take_busy_seconds();
  double take_wait_seconds();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_task_, cv_done_;
  std::deque<std::pair<Ticket, Task>> queue_;
  Ticket last_ = 0, done_ = 0;
  bool stop_ = false;
  tagc::status error_;
  double busy_s_ = 0.0, wait_s_ = 0.0;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace train
