#!/usr/bin/env bash
# Usage: expect_abnormal_exit.sh BOUND_SECONDS REGEX -- COMMAND...
# Passes only if COMMAND (an MPI job) ends by itself within BOUND_SECONDS with a
# nonzero exit status and its output matches the extended REGEX ("" = any).
# A hang fails: the command is killed at the bound and the test reports it.
set -u
if [[ $# -lt 4 || $3 != "--" ]]; then
  echo "usage: $0 BOUND_SECONDS REGEX -- COMMAND..." >&2
  exit 2
fi
bound=$1 regex=$2
shift 3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s%N)
timeout --kill-after=5 "$bound" "$@" >"$log" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
cat "$log"
echo "---- exit status $rc after ${elapsed} s (bound ${bound} s)"
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "FAIL: the job did not end within ${bound} s (hang)"
  exit 1
fi
if [[ $rc -eq 0 ]]; then
  echo "FAIL: the job exited 0; expected a failing job"
  exit 1
fi
if [[ -n $regex ]] && ! grep -Eq -- "$regex" "$log"; then
  echo "FAIL: output does not match /$regex/"
  exit 1
fi
echo "PASS: the job failed as expected (status $rc) within the bound"
