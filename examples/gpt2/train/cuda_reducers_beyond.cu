// cuda_reducers_beyond.cu: tagc-gpt2-cuda's reducers on exec::cuda over NCCL —
// the beyond-paper part (17 types: exact reduce-scattered index, 16-bit values, packed values, the shared and pooled selections, bf16 residual, plain fp32/bf16), and the whole CUDA catalogue.
// Two translation units so nvcc builds them in parallel.
// defines: train::reducer_catalogue_for(exec::cuda)
// defines: train::reducer_catalogue_for(exec::cuda) (declared under nvcc)
#include "reducer_catalogue.hpp"

#include "tagc/builder/default_catalogue.hpp"

namespace train {

using CudaComm = tagc::counting_communicator<tagc::nccl_communicator>;
tagc::reducer_catalogue<tagc::exec::cuda, CudaComm> cuda_reducers_paper();
TAGC_REDUCER_CATALOGUE(cuda_reducers_beyond, tagc::exec::cuda, CudaComm, tagc::default_beyond_catalogue<tagc::exec::cuda>)

tagc::reducer_catalogue<tagc::exec::cuda, CudaComm> reducer_catalogue_for(const tagc::exec::cuda&) {
  static const tagc::reducer_catalogue<tagc::exec::cuda, CudaComm> all(
      "tagc-gpt2-cuda (exec::cuda)", {cuda_reducers_paper(), cuda_reducers_beyond()});
  return all;
}

}  // namespace train
