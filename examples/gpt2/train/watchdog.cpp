// watchdog.cpp: see watchdog.hpp.
// defines: train::throw_if_failed, train::Watchdog, train::census_grace
#include "watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace train {

void throw_if_failed(const tagc::status& s, const std::string& what) {
  if (s.ok()) return;
  const std::string m = what.empty() ? s.what() : what + ": " + s.what();
  if (s.code() == tagc::errc::timeout) throw CollectiveTimeout(m);
  // tagc::Reducer finds non-finite input through its control all-gather: every rank
  // returns it from the same collective, so the ranks can stop without MPI_Abort.
  if (s.code() == tagc::errc::non_finite) throw AgreedError(m);
  throw std::runtime_error(m);
}

Watchdog::Watchdog(MPI_Comm world) {
  MPI_Comm_dup(world, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_);
}

Watchdog::~Watchdog() {
  // Not freed: after a census the pings to absent ranks are still pending, and
  // MPI_Comm_free would wait for them; MPI_Finalize / MPI_Abort cleans up.
}

double census_grace(double collective_timeout) { return std::clamp(collective_timeout / 2, 1.0, 5.0); }


std::string Watchdog::census(double grace) {
  constexpr int tag = 4242;
  std::vector<MPI_Request> sends, recvs(size_t(world_), MPI_REQUEST_NULL);
  std::vector<int> ping(size_t(world_), 0), one(1, rank_);
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    MPI_Request q;
    MPI_Isend(one.data(), 1, MPI_INT, r, tag, comm_, &q);
    sends.push_back(q);
    MPI_Irecv(&ping[size_t(r)], 1, MPI_INT, r, tag, comm_, &recvs[size_t(r)]);
  }
  std::vector<bool> answered(size_t(world_), false);
  answered[size_t(rank_)] = true;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    bool all = true;
    for (int r = 0; r < world_; ++r) {
      if (answered[size_t(r)]) continue;
      int done = 0;
      MPI_Test(&recvs[size_t(r)], &done, MPI_STATUS_IGNORE);
      if (done) answered[size_t(r)] = true;
      else all = false;
    }
    if (all || std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > grace) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string missing, waiting;
  for (int r = 0; r < world_; ++r) {
    std::string& s = answered[size_t(r)] ? waiting : missing;
    s += (s.empty() ? "" : ", ") + std::to_string(r);
  }
  char g[32];
  std::snprintf(g, sizeof g, "%.0f s", grace);
  if (missing.empty())
    return "every rank answered after the timeout (rank(s) " + waiting +
           " were all waiting: ranks in different collectives, or a slow network?)";
  return "rank(s) " + missing + " did not arrive (no answer within " + g +
         " of the timeout: stopped, dead or far behind); rank(s) " + waiting + " were waiting";
}

}  // namespace train
