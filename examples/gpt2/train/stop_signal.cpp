// stop_signal.cpp: see stop_signal.hpp.
// defines: train::install_stop_handlers, train::stop_requested, train::stop_signal
#include "stop_signal.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace train {
namespace {

std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the flag is set from a signal handler");

void on_stop(int sig) {
  if (received.exchange(sig) != 0) {  // the second one: now
    static const char msg[] = "second stop signal: exiting now, without a checkpoint\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(128 + sig);
  }
  static const char msg[] = "stop signal: finishing the current step, then a checkpoint and exit\n";
  (void)!::write(2, msg, sizeof msg - 1);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool stop_requested() { return received.load() != 0; }
int stop_signal() { return received.load(); }

}  // namespace train
