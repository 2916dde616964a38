// trainer_host.cpp: Trainer<tagc::exec::host, tagc::mpi_communicator> (HostTrainer) and
// the backend of tagc-gpt2: ranks are MPI processes on CPUs (Thrust-OpenMP + CBLAS); its
// reducers are host_reducers_{paper,beyond}.cpp.
// defines: train::Trainer<exec::host, mpi_communicator>, train::program_name,
//          train::open_session (host backend)
#include "trainer_impl.hpp"
#include "session.hpp"

#include "tagc/comm/mpi.hpp"

#include <chrono>
#include <stdexcept>

TAGC_GPT2_TRAINER(tagc::exec::host, tagc::mpi_communicator);

namespace train {
namespace {

class HostSession final : public TrainerSession<HostTrainer> {
 public:
  // The trainer agrees on its own plan across ranks, so the per-collective argument
  // check (an extra small all-reduce each) is opt-in. Every wait has the watchdog's deadline.
  explicit HostSession(const Args& a)
      : mpi_(MPI_COMM_WORLD, {.checked = a.check_collectives,
                              .timeout = std::chrono::milliseconds(int64_t(a.collective_timeout * 1000.0))}) {
    if (!mpi_.init_status().ok()) throw std::runtime_error(mpi_.init_status().what());
    t_ = std::make_unique<HostTrainer>(a, mpi_);
  }
  ~HostSession() override { t_.reset(); }  // joins the worker before mpi_ goes
  std::string backend() const override { return "exec::host + MPI"; }

 private:
  tagc::mpi_communicator mpi_;
};

}  // namespace

const char* program_name() { return "tagc-gpt2"; }

std::unique_ptr<Session> open_session(const Args& a) { return std::make_unique<HostSession>(a); }

}  // namespace train
