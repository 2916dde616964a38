// defines: main() of the doctest programs that run under mpirun.
//
// MPI_Init comes before any test; every rank runs the same test cases in the
// same order (they call collectives). Rank 0 prints the normal report, the other
// ranks only their failures (each failing check says its rank through INFO).
// The exit code is nonzero on every rank when any rank failed, so mpirun fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  if (rank != 0) ctx.setOption("minimal", true);
  const int failed = ctx.run() != 0 ? 1 : 0;

  int any_failed = failed;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed) std::fprintf(stderr, "tagc mpi tests: at least one rank failed\n");
  MPI_Finalize();
  return any_failed;
}
