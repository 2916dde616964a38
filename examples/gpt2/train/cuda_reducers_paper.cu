// cuda_reducers_paper.cu: tagc-gpt2-cuda's reducers on exec::cuda over NCCL —
// the paper part (18 types: sketch values, index 1|4, ratio 2|4|10, every decoder).
// Two translation units so nvcc builds them in parallel.
// defines: train::cuda_reducers_paper
// defines: train::reducer_catalogue_for(exec::cuda) (declared under nvcc)
#include "reducer_catalogue.hpp"

#include "tagc/builder/default_catalogue.hpp"

namespace train {
TAGC_REDUCER_CATALOGUE(cuda_reducers_paper, tagc::exec::cuda, tagc::counting_communicator<tagc::nccl_communicator>,
                       tagc::default_paper_catalogue<tagc::exec::cuda>)
}  // namespace train
