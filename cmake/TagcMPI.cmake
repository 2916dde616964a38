# Locates MPI for tagc's MPI communicator (include/tagc/comm/mpi.hpp, header-only)
# and defines:
#   tagc::mpi                INTERFACE target: tagc::tagc + the MPI C API
#   TAGC_MPIEXEC_LOCAL_FLAGS  mpiexec flags for a local (one host) job over TCP on
#                            loopback, as the tests and scripts/mpirun_local.sh use
# Only the C API is used: OpenMPI's deprecated C++ bindings are skipped.
include_guard(GLOBAL)
set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "tagc uses the MPI C API only")
find_package(MPI COMPONENTS CXX)

if(MPI_CXX_FOUND AND NOT TARGET tagc_mpi)
  add_library(tagc_mpi INTERFACE)
  add_library(tagc::mpi ALIAS tagc_mpi)
  target_link_libraries(tagc_mpi INTERFACE tagc::tagc MPI::MPI_CXX)

  # Open MPI: allow root, more ranks than cores, and TCP over loopback (Open MPI
  # leaves lo out of TCP by default; the shared-memory transport is left out on
  # purpose so that scripts/slow_net.sh can shape the traffic).
  # A cache variable: include_guard(GLOBAL) skips this file in every later directory,
  # and a plain variable would be visible only in the first one that included it.
  set(_tagc_flags "")
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _tagc_mpiexec_version
                  ERROR_QUIET RESULT_VARIABLE _tagc_rc)
  if(_tagc_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(_tagc_flags --oversubscribe --allow-run-as-root
        --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
  endif()
  set(TAGC_MPIEXEC_LOCAL_FLAGS "${_tagc_flags}" CACHE INTERNAL "mpiexec flags for a local job over TCP on loopback")
endif()
