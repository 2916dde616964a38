#pragma once
// defines: tagc::nccl_unique_id_from_mpi, tagc::nccl_communicator_from_mpi —
//          NCCL's bootstrap over MPI: one MPI process per GPU (mpirun -np N).
//
// Kept apart from nccl.hpp so that only programs that use MPI need mpi.h.
// The functions are templates over the MPI communicator type (MPI_Comm, in
// practice), so including this header emits nothing unless it is used.

#include <mpi.h>

#include <string>
#include <type_traits>

#include "nccl.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail {
inline status mpi_status(int code, const char* what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  return {errc::communication, std::string(what) + ": " + std::string(text, std::size_t(len))};
}
}  // namespace detail

// Rank `root` of `comm` creates the id; MPI_Bcast gives it to the others.
template <class MpiComm>
  requires std::is_same_v<MpiComm, MPI_Comm>
nccl_expected<nccl_id> nccl_unique_id_from_mpi(MpiComm comm, int root = 0) {
  int rank = 0;
  if (const int e = MPI_Comm_rank(comm, &rank); e != MPI_SUCCESS)
    return ::cuda::std::unexpected(detail::mpi_status(e, "nccl_unique_id_from_mpi: MPI_Comm_rank"));
  nccl_id id{};
  if (rank == root) {
    auto fresh = nccl_unique_id();
    // Broadcast even on failure (an all-zero id), so no rank is left waiting in
    // MPI_Bcast; the others then fail in create() within its deadline.
    if (fresh) id = *fresh;
    const int e = MPI_Bcast(id.value.internal, int(sizeof id.value.internal), MPI_BYTE, root, comm);
    if (!fresh) return fresh;
    if (e != MPI_SUCCESS) return ::cuda::std::unexpected(detail::mpi_status(e, "nccl_unique_id_from_mpi: MPI_Bcast"));
    return id;
  }
  if (const int e = MPI_Bcast(id.value.internal, int(sizeof id.value.internal), MPI_BYTE, root, comm); e != MPI_SUCCESS)
    return ::cuda::std::unexpected(detail::mpi_status(e, "nccl_unique_id_from_mpi: MPI_Bcast"));
  return id;
}

// One NCCL rank per MPI rank of `comm`, same numbering. With opt.device < 0 the
// device is the rank's index among the ranks on its host (MPI_COMM_TYPE_SHARED);
// more ranks on a host than GPUs is refused (NCCL needs one GPU per rank).
template <class MpiComm>
  requires std::is_same_v<MpiComm, MPI_Comm>
nccl_expected<nccl_communicator> nccl_communicator_from_mpi(MpiComm comm, nccl_options opt = {}) {
  int rank = 0, size = 0;
  if (const int e = MPI_Comm_rank(comm, &rank); e != MPI_SUCCESS)
    return ::cuda::std::unexpected(detail::mpi_status(e, "nccl_communicator_from_mpi: MPI_Comm_rank"));
  if (const int e = MPI_Comm_size(comm, &size); e != MPI_SUCCESS)
    return ::cuda::std::unexpected(detail::mpi_status(e, "nccl_communicator_from_mpi: MPI_Comm_size"));
  if (opt.device < 0) {
    MPI_Comm host = MPI_COMM_NULL;
    if (const int e = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host); e != MPI_SUCCESS)
      return ::cuda::std::unexpected(detail::mpi_status(e, "nccl_communicator_from_mpi: MPI_Comm_split_type"));
    int local_rank = 0, local_size = 0;
    MPI_Comm_rank(host, &local_rank);
    MPI_Comm_size(host, &local_size);
    MPI_Comm_free(&host);
    int devices = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) devices = 0;
    // Every rank takes part in the id broadcast below even when it will fail,
    // so the others are not left waiting in MPI_Bcast.
    auto id = nccl_unique_id_from_mpi(comm);
    if (local_size > devices)
      return ::cuda::std::unexpected(status{
          errc::invalid_argument, "nccl_communicator_from_mpi: rank " + std::to_string(rank) + " shares its host with " +
                                      std::to_string(local_size) + " ranks but sees " + std::to_string(devices) +
                                      " GPU(s); NCCL needs one GPU per rank"});
    if (!id) return ::cuda::std::unexpected(id.error());
    opt.device = local_rank;
    return nccl_communicator::create(*id, size, rank, opt);
  }
  auto id = nccl_unique_id_from_mpi(comm);
  if (!id) return ::cuda::std::unexpected(id.error());
  return nccl_communicator::create(*id, size, rank, opt);
}

TAGC_END_NAMESPACE
