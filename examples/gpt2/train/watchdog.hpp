// watchdog.hpp: what happens when a collective does not complete — the communicators'
// deadlines (--collective-timeout, tagc::mpi_communicator / nccl_options timeout) turn a
// hang into errc::timeout; the trainers throw it as CollectiveTimeout; the train loop
// then asks every rank it can still reach (census) before it ends the job, so the
// message names the rank(s) that did not arrive instead of "a peer is missing".
//
// census(): point-to-point on its own duplicate of MPI_COMM_WORLD (made at start-up,
// while every rank is there): each rank that timed out sends a ping to every other
// rank and waits up to `grace` seconds for theirs. A rank waiting in (any) collective
// times out too and answers; a stopped, dead or far-behind rank does not.
// defines: train::CollectiveTimeout, train::AgreedError, train::throw_if_failed, train::Watchdog
#pragma once

#include "tagc/core/status.hpp"

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace train {

struct CollectiveTimeout : std::runtime_error { using std::runtime_error::runtime_error; };
// An error every rank throws at the same point, from the same agreed data (an
// all-reduced flag or value): no rank waits in a collective, so the job ends cleanly
// (no MPI_Abort) with this message on every rank.
struct AgreedError : std::runtime_error { using std::runtime_error::runtime_error; };

// Throws CollectiveTimeout for errc::timeout, AgreedError for errc::non_finite (the
// Reducer's verdict is the same on every rank), std::runtime_error for any other error:
// "<what>: <status text>" (the status text alone for an empty what).
void throw_if_failed(const tagc::status& s, const std::string& what);

class Watchdog {
 public:
  explicit Watchdog(MPI_Comm world);  // collective: every rank at start-up
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // "rank(s) 1 did not arrive (no answer within 5 s: stopped, dead or far behind);
  //  rank(s) 0 were waiting". Not collective: every rank that calls it answers the others.
  std::string census(double grace_seconds);

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
};

// The grace period census() waits: a few seconds, never more than the timeout itself.
double census_grace(double collective_timeout);

}  // namespace train
