// session.hpp: one rank's trainer behind a type-erased Session, so the "train" command
// (cmd_train.cpp) is written once and compiled by the host compiler for every backend;
// nvcc only sees the trainer itself (trainer_cuda.cu).
// defines: train::Session, train::TrainerSession, train::program_name, train::open_session
//
//   tagc-gpt2 train ...       Trainer<exec::host, mpi_communicator>  (trainer_host.cpp)
//   tagc-gpt2-cuda train ...  Trainer<exec::cuda, nccl_communicator>, one rank per GPU
//                             (trainer_cuda.cu)
// Both take the same flags (args.hpp) and write the same log lines (metrics.hpp) and
// checkpoints (checkpoint.hpp).
#pragma once

#include "args.hpp"
#include "auto_select.hpp"
#include "trainer.hpp"  // train::StepMetrics

#include "gpt2/config.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace train {

class Session {
 public:
  virtual ~Session() = default;
  virtual std::string backend() const = 0;  // "exec::cuda + NCCL", ...
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual int step() const = 0;
  virtual int nodes() const = 0;  // what the gradients are compressed across (--ranks-per-node)
  virtual const gpt2::Config& config() const = 0;
  virtual size_t num_parameters() const = 0;
  virtual const AutoPlan* auto_plan() const = 0;
  virtual void init_from_seed() = 0;
  virtual void init_from_llmc(const std::string& path) = 0;
  virtual std::string save_checkpoint(const std::string& dir) = 0;  // "" or why not saved
  virtual void claim_checkpoint_dir(const std::string& dir) = 0;
  virtual uint64_t run_id() = 0;
  virtual void load_checkpoint(const std::string& dir) = 0;
  virtual const std::vector<std::string>& resume_notes() const = 0;
  virtual StepMetrics train_step() = 0;
  virtual std::vector<double> evaluate_batches(int batches) = 0;
  virtual uint64_t val_batches_available() const = 0;
  virtual std::vector<float> gather_model() = 0;
  virtual void agree(const char* what, const std::function<void()>& fn) = 0;
};

// The Session of one Trainer instantiation. A backend derives from it, owns the
// communicator (and streams), constructs t_ last and resets it first in its destructor
// (the trainer's worker uses the communicator until it is joined).
template <class T>
class TrainerSession : public Session {
 public:
  int rank() const override { return t_->rank(); }
  int world() const override { return t_->world(); }
  int step() const override { return t_->step(); }
  int nodes() const override { return t_->nodes(); }
  const gpt2::Config& config() const override { return t_->config(); }
  size_t num_parameters() const override { return t_->num_parameters(); }
  const AutoPlan* auto_plan() const override { return t_->auto_plan(); }
  void init_from_seed() override { t_->init_from_seed(); }
  void init_from_llmc(const std::string& path) override { t_->init_from_llmc(path); }
  std::string save_checkpoint(const std::string& dir) override { return t_->save_checkpoint(dir); }
  void claim_checkpoint_dir(const std::string& dir) override { t_->claim_checkpoint_dir(dir); }
  uint64_t run_id() override { return t_->run_id(); }
  void load_checkpoint(const std::string& dir) override { t_->load_checkpoint(dir); }
  const std::vector<std::string>& resume_notes() const override { return t_->resume_notes(); }
  StepMetrics train_step() override { return t_->train_step(); }
  std::vector<double> evaluate_batches(int batches) override { return t_->evaluate_batches(batches); }
  uint64_t val_batches_available() const override { return t_->val_batches_available(); }
  std::vector<float> gather_model() override { return t_->gather_model(); }
  void agree(const char* what, const std::function<void()>& fn) override { t_->agree(what, fn); }

 protected:
  std::unique_ptr<T> t_;
};

// This executable's backend (trainer_host.cpp or trainer_cuda.cu): the program name for
// messages, and a session on MPI_COMM_WORLD (MPI initialised by the caller).
const char* program_name();
std::unique_ptr<Session> open_session(const Args& a);

}  // namespace train
