// train_loop.hpp: the "train" command of the device trainer executables, written once
// over a type-erased Session (one rank's trainer, whatever its space), so the loop is
// compiled by the host compiler and nvcc only sees the trainer itself.
//
//   tagc-gpt2-cuda train ...         one rank per GPU over NCCL (device_trainer_cuda.cu)
//   tagc-gpt2-device-host train ...  the same trainer on exec::host + MPI (device_trainer_host.cpp)
// Both take tagc-gpt2's flags (train/args.hpp) and write the same log lines (train/metrics.hpp)
// and checkpoints (train/checkpoint.hpp).
#pragma once

#include "args.hpp"
#include "trainer.hpp"  // train::StepMetrics

#include "gpt2/config.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace train_device {

class Session {
 public:
  virtual ~Session() = default;
  virtual std::string backend() const = 0;  // "exec::cuda + NCCL", ...
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual int step() const = 0;
  virtual const gpt2::Config& config() const = 0;
  virtual size_t num_parameters() const = 0;
  virtual void init_from_seed() = 0;
  virtual void init_from_llmc(const std::string& path) = 0;
  virtual void save_checkpoint(const std::string& dir) = 0;
  virtual void load_checkpoint(const std::string& dir) = 0;
  virtual const std::vector<std::string>& resume_notes() const = 0;
  virtual train::StepMetrics train_step() = 0;
  virtual double evaluate(int batches) = 0;
  virtual std::vector<float> gather_model() = 0;
  virtual void agree(const char* what, const std::function<void()>& fn) = 0;
};

// The Session of one DeviceTrainer instantiation. A backend derives from it, owns the
// communicator (and streams), constructs t_ last and resets it first in its destructor
// (the trainer's worker uses the communicator until it is joined).
template <class Trainer>
class TrainerSession : public Session {
 public:
  int rank() const override { return t_->rank(); }
  int world() const override { return t_->world(); }
  int step() const override { return t_->step(); }
  const gpt2::Config& config() const override { return t_->config(); }
  size_t num_parameters() const override { return t_->num_parameters(); }
  void init_from_seed() override { t_->init_from_seed(); }
  void init_from_llmc(const std::string& path) override { t_->init_from_llmc(path); }
  void save_checkpoint(const std::string& dir) override { t_->save_checkpoint(dir); }
  void load_checkpoint(const std::string& dir) override { t_->load_checkpoint(dir); }
  const std::vector<std::string>& resume_notes() const override { return t_->resume_notes(); }
  train::StepMetrics train_step() override { return t_->train_step(); }
  double evaluate(int batches) override { return t_->evaluate(batches); }
  std::vector<float> gather_model() override { return t_->gather_model(); }
  void agree(const char* what, const std::function<void()>& fn) override { t_->agree(what, fn); }

 protected:
  std::unique_ptr<Trainer> t_;
};

// This build's backend (device_trainer_host.cpp or device_trainer_cuda.cu): the program
// name for messages, and a session on MPI_COMM_WORLD (MPI initialised by the caller).
const char* program_name();
std::unique_ptr<Session> open_session(const train::Args& a);

// cmd_train's loop over a session: start-up checks (train/run_guard.hpp), run info,
// steps, validation, checkpoints, final validation/checkpoint, --save-model. Errors: a
// message on stderr and exit code 1 (train::report_failure: an error past setup that
// not every rank agreed on, or a timeout, ends every rank with MPI_Abort).
int cmd_train_device(const train::Args& a);

}  // namespace train_device
