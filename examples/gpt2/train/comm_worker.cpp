// comm_worker.cpp: see comm_worker.hpp.
// defines: train::CommWorker
#include "comm_worker.hpp"

#include <chrono>

namespace train {

using clock_type = std::chrono::steady_clock;

CommWorker::CommWorker() : thread_([this] { loop(); }) {}

CommWorker::~CommWorker() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_task_.notify_all();
  thread_.join();
}

CommWorker::Ticket CommWorker::enqueue(Task task) {
  Ticket t;
  {
    std::lock_guard<std::mutex> lk(mu_);
    t = ++last_;
    queue_.emplace_back(t, std::move(task));
  }
  cv_task_.notify_one();
  return t;
}

tagc::status CommWorker::wait(Ticket ticket) {
  const auto t0 = clock_type::now();
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return done_ >= ticket; });
  wait_s_ += std::chrono::duration<double>(clock_type::now() - t0).count();
  return error_;
}

double CommWorker::take_busy_seconds() {
  std::lock_guard<std::mutex> lk(mu_);
  const double s = busy_s_;
  busy_s_ = 0.0;
  return s;
}

double CommWorker::take_wait_seconds() {
  std::lock_guard<std::mutex> lk(mu_);
  const double s = wait_s_;
  wait_s_ = 0.0;
  return s;
}

void CommWorker::loop() {
  for (;;) {
    std::pair<Ticket, Task> item;
    bool skip;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_task_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      item = std::move(queue_.front());
      queue_.pop_front();
      // After an error or at shutdown, skip: a collective whose peers gave up would hang.
      skip = !error_.ok() || stop_;
    }
    tagc::status s;
    const auto t0 = clock_type::now();
    if (!skip) s = item.second();
    const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
    {
      std::lock_guard<std::mutex> lk(mu_);
      busy_s_ += dt;
      if (!s.ok() && error_.ok()) error_ = std::move(s);
      if (skip && error_.ok()) error_ = tagc::status(tagc::errc::internal, "communication worker shut down");
      done_ = item.first;
    }
    cv_done_.notify_all();
  }
}

}  // namespace train
