// run_guard.cpp: see run_guard.hpp.
// defines: train::start_run, train::report_failure
#include "run_guard.hpp"

#include "preflight.hpp"
#include "run_config.hpp"
#include "trainer.hpp"  // model_config

#include "tagc/comm/mpi.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace train {

std::unique_ptr<Watchdog> start_run(const Args& a) {
  auto watchdog = std::make_unique<Watchdog>(MPI_COMM_WORLD);
  const auto timeout = std::chrono::milliseconds(int64_t(a.collective_timeout * 1000.0));
  tagc::mpi_communicator comm(MPI_COMM_WORLD, {.checked = false, .timeout = timeout});
  if (!comm.init_status().ok()) throw std::runtime_error(comm.init_status().what());
  check_ranks_agree(a, comm);
  // The same flags on every rank from here on: local checks give the same verdict,
  // except the memory check, which depends on the host.
  check_world(a, comm.size());
  std::string why;
  try {
    const gpt2::Config cfg = model_config(a);
    MPI_Comm host = MPI_COMM_NULL;
    int on_host = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL, &host) == MPI_SUCCESS) {
      MPI_Comm_size(host, &on_host);
      MPI_Comm_free(&host);
    }
    check_memory(estimate_memory(cfg, a, comm.size()), on_host, available_memory(), a.model);
  } catch (const std::exception& e) {
    why = e.what();
  }
  std::vector<double> flags(size_t(comm.size()), 0.0), any(flags.size(), 0.0);
  flags[size_t(comm.rank())] = why.empty() ? 0.0 : 1.0;
  throw_if_failed(comm.all_reduce(std::span<const double>(flags), std::span<double>(any)), "start-up check");
  if (!why.empty()) throw std::runtime_error(why);
  for (size_t r = 0; r < any.size(); ++r)
    if (any[r] != 0.0) throw std::runtime_error("start-up check failed on rank " + std::to_string(r) + " (see its message)");
  return watchdog;
}

int report_failure(const std::exception& e, const char* program, bool training, Watchdog* watchdog, const Args& a) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string who = world > 1 ? " (rank " + std::to_string(rank) + ")" : "";
  std::fprintf(stderr, "%s: error%s: %s\n", program, who.c_str(), e.what());
  std::fflush(stderr);
  const bool timed_out = dynamic_cast<const CollectiveTimeout*>(&e) != nullptr;
  const bool agreed = dynamic_cast<const AgreedError*>(&e) != nullptr;
  if (timed_out && watchdog && world > 1) {
    std::fprintf(stderr, "%s: rank %d: after --collective-timeout %g s: %s\n", program, rank, a.collective_timeout,
                 watchdog->census(census_grace(a.collective_timeout)).c_str());
    std::fflush(stderr);
  }
  // Mid-training (or after a timeout) other ranks may wait in a collective: end them all.
  // An AgreedError was thrown by every rank at the same point: none is left waiting.
  if (((training && !agreed) || timed_out) && world > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

}  // namespace train
