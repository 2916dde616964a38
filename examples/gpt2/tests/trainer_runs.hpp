// trainer_runs.hpp: n training steps of a fresh train::Trainer, the losses and gradient
// norms it reports — what the CPU trainer's MPI tests compare between runs (sharded
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
  train::Trainer t(a, mpi);
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

}  // namespace train_test
