// device_reducers_cuda.cu: the device trainer's reducers on exec::cuda over NCCL (the 18
// tagc::Reducer instantiations and the fp32/bf16 plain paths). Its own translation unit
// so nvcc builds it in parallel with device_trainer_cuda.cu.
// defines: train_device::make_*_reducer<tagc::exec::cuda, tagc::nccl_communicator>
#include "device_reducer_impl.hpp"

#include "tagc/comm/nccl.hpp"
#include "tagc/exec/cuda.hpp"

TAGC_GPT2_DEVICE_REDUCERS(tagc::exec::cuda, tagc::nccl_communicator);
