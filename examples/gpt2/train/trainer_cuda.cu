// trainer_cuda.cu: Trainer<tagc::exec::cuda, tagc::nccl_communicator> and the backend of
// tagc-gpt2-cuda: one MPI rank per GPU, NCCL bootstrapped over MPI.
// Built only with -DTAGC_GPT2_CUDA=ON (nvcc); its reducers are in cuda_reducers_{paper,beyond}.cu.
// defines: train::Trainer<exec::cuda, nccl_communicator>, train::program_name,
//          train::open_session (CUDA backend)
#include "stream_order_cuda.hpp"
#include "trainer_impl.hpp"
#include "session.hpp"

// defines: tagc::nccl_communicator, tagc::nccl_communicator_from_mpi
#include "tagc/comm/nccl.hpp"
#include "tagc/comm/nccl_mpi_bootstrap.hpp"

#include <cuda_runtime.h>

TAGC_GPT2_TRAINER(tagc::exec::cuda, tagc::nccl_communicator);

namespace train {
namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

class CudaSession final : public TrainerSession<Trainer<tagc::exec::cuda, tagc::nccl_communicator>> {
 public:
  explicit CudaSession(const Args& a) {
    if (a.check_collectives)
      throw std::invalid_argument("--check-collectives is an MPI option: NCCL cannot compare arguments across ranks");
    // One rank per GPU: the device is the rank's index among the ranks on its host
    // (MPI_COMM_TYPE_SHARED); more ranks on a host than GPUs is refused there.
    tagc::nccl_options opt;
    opt.timeout = std::chrono::milliseconds(int64_t(a.collective_timeout * 1000.0));  // --collective-timeout
    auto comm = tagc::nccl_communicator_from_mpi(MPI_COMM_WORLD, opt);
    if (!comm) throw std::runtime_error("NCCL setup: " + comm.error().what());
    nccl_ = std::move(*comm);
    device_ = nccl_.device();
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    // Non-blocking: the legacy default stream (Thrust's vector allocations) never
    // serializes the step's two streams.
    cuda_check(cudaStreamCreateWithFlags(&model_, cudaStreamNonBlocking), "cudaStreamCreate (model)");
    cuda_check(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreate (side)");
    t_ = std::make_unique<Trainer<tagc::exec::cuda, tagc::nccl_communicator>>(a, nccl_, tagc::exec::cuda{model_},
                                                                                  tagc::exec::cuda{side_});
  }
  ~CudaSession() override {
    t_.reset();  // joins the worker and frees the device buffers first
    (void)nccl_.finalize();
    if (model_) (void)cudaStreamDestroy(model_);
    if (side_) (void)cudaStreamDestroy(side_);
  }
  std::string backend() const override { return "exec::cuda + NCCL (GPU " + std::to_string(device_) + ")"; }

 private:
  tagc::nccl_communicator nccl_;
  int device_ = 0;
  cudaStream_t model_ = nullptr, side_ = nullptr;
};

}  // namespace

const char* program_name() { return "tagc-gpt2-cuda"; }

std::unique_ptr<Session> open_session(const Args& a) { return std::make_unique<CudaSession>(a); }

}  // namespace train
