/* multinode_probe.c -- what the emulated cluster of scripts/multinode.sh delivers.
 *
 * Run by `scripts/multinode.sh measure` as an MPI job of at least 2 nodes x 2 ranks
 * (ranks m*K .. m*K+K-1 on node m). Prints, per rank, where it runs ("map" lines: host
 * name, size of its shared-memory communicator, TAGC_RANKS_PER_NODE), then from rank 0
 * the payload rate of each pattern ("rate" lines, Mbit/s of MPI payload):
 *   inter_oneway   rank 0 -> rank K (node 0 -> node 1), one stream
 *   inter_duplex   rank 0 <-> rank K at once: the rate of each direction (full duplex:
 *                  both directions get the link rate)
 *   inter_shared   ranks 0 -> K and 1 -> K+1 at once: their sum (both leave node 0 on
 *                  its one link, so together they get the link rate, not twice it)
 *   intra_duplex   rank 0 <-> rank 1, the same node: shared memory, not the link
 * Usage: multinode_probe BYTES
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char* buf_send;
static char* buf_recv;

/* Seconds for `bytes` from `from` to `to` (and back at once when duplex), measured
   from a common barrier to the last rank involved finishing. Ranks not involved wait. */
static double transfer(int me, int from, int to, long bytes, int duplex) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  const int count = (int)bytes;
  if (duplex && (me == from || me == to)) {
    const int peer = me == from ? to : from;
    MPI_Sendrecv(buf_send, count, MPI_BYTE, peer, 7, buf_recv, count, MPI_BYTE, peer, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (me == from) {
    MPI_Send(buf_send, count, MPI_BYTE, to, 7, MPI_COMM_WORLD);
  } else if (me == to) {
    MPI_Recv(buf_recv, count, MPI_BYTE, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  double t = MPI_Wtime() - t0, tmax = 0;
  MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return tmax;
}

/* Two streams at once: a -> b and c -> d; returns the seconds until both are done. */
static double two_streams(int me, int a, int b, int c, int d, long bytes) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  const int count = (int)bytes;
  if (me == a) MPI_Send(buf_send, count, MPI_BYTE, b, 8, MPI_COMM_WORLD);
  if (me == b) MPI_Recv(buf_recv, count, MPI_BYTE, a, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (me == c) MPI_Send(buf_send, count, MPI_BYTE, d, 8, MPI_COMM_WORLD);
  if (me == d) MPI_Recv(buf_recv, count, MPI_BYTE, c, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  double t = MPI_Wtime() - t0, tmax = 0;
  MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return tmax;
}

static void report(int me, const char* name, double bytes, double seconds) {
  if (me == 0) printf("rate %s %.1f Mbit/s (%.1f MiB in %.3f s)\n", name, bytes * 8 / seconds / 1e6,
                      bytes / 1048576.0, seconds);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const long bytes = argc > 1 ? atol(argv[1]) : 0;
  const char* rpn_env = getenv("TAGC_RANKS_PER_NODE");
  const int k = rpn_env ? atoi(rpn_env) : 0;
  if (bytes <= 0 || bytes > (1L << 30) || k < 2 || world < 2 * k) {
    if (me == 0)
      fprintf(stderr, "multinode_probe: needs BYTES in (0, 1 GiB] (got '%s') and >= 2 nodes of >= 2 ranks "
                      "(TAGC_RANKS_PER_NODE=%s, world %d)\n", argc > 1 ? argv[1] : "", rpn_env ? rpn_env : "unset", world);
    MPI_Finalize();
    return 2;
  }

  /* Where each rank runs, printed in rank order. */
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
  int node_size;
  MPI_Comm_size(node, &node_size);
  char line[512];
  snprintf(line, sizeof line, "map rank %d host %s shared_size %d ranks_per_node %s", me, host, node_size,
           rpn_env);
  char* all = me == 0 ? malloc((size_t)world * sizeof line) : NULL;
  MPI_Gather(line, (int)sizeof line, MPI_CHAR, all, (int)sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (me == 0)
    for (int r = 0; r < world; ++r) printf("%s\n", all + (size_t)r * sizeof line);
  fflush(stdout);

  buf_send = malloc((size_t)bytes);
  buf_recv = malloc((size_t)bytes);
  memset(buf_send, 1, (size_t)bytes);
  /* Warm-up: Open MPI opens TCP connections on first use. */
  transfer(me, 0, k, 1024, 1);
  transfer(me, 1, k + 1, 1024, 1);
  transfer(me, 0, 1, 1024, 1);

  report(me, "inter_oneway", (double)bytes, transfer(me, 0, k, bytes, 0));
  report(me, "inter_duplex", (double)bytes, transfer(me, 0, k, bytes, 1));
  report(me, "inter_shared", 2.0 * (double)bytes, two_streams(me, 0, k, 1, k + 1, bytes));
  report(me, "intra_duplex", (double)bytes, transfer(me, 0, 1, bytes, 1));

  free(buf_send);
  free(buf_recv);
  free(all);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return 0;
}
