#pragma once
// defines: tagc_torch::make_process_group_transport — collective_transport over
//          a c10d::ProcessGroup (gloo on the CPU; any backend with these ops).

#include <memory>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "pg_communicator.hpp"

namespace tagc_torch {

std::shared_ptr<collective_transport> make_process_group_transport(c10::intrusive_ptr<c10d::ProcessGroup> pg);

}  // namespace tagc_torch
