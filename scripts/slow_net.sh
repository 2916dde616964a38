#!/usr/bin/env bash
# slow_net.sh — run a command (typically an MPI job) on a real, rate-limited
# network: the loopback of a private network namespace, shaped with tc tbf.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/slow_net.sh --rate RATE [options] -- COMMAND [ARGS...]
       scripts/slow_net.sh --rate RATE [options] --measure

Runs COMMAND inside a private network namespace whose only interface is a
loopback (127.0.0.1/8, ::1) with MTU 1500 and a token-bucket filter:
    tc qdisc add dev lo root tbf rate RATE burst BURST latency LATENCY
The namespace is deleted on exit (also on error or Ctrl-C). Nothing outside
127.0.0.0/8 can be reached from it: it has no other interface and no route.

Options:
  --rate RATE        tc rate, e.g. 100mbit, 1gbit, 500kbit (required)
  --burst SIZE       tbf bucket size (default 256kb, i.e. 256 KiB)
  --latency TIME     tbf queueing limit (default 100ms)
  --np N             ranks for --measure (default 2)
  --bytes SIZE       bytes per rank for --measure, suffix K/M/G allowed (default 16M)
  --measure          measure what the shaped link delivers instead of running a
                     command: a raw TCP stream (python3) and an MPI
                     reduce-scatter over TCP (mpicc + mpirun), both reported in Mbit/s
  -h, --help         this text

MPI jobs must use TCP over loopback, e.g. through scripts/mpirun_local.sh:
  scripts/slow_net.sh --rate 100mbit -- scripts/mpirun_local.sh -np 2 ./my_job

Caveat: ONE SHARED HALF-DUPLEX LINK. The single qdisc on lo carries every rank's
traffic, in both directions. RATE is the total of all bytes all ranks send, not a
per-host NIC bandwidth: with N ranks each sending at the same time, each gets about
RATE / N, and a full-duplex NIC of RATE per host would carry up to N x RATE in
all. Convert accordingly when comparing with a cluster (or give each rank its own
namespace joined by veth pairs, each with its own tbf). tbf counts IP packets, so
payload throughput is ~4-5% below RATE (TCP/IP headers at MTU 1500).

Open MPI 4.1 picks reduce + scatter for MPI_Reduce_scatter_block on few ranks
(1.5 x S on the link for 2 ranks instead of S). For the bandwidth-optimal one add
  --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_reduce_scatter_block_algorithm 4
(butterfly; or set OMPI_MCA_coll_tuned_use_dynamic_rules=1 and
OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm=4 in the environment).
EOF
}

die() { echo "slow_net.sh: $*" >&2; exit 2; }

rate="" burst="256kb" latency="100ms" np=2 bytes="16M" measure=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --burst) burst=${2:?--burst needs a value}; shift 2 ;;
    --latency) latency=${2:?--latency needs a value}; shift 2 ;;
    --np) np=${2:?--np needs a value}; shift 2 ;;
    --bytes) bytes=${2:?--bytes needs a value}; shift 2 ;;
    --measure) measure=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

[[ -n $rate ]] || { usage >&2; die "--rate is required (e.g. --rate 100mbit)"; }
shopt -s nocasematch
[[ $rate =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$ ]] ||
  die "--rate '$rate' is not a tc rate (e.g. 100mbit, 1gbit, 500kbit)"
shopt -u nocasematch
[[ $np =~ ^[1-9][0-9]*$ ]] || die "--np '$np' is not a positive integer"
case $bytes in
  *[kK]) nbytes=$(( ${bytes%?} * 1024 )) ;;
  *[mM]) nbytes=$(( ${bytes%?} * 1024 * 1024 )) ;;
  *[gG]) nbytes=$(( ${bytes%?} * 1024 * 1024 * 1024 )) ;;
  *) nbytes=$bytes ;;
esac
[[ $nbytes =~ ^[1-9][0-9]*$ ]] || die "--bytes '$bytes' is not a size"
if [[ $measure -eq 0 && $# -eq 0 ]]; then
  usage >&2
  die "no command given (put it after --), or use --measure"
fi

# Privileges and tools, checked before anything is created.
command -v ip >/dev/null || die "'ip' not found (install iproute2)"
command -v tc >/dev/null || die "'tc' not found (install iproute2)"
capeff=$(awk '/^CapEff:/ {print $2}' /proc/self/status 2>/dev/null || echo 0)
if (( (16#${capeff:-0} >> 12 & 1) == 0 )); then
  die "needs CAP_NET_ADMIN to create a network namespace and shape it: run as root (uid now $(id -u))"
fi
if (( (16#${capeff:-0} >> 21 & 1) == 0 )); then
  die "needs CAP_SYS_ADMIN for 'ip netns add' (mounts /run/netns): run as root in a privileged container"
fi

ns="tagc_slow_$$"
tmp=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if ip netns list 2>/dev/null | grep -qw "$ns"; then
    ip netns del "$ns" 2>/dev/null || echo "slow_net.sh: could not delete namespace $ns" >&2
  fi
  [[ -n $tmp ]] && rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$ns" || die "'ip netns add $ns' failed"
ip -n "$ns" link set lo mtu 1500 up
tc -n "$ns" qdisc add dev lo root tbf rate "$rate" burst "$burst" latency "$latency" ||
  die "tc refused 'tbf rate $rate burst $burst latency $latency'"

addr=$(ip -n "$ns" -o -4 addr show dev lo | awk '{print $4}')
mtu=$(ip -n "$ns" -o link show dev lo | sed -E 's/.* mtu ([0-9]+).*/\1/')
echo "slow_net.sh: namespace $ns: lo $addr mtu $mtu (no other interface)"
echo "slow_net.sh: $(tc -n "$ns" qdisc show dev lo)"
echo "slow_net.sh: one shared half-duplex link: $rate is the total for all ranks, both directions"

in_ns() { ip netns exec "$ns" "$@"; }

if [[ $measure -eq 0 ]]; then
  set +e
  in_ns "$@"
  rc=$?
  set -e
  echo "slow_net.sh: command exited with status $rc"
  exit "$rc"
fi

# ---- --measure ---------------------------------------------------------------
tmp=$(mktemp -d)
status=0
if command -v python3 >/dev/null; then
  cat >"$tmp/stream.py" <<'EOF'
# One TCP stream 127.0.0.1 -> 127.0.0.1: every payload byte crosses lo once.
import socket, sys, threading, time
n = int(sys.argv[1])
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
got = [0, 0.0]
def receive():
    c, _ = srv.accept()
    left = n
    while left > 0:
        b = c.recv(1 << 20)
        if not b: break
        left -= len(b)
    got[0] = n - left; got[1] = time.perf_counter(); c.close()
t = threading.Thread(target=receive); t.start()
s = socket.create_connection(srv.getsockname())
chunk = bytes(1 << 20); t0 = time.perf_counter(); sent = 0
while sent < n:
    sent += s.send(chunk[: min(len(chunk), n - sent)])
s.close(); t.join()
dt = got[1] - t0
print(f"tcp stream: {got[0] / 2**20:.1f} MiB in {dt:.3f} s = {got[0] * 8 / dt / 1e6:.1f} Mbit/s payload")
EOF
  in_ns python3 "$tmp/stream.py" "$nbytes" || status=1
else
  echo "slow_net.sh: python3 not found, skipping the raw TCP measurement"
fi

if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  cat >"$tmp/rs.c" <<'EOF'
/* MPI_Reduce_scatter_block of B bytes per rank over TCP on lo, 3 timed calls. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const long bytes = atol(argv[1]);
  const int block = (int)(bytes / 4 / n), iters = 3;
  float* in = malloc((size_t)block * n * 4);
  float* out = malloc((size_t)block * 4);
  for (long i = 0; i < (long)block * n; ++i) in[i] = (float)(i % 13);
  MPI_Reduce_scatter_block(in, out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int k = 0; k < iters; ++k)
    MPI_Reduce_scatter_block(in, out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t = (MPI_Wtime() - t0) / iters, tmax = 0;
  MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (r == 0) {
    const double S = (double)block * n * 4, per_rank = S * (n - 1) / n;
    printf("mpi reduce_scatter_block: %d ranks x %.1f MiB, %.3f s per call\n", n, S / 1048576.0, tmax);
    printf("  on the shared link (all ranks, ring model %d x (n-1)/n x S): %.1f Mbit/s\n", n,
           n * per_rank * 8 / tmax / 1e6);
    printf("  per rank sent ((n-1)/n x S, nccl-tests busbw):            %.1f Mbit/s\n", per_rank * 8 / tmax / 1e6);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
EOF
  mpicc -O2 -o "$tmp/rs" "$tmp/rs.c"
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  in_ns "$here/mpirun_local.sh" -np "$np" "$tmp/rs" "$nbytes" || status=1
else
  echo "slow_net.sh: mpicc/mpirun not found, skipping the MPI measurement"
fi
exit "$status"
