// run_guard.cpp: see run_guard.hpp.
// defines: train::start_run, train::report_failure
#include "run_guard.hpp"

#include "preflight.hpp"
#include "run_config.hpp"
#include "trainer.hpp"  // model_config

#include "tagc/comm/mpi.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <string>
#include <vector>

namespace train {

namespace {

// One verdict for a check each rank ran alone: every rank throws the first failing
// rank's message (up to 400 characters travel; a longer one is cut).
void agree_local(tagc::mpi_communicator& comm, const std::string& why) {
  constexpr size_t slot = 401;  // a flag, then the characters
  const size_t W = size_t(comm.size()), me = size_t(comm.rank());
  std::vector<double> in(W * slot, 0.0), out(in.size(), 0.0);
  if (!why.empty()) {
    in[me * slot] = 1.0;
    for (size_t i = 0; i < why.size() && i + 1 < slot; ++i) in[me * slot + 1 + i] = double((unsigned char)why[i]);
  }
  throw_if_failed(comm.all_reduce(std::span<const double>(in), std::span<double>(out)), "start-up check");
  if (!why.empty()) throw std::runtime_error(why);
  for (size_t r = 0; r < W; ++r)
    if (out[r * slot] != 0.0) {
      std::string msg;
      for (size_t i = 1; i < slot && out[r * slot + i] != 0.0; ++i) msg += char(int(out[r * slot + i]));
      throw std::runtime_error("start-up check failed on rank " + std::to_string(r) + ": " + msg);
    }
}

// Can a file be created next to `path` (its directory exists and is writable)?
void probe_writable(const std::filesystem::path& path, const std::string& flag) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(flag + " " + path.string() + " is a directory, not a file");
  const std::filesystem::path probe = path.string() + ".probe";
  std::ofstream f(probe);
  if (!f) throw std::runtime_error(flag + " " + path.string() + " cannot be written (cannot create " + probe.string() +
                                   ": does its directory exist, is it writable?)");
  f.close();
  std::filesystem::remove(probe, ec);
}

}  // namespace

StartedRun start_run(const Args& a) {
  StartedRun run;
  auto& watchdog = run.watchdog;
  watchdog = std::make_unique<Watchdog>(MPI_COMM_WORLD);
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

  // The paths only some ranks write, checked on those ranks now (not at the first save,
  // or after the whole run for --save-model), one verdict for all.
  why.clear();
  try {
    if (comm.rank() == 0) {
      if (!a.log.empty()) {
        std::ofstream f(a.log, std::ios::app);
        if (!f) throw std::runtime_error("cannot open --log " + a.log + " for writing");
      }
      if (!a.save_model.empty()) probe_writable(a.save_model, "--save-model");
      if (!a.checkpoint_dir.empty()) {
        std::string note;
        run.lock = DirLock::acquire(a.checkpoint_dir, &note);
        if (!note.empty()) run.notes.push_back(note);
      }
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  agree_local(comm, why);
  if (!a.checkpoint_dir.empty()) {
    try {  // every rank writes its files there: is it there, and writable, on each?
      probe_writable(std::filesystem::path(a.checkpoint_dir) / (".probe-rank" + std::to_string(comm.rank())),
                     "--checkpoint-dir");
    } catch (const std::exception& e) {
      why = e.what();
    }
    agree_local(comm, why);
  }
  return run;
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
