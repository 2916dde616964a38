// defines: a program whose MPI job must end abnormally — within a bounded
//          time and with a nonzero exit status — run by expect_abnormal_exit.sh.
//
//   mpi_abnormal exit   the last rank dies (std::_Exit(3)) before a collective the
//                       others are waiting in, with a communicator deadline far
//                       beyond the wrapper's bound: only mpirun tearing the job
//                       down (Open MPI does when a process exits without
//                       MPI_Finalize) can end it in time.
//   mpi_abnormal abort  the last rank never arrives; the others time out after
//                       0.5 s, print the status, and rank 0 calls abort(17).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "tagc/comm/mpi.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const bool abort_mode = argc > 1 && std::strcmp(argv[1], "abort") == 0;
  tagc::mpi_communicator comm(MPI_COMM_WORLD,
                              {.checked = true, .timeout = abort_mode ? std::chrono::milliseconds(500)
                                                                      : std::chrono::milliseconds(120'000)});
  const int me = comm.rank(), last = comm.size() - 1;
  if (auto s = comm.barrier(); !s.ok()) {
    std::printf("rank %d: barrier failed: %s\n", me, s.what().c_str());
    return 1;
  }

  std::vector<float> in(1 << 16, 1.0f), out(in.size());
  if (me == last) {
    if (abort_mode) {
      std::this_thread::sleep_for(std::chrono::seconds(60));  // never arrives in time
    } else {
      std::printf("rank %d: exiting with status 3 before the collective\n", me);
      std::fflush(stdout);
      std::_Exit(3);
    }
  }
  const auto s = comm.all_reduce(std::span<const float>(in), std::span<float>(out));
  std::printf("rank %d: all_reduce returned: %s\n", me, s.what().c_str());
  std::fflush(stdout);
  if (!s.ok() && me == 0) comm.abort(17);
  if (!s.ok()) std::this_thread::sleep_for(std::chrono::seconds(60));  // rank 0's abort ends us
  MPI_Finalize();
  return 0;  // reaching here means the job did *not* fail: the wrapper reports that
}
