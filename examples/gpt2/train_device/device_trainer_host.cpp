// device_trainer_host.cpp: DeviceTrainer<tagc::exec::host, tagc::mpi_communicator> —
// the device trainer's orchestration on the CPU (Thrust-OpenMP + CBLAS), so it is
// tested without a GPU — and the host backend of tagc-gpt2-device-host.
// defines: train_device::DeviceTrainer<exec::host, mpi_communicator>,
//          train_device::program_name, train_device::open_session (host backend)
#include "device_trainer_impl.hpp"
#include "train_loop.hpp"

#include "tagc/comm/mpi.hpp"

TAGC_GPT2_DEVICE_TRAINER(tagc::exec::host, tagc::mpi_communicator);

namespace train_device {
namespace {

class HostSession final : public TrainerSession<DeviceTrainer<tagc::exec::host, tagc::mpi_communicator>> {
 public:
  explicit HostSession(const train::Args& a)
      : mpi_(MPI_COMM_WORLD, {.checked = a.check_collectives,
                              .timeout = std::chrono::milliseconds(int64_t(a.collective_timeout * 1000.0))}) {
    if (!mpi_.init_status().ok()) throw std::runtime_error(mpi_.init_status().what());
    t_ = std::make_unique<DeviceTrainer<tagc::exec::host, tagc::mpi_communicator>>(a, mpi_);
  }
  ~HostSession() override { t_.reset(); }  // joins the worker before mpi_ goes
  std::string backend() const override { return "exec::host + MPI"; }

 private:
  tagc::mpi_communicator mpi_;
};

}  // namespace

const char* program_name() { return "tagc-gpt2-device-host"; }

std::unique_ptr<Session> open_session(const train::Args& a) { return std::make_unique<HostSession>(a); }

}  // namespace train_device
