// trainer_runs.hpp: n training steps of a fresh train::HostTrainer, the losses and gradient
// norms it reports, and the resume-continuity check built on it — what the CPU trainer's MPI tests compare between runs (sharded
// against single-rank, saved + resumed against uninterrupted, one flag against another).
#pragma once

#include <doctest/doctest.h>

#include "args.hpp"
#include "trainer.hpp"

#include <mpi.h>

#include <string>
#include <vector>

namespace train_test {

struct Run {
  std::vector<double> loss, norm;
};

// n steps on `comm` (MPI_COMM_WORLD or MPI_COMM_SELF), from the seed or from the checkpoint
// in `resume`; the checkpoint is written to `save_dir` at the end when one is given.
inline Run run(const train::Args& a, MPI_Comm comm, int n, const std::string& save_dir = "",
               const std::string& resume = "") {
  tagc::mpi_communicator mpi(comm);
  REQUIRE(mpi.init_status().ok());
  train::HostTrainer t(a, mpi);
  if (!resume.empty()) t.load_checkpoint(resume);
  else t.init_from_seed();
  Run r;
  for (int i = 0; i < n; ++i) {
    const auto m = t.train_step();
    r.loss.push_back(m.loss);
    r.norm.push_back(m.grad_norm);
  }
  if (!save_dir.empty()) t.save_checkpoint(save_dir);
  return r;
}

// Resume continuity: `total` steps straight through give bit for bit the losses of
// `split` steps saved to `dir` followed by `total - split` steps resumed from it.
inline void check_resume_continues(const train::Args& a, MPI_Comm comm, int total, int split, const std::string& dir) {
  const Run whole = run(a, comm, total);
  const Run first = run(a, comm, split, dir);
  const Run second = run(a, comm, total - split, "", dir);
  for (int i = 0; i < total; ++i) {
    INFO("step " << i + 1);
    CHECK((i < split ? first.loss[size_t(i)] : second.loss[size_t(i - split)]) == whole.loss[size_t(i)]);
  }
}

}  // namespace train_test
