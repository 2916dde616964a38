// device_reducers_host.cpp: the device trainer's reducers on exec::host over MPI
// (the 18 tagc::Reducer instantiations and the fp32/bf16 plain paths).
// defines: train_device::make_*_reducer<tagc::exec::host, tagc::mpi_communicator>
#include "device_reducer_impl.hpp"

#include "tagc/comm/mpi.hpp"

TAGC_GPT2_DEVICE_REDUCERS(tagc::exec::host, tagc::mpi_communicator);
