#!/usr/bin/env bash
# mpirun_local.sh — mpirun for a one-host job over TCP on loopback (Open MPI).
#
# Usage: scripts/mpirun_local.sh -np N [more mpirun options] PROGRAM [ARGS...]
#
# Adds, in front of your arguments:
#   --allow-run-as-root          containers run as root; Open MPI refuses it otherwise
#   --oversubscribe              more ranks than cores (tests, 2-core CI machines)
#   --mca btl tcp,self           TCP between ranks, no shared memory: traffic goes
#                                through lo, where scripts/slow_net.sh can shape it
#   --mca btl_tcp_if_include lo  Open MPI leaves lo out of TCP by default
#   --mca oob_tcp_if_include lo  and out of its runtime wire-up
# Set MPIRUN to use another launcher binary (default: mpirun on PATH).
set -euo pipefail
exec "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe \
  --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "$@"
