#!/usr/bin/env bash
# test_train_robust.sh EXE SHARDS CASE MPIEXEC NP_FLAG [MPIEXEC_FLAGS...] -- nothing lost,
# nothing hangs (issue 14), driven through a trainer executable (tagc-gpt2; tagc-gpt2-cuda
# shares its trainer, checkpoint store, start-up checks and failure report) with 2 ranks
# on the tiny model:
#   kill      a rank SIGKILLed halfway through writing its checkpoint; the resume takes
#             the previous complete step and continues exactly as an uninterrupted run
#   damage    a flipped byte / a missing file in the newest step: named, fallback, exact
#   blowup    --lr 1e30 resumed into the same directory stops on the non-finite loss and
#             leaves the good steps resumable
#   agree     flags that differ between ranks (MPMD launch) or from the checkpoint:
#             every rank exits non-zero within seconds naming the flag and the values
#   nan       a NaN in the loss, in a plain and in a compressed gradient: every rank
#             stops naming the step and the unit; nothing of that step is saved
#   watchdog  a stalled rank: the other ends the job after --collective-timeout naming it
#   preflight --model d99 refused with figures; a token id beyond the vocabulary named
#             with its file and offset
# Issue 30 (nothing lost, round two):
#   resave    kill -9 during the re-save of a step that is already complete (a resume of
#             a finished run; a resume from an earlier step): the complete step survives
#   tworuns   a second run on a directory in use is refused naming the holder; a kill -9
#             leaves a stale lock the resume replaces; a fresh run refuses another run's steps
#   diverge   a run gone bad slowly (--lr 1e4) saves nothing unhealthy and prunes no good
#             step; --resume takes the newest healthy step; --guard-rewind rewinds, then stops
#   foreign   another run's step (same shape, another seed) copied into the directory is
#             skipped, kept aside when its step is saved, and the resume continues exactly
#   savemodel kill -9 while --save-model is written: the previous model file is intact
#   startup   a path only rank 0 writes (--log, --save-model, --checkpoint-dir) that
#             cannot be written ends every rank within seconds, each printing the message
#   sigterm   SIGTERM to one rank: the step finishes, every rank saves and exits 75; the
#             resumed run continues bit for bit; a second signal ends a rank at once
#   weak      a damaged manifest falls back; --resume FILE; --sparsity 1, --clip 0;
#             --steps below the checkpoint; --val-batches capped
# Fault injection: TAGC_GPT2_INJECT_* (train/fault_injection.hpp).
set -u
exe="$1" shards="$2" case="$3" mpiexec="$4" npflag="$5"
shift 5
mpiflags=("$@")
work="$(mktemp -d "${TMPDIR:-/tmp}/tagc_robust_XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$shards" "$work/data" || exit 1
tiny=(--model d2 --L 2 --C 64 --NH 2 --maxT 64 --T 32 --B 2 --lr 1e-3 --warmup 1 --compress none
      --val-batches 1 --print-every 1
      --train-data "$work/data/t_train.bin" --val-data "$work/data/t_val.bin")
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok: $*"; }
# run2 OUT ARGS...: 2 ranks, same flags; stdout+stderr to OUT; returns the exit code.
run2() {
  local out="$1"
  shift
  timeout 180 "$mpiexec" "${mpiflags[@]}" "$npflag" 2 "$exe" train "${tiny[@]}" "$@" >"$out" 2>&1
}
# mpmd OUT "ARGS0" "ARGS1": rank 0 and rank 1 with different extra flags.
mpmd() {
  local out="$1" a0="$2" a1="$3"
  # shellcheck disable=SC2086
  timeout 60 "$mpiexec" "${mpiflags[@]}" "$npflag" 1 "$exe" train "${tiny[@]}" $a0 : \
    "$npflag" 1 "$exe" train "${tiny[@]}" $a1 >"$out" 2>&1
}
# losses LOG FROM: "step loss" of every step >= FROM in a --log file (full precision).
losses() {
  grep '"type":"step"' "$1" | sed -E 's/.*"loss":([^,}]*).*"step":([0-9]+).*/\2 \1/' | awk -v f="$2" '$1 >= f'
}
# same_losses LOG FROM WHAT: ok WHAT when LOG has losses from step FROM on and they equal
# the uninterrupted run's ($work/ref.log) bit for bit; else a failure showing both.
same_losses() {
  local got want
  got="$(losses "$1" "$2")" want="$(losses "$work/ref.log" "$2")"
  if [[ -n $got && $got == "$want" ]]; then ok "$3"
  else bad "$3: losses differ: $(tr '\n' ' ' <<<"$got") vs $(tr '\n' ' ' <<<"$want")"; fi
}
# find_ranks LOG: the pids of this run's rank processes, into the array `ranks` (found by
# LOG, a path unique to this test, in their command line).
find_ranks() {
  ranks=()
  local p
  for p in $(pgrep -x "$(basename "$exe" | cut -c1-15)"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "$1" && ranks+=("$p")
  done
}
expect_in() {  # FILE PATTERN WHAT
  if grep -q -- "$2" "$1"; then ok "$3"; else bad "$3: /$2/ not in output:"; tail -n 20 "$1"; fi
}
flip_byte() {  # FILE OFFSET: xor one byte with 0x40
  local b
  b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 64)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

case "$case" in
kill)
  run2 "$work/ref.out" --steps 6 --log "$work/ref.log" || bad "reference run"
  TAGC_GPT2_INJECT_KILL=4:1 run2 "$work/a.out" --steps 6 --checkpoint-dir "$work/ck" --checkpoint-every 2 \
    && bad "the killed run exited 0"
  expect_in "$work/a.out" "kills itself while writing its checkpoint of step 4" "rank 1 died mid-save"
  [[ -f "$work/ck/step_00000002/MANIFEST.json" ]] && ok "step 2 complete" || bad "step 2 has no manifest"
  [[ ! -f "$work/ck/step_00000004/MANIFEST.json" ]] && ok "step 4 never became visible" || bad "step 4 has a manifest"
  run2 "$work/b.out" --steps 6 --checkpoint-dir "$work/ck" --checkpoint-every 2 --resume "$work/ck" \
    --log "$work/b.log" || { bad "resume after the kill"; cat "$work/b.out"; }
  expect_in "$work/b.out" "resumed at step 2" "resumed from the last complete step"
  same_losses "$work/b.log" 3 "losses of steps 3-6 equal the uninterrupted run's, bit for bit"
  ;;
damage)
  run2 "$work/ref.out" --steps 6 --log "$work/ref.log" || bad "reference run"
  run2 "$work/a.out" --steps 4 --checkpoint-dir "$work/ck" --checkpoint-every 2 || bad "first run"
  f="$work/ck/step_00000004/rank1.ckpt"
  flip_byte "$f" $(($(stat -c %s "$f") / 2))  # inside the parameters
  run2 "$work/b.out" --steps 6 --checkpoint-dir "$work/ck" --checkpoint-every 2 --resume "$work/ck" \
    --log "$work/b.log" || { bad "resume of the damaged directory"; cat "$work/b.out"; }
  expect_in "$work/b.out" "step_00000004/rank1.ckpt.*checksum" "the damaged file is named"
  expect_in "$work/b.out" "falling back to the previous complete step" "fallback announced"
  expect_in "$work/b.out" "resumed at step 2" "resumed at step 2"
  same_losses "$work/b.log" 3 "after the fallback, losses of steps 3-6 equal the uninterrupted run's, bit for bit"
  # a missing file: the newest step is now 6 (written by the resumed run)
  rm -f "$work/ck/step_00000006/rank0.ckpt"
  run2 "$work/c.out" --steps 6 --checkpoint-dir "$work/ck" --checkpoint-every 2 --resume "$work/ck" \
    --log "$work/c.log" || { bad "resume with a missing file"; cat "$work/c.out"; }
  expect_in "$work/c.out" "step_00000006/rank0.ckpt is missing" "the missing file is named"
  expect_in "$work/c.out" "resumed at step 4" "resumed at step 4"
  same_losses "$work/c.log" 5 "losses of steps 5-6 equal the uninterrupted run's"
  ls "$work/ck" | grep -q "^step_00000002$" && bad "more than --keep-checkpoints 2 steps kept" \
    || ok "step 2 pruned (keep 2)"
  # the older layout (D/rank<r>.ckpt, no manifest) still loads, with a note
  mkdir -p "$work/old" && cp "$work/ck/step_00000004/"rank*.ckpt "$work/old/"
  run2 "$work/d.out" --steps 5 --resume "$work/old" || { bad "resume of the older layout"; cat "$work/d.out"; }
  expect_in "$work/d.out" "older layout .*loaded without verification" "the older layout loads, with a note"
  expect_in "$work/d.out" "resumed at step 4" "older layout: resumed at step 4"
  ;;
blowup)
  run2 "$work/a.out" --steps 2 --checkpoint-dir "$work/ck" --checkpoint-every 1 || bad "first run"
  run2 "$work/b.out" --steps 8 --checkpoint-dir "$work/ck" --checkpoint-every 1 --resume "$work/ck" --lr 1e30 \
    && bad "the --lr 1e30 run exited 0"
  expect_in "$work/b.out" "changed since the checkpoint: --lr: 0.001 in the checkpoint, 1e+30 in this run" \
    "the changed --lr is logged"
  expect_in "$work/b.out" "is not finite" "the blow-up is caught"
  [[ -f "$work/ck/step_00000002/MANIFEST.json" ]] && ok "the good step 2 is kept" || bad "step 2 is gone"
  run2 "$work/c.out" --steps 3 --resume "$work/ck/step_00000002" || { bad "resume of the good step"; cat "$work/c.out"; }
  expect_in "$work/c.out" "resumed at step 2" "the good step still resumes (--resume DIR/step_00000002)"
  ;;
agree)
  check_mpmd() {  # WHAT PATTERN "ARGS0" "ARGS1"
    local t0=$SECONDS
    if mpmd "$work/m.out" "$3" "$4"; then bad "$1: exited 0"; return; fi
    local dt=$((SECONDS - t0))
    ((dt <= 30)) && ok "$1: refused in ${dt} s" || bad "$1: took ${dt} s"
    for r in 0 1; do
      grep -q "(rank $r).*$2" "$work/m.out" && ok "$1: rank $r names it" || { bad "$1: rank $r: /$2/"; cat "$work/m.out"; }
    done
  }
  check_mpmd "--steps 3 vs 5" "--steps: '3' on rank 0, '5' on rank 1" "--steps 3" "--steps 5"
  check_mpmd "--checkpoint-every 1 vs 2" "--checkpoint-every: '1' on rank 0, '2' on rank 1" \
    "--steps 2 --checkpoint-dir $work/ck --checkpoint-every 1" "--steps 2 --checkpoint-dir $work/ck --checkpoint-every 2"
  check_mpmd "--compress none on one rank" "--compress: 'all' on rank 0, 'none' on rank 1" \
    "--steps 2 --compress all" "--steps 2 --compress none"
  check_mpmd "--model" "--model: 'd2' on rank 0, 'd4' on rank 1" "--steps 2" "--steps 2 --model d4"
  check_mpmd "--B" "--B: '2' on rank 0, '4' on rank 1" "--steps 2" "--steps 2 --B 4"
  check_mpmd "--seed" "--seed: '1' on rank 0, '2' on rank 1" "--steps 2 --seed 1" "--steps 2 --seed 2"
  check_mpmd "--gather-dtype" "--gather-dtype: 'bf16' on rank 0, 'fp32' on rank 1" "--steps 2 --gather-dtype bf16" "--steps 2"
  # a resumed run against its checkpoint: --sparsity must match
  run2 "$work/a.out" --steps 1 --compress all --checkpoint-dir "$work/ck2" || bad "compressed run"
  run2 "$work/b.out" --steps 2 --compress all --resume "$work/ck2" --sparsity 0.95 && bad "--sparsity change accepted"
  expect_in "$work/b.out" "--sparsity: default in the checkpoint, 0.95 in this run" "--sparsity change refused, named"
  ;;
nan)
  check_nan() {  # WHAT PATTERN INJECT ARGS...
    local what="$1" pat="$2" inj="$3"
    shift 3
    rm -rf "$work/ck"
    if TAGC_GPT2_INJECT_NAN="$inj" run2 "$work/n.out" --steps 3 --checkpoint-dir "$work/ck" --checkpoint-every 1 "$@"; then
      bad "$what: exited 0"
    fi
    for r in 0 1; do
      grep -q "(rank $r).*$pat" "$work/n.out" && ok "$what: rank $r: $pat" || { bad "$what: rank $r: /$pat/"; cat "$work/n.out"; }
    done
    [[ -f "$work/ck/step_00000001/MANIFEST.json" && ! -e "$work/ck/step_00000002" ]] \
      && ok "$what: step 1 saved, nothing of step 2" || { bad "$what: checkpoints"; ls -R "$work/ck"; }
  }
  check_nan "NaN loss" "step 2: the loss is not finite on rank(s) 1" 2:loss:1
  check_nan "NaN gradient, plain path" "step 2: the gradient of unit(s) mlp.0 is not finite" 2:mlp.0:1
  check_nan "NaN gradient, plain suffix of a compressed run" "step 2: the gradient of unit(s) mlp.1 is not finite" \
    2:mlp.1/suffix:0 --compress non-attention
  check_nan "NaN gradient, compressed path" \
    "step 2, mlp.0/prefix (compressed reduce-scatter): non-finite value" 2:mlp.0:1 --compress all
  ;;
watchdog)
  t0=$SECONDS
  TAGC_GPT2_INJECT_STALL=2:1:90 run2 "$work/w.out" --steps 4 --collective-timeout 3 && bad "stalled run exited 0"
  dt=$((SECONDS - t0))
  ((dt <= 30)) && ok "the job ended ${dt} s after start (timeout 3 s)" || bad "the job took ${dt} s"
  expect_in "$work/w.out" "rank(s) 1 did not arrive" "the stalled rank is named"
  expect_in "$work/w.out" "(rank 0).*has not completed" "rank 0 reports the timed-out collective"
  # a real SIGSTOP of rank 1 once the run is past step 2 (its processes: named by this
  # test's unique --log path in their command line)
  run2 "$work/s.out" --steps 100000 --collective-timeout 3 --log "$work/stop.log" &
  launcher=$!
  for _ in $(seq 600); do grep -q '"step":2' "$work/stop.log" 2>/dev/null && break; sleep 0.2; done
  find_ranks "$work/stop.log"
  if ((${#ranks[@]} != 2)); then
    bad "SIGSTOP: expected this run's 2 rank processes, found ${#ranks[@]}"
    kill "$launcher" 2>/dev/null
  else
    kill -STOP "${ranks[1]}"
    t0=$SECONDS
    wait "$launcher" && bad "SIGSTOP: the job exited 0"
    dt=$((SECONDS - t0))
    kill -CONT "${ranks[1]}" 2>/dev/null  # in case it survived (it should not)
    ((dt <= 30)) && ok "SIGSTOP: the job ended ${dt} s after the stop (timeout 3 s)" || bad "SIGSTOP: took ${dt} s"
    expect_in "$work/s.out" "did not arrive" "SIGSTOP: the missing rank is named"
  fi
  ;;
preflight)
  t0=$SECONDS
  timeout 120 "$mpiexec" "${mpiflags[@]}" "$npflag" 2 "$exe" train --model d99 --steps 1 \
    --train-data "$work/data/t_train.bin" --val-data "$work/data/t_val.bin" >"$work/p.out" 2>&1 \
    && bad "--model d99 accepted"
  dt=$((SECONDS - t0))
  expect_in "$work/p.out" "model d99 needs about .* GiB .* available" "--model d99 refused with figures"
  ((dt <= 30)) && ok "refused in ${dt} s" || bad "--model d99 took ${dt} s"
  "$shards" "$work/bad" --bad-token 1234 || exit 1
  tiny+=(--train-data "$work/bad/t_train.bin")
  run2 "$work/t.out" --steps 1 && bad "a token id beyond the vocabulary accepted"
  expect_in "$work/t.out" "t_train.bin: token id 65535 at token offset 1234 (byte 3492)" "the bad token is named"
  ;;
resave)
  run2 "$work/ref.out" --steps 6 --log "$work/ref.log" || bad "reference run"
  # a finished run (its only save is the final step 6), resumed with nothing to train
  run2 "$work/a.out" --steps 6 --checkpoint-dir "$work/ck" || bad "first run"
  cp -r "$work/ck/step_00000006" "$work/step6.copy"
  TAGC_GPT2_INJECT_KILL=6:1 run2 "$work/b.out" --steps 6 --checkpoint-dir "$work/ck" --resume "$work/ck"
  [[ -f "$work/ck/step_00000006/MANIFEST.json" ]] && ok "the finished step 6 is still complete" \
    || { bad "step 6 lost by its re-save"; ls -R "$work/ck"; cat "$work/b.out"; }
  diff -r "$work/ck/step_00000006" "$work/step6.copy" >/dev/null && ok "the finished step 6 is unchanged" \
    || bad "the finished step 6 changed"
  expect_in "$work/b.out" "checkpoint is at step 6 = --steps: nothing to train" "the no-op resume says so"
  # a resume from an earlier step re-saves a step that is complete: killed in that save
  run2 "$work/d.out" --steps 6 --checkpoint-dir "$work/ck2" --checkpoint-every 2 --keep-checkpoints 3 || bad "second run"
  TAGC_GPT2_INJECT_KILL=4:1 run2 "$work/e.out" --steps 6 --checkpoint-dir "$work/ck2" --checkpoint-every 2 \
    --keep-checkpoints 3 --resume "$work/ck2/step_00000002" && bad "the killed re-save exited 0"
  expect_in "$work/e.out" "kills itself while writing its checkpoint of step 4" "rank 1 died re-saving step 4"
  [[ -f "$work/ck2/step_00000004/MANIFEST.json" ]] && ok "the complete step 4 survived the killed re-save" \
    || { bad "step 4 lost by the killed re-save"; ls -R "$work/ck2"; }
  run2 "$work/f.out" --steps 6 --resume "$work/ck2/step_00000004" --log "$work/f.log" \
    || { bad "resume after the killed re-save"; cat "$work/f.out"; }
  expect_in "$work/f.out" "resumed at step 4" "resumed at the surviving step 4"
  same_losses "$work/f.log" 5 "after the killed re-save, losses of steps 5-6 equal the uninterrupted run's"
  ;;
tworuns)
  run2 "$work/a.out" --steps 100000 --checkpoint-dir "$work/ck" --checkpoint-every 2 --log "$work/a.log" &
  launcher=$!
  for _ in $(seq 600); do [[ -f "$work/ck/step_00000002/MANIFEST.json" ]] && break; sleep 0.2; done
  t0=$SECONDS
  run2 "$work/b.out" --steps 4 --checkpoint-dir "$work/ck" --checkpoint-every 2 && bad "a second run on the directory ran"
  dt=$((SECONDS - t0))
  ((dt <= 30)) && ok "the second run was refused in ${dt} s" || bad "the second run took ${dt} s"
  for r in 0 1; do
    grep -q "(rank $r).*is in use by another run (run [0-9a-f]*, pid [0-9]* on host" "$work/b.out" \
      && ok "rank $r names the holder" || { bad "rank $r: holder not named"; cat "$work/b.out"; }
  done
  kill -0 "$launcher" 2>/dev/null && ok "the first run is unaffected" || bad "the first run ended"
  # the first run dies without cleaning up (kill -9 of its ranks): its lock is stale
  find_ranks "$work/a.log"
  ((${#ranks[@]} == 2)) || bad "expected the first run's 2 rank processes, found ${#ranks[@]}"
  kill -9 "${ranks[@]}" 2>/dev/null
  wait "$launcher"
  [[ -f "$work/ck/LOCK" ]] && ok "a kill -9 leaves the lock" || bad "no lock left behind"
  n=$(ls "$work/ck" | grep -E '^step_[0-9]+$' | sort | tail -1 | sed 's/step_0*//')  # the killed run's newest step
  run2 "$work/c.out" --steps $((n + 2)) --checkpoint-dir "$work/ck" --checkpoint-every 2 --resume "$work/ck" \
    || { bad "resume after the kill"; cat "$work/c.out"; }
  expect_in "$work/c.out" "stale lock of pid" "the stale lock is named and replaced"
  [[ ! -e "$work/ck/LOCK" ]] && ok "the lock is released at the end" || bad "the lock outlived its run"
  # a fresh run (a new run id) into the directory of another run: refused, nothing touched
  before=$(ls "$work/ck" | tr '\n' ' ')
  run2 "$work/d.out" --steps 2 --checkpoint-dir "$work/ck" --checkpoint-every 1 && bad "a fresh run took another run's directory"
  expect_in "$work/d.out" "holds step_.* of another run" "a fresh run refuses another run's steps"
  [[ "$(ls "$work/ck" | tr '\n' ' ')" == "$before" ]] && ok "the directory is untouched" || bad "the directory changed"
  # a newer step of this run is never pruned by a save of an older one
  run2 "$work/e.out" --steps $((n + 1)) --checkpoint-dir "$work/ck" --checkpoint-every 1 \
    --resume "$work/ck/$(printf 'step_%08d' "$n")" || { bad "resume from the older step"; cat "$work/e.out"; }
  [[ -f "$work/ck/$(printf 'step_%08d' $((n + 1)))/MANIFEST.json" ]] && ok "step $((n + 1)) saved" || bad "step $((n + 1)) missing"
  [[ -f "$work/ck/$(printf 'step_%08d' $((n + 2)))/MANIFEST.json" ]] && ok "the newer step $((n + 2)) was kept" \
    || { bad "the newer step $((n + 2)) was removed"; ls "$work/ck"; }
  ;;
diverge)
  run2 "$work/a.out" --steps 2 --checkpoint-dir "$work/ck" --checkpoint-every 1 || bad "first run"
  run2 "$work/b.out" --steps 8 --checkpoint-dir "$work/ck" --checkpoint-every 1 --resume "$work/ck" --lr 1e4 \
    || { bad "the --lr 1e4 run failed"; cat "$work/b.out"; }
  expect_in "$work/b.out" "not saved (divergence guard" "unhealthy steps are not saved"
  [[ -f "$work/ck/step_00000001/MANIFEST.json" && -f "$work/ck/step_00000002/MANIFEST.json" ]] \
    && ok "the good steps 1 and 2 are kept" || { bad "good steps pruned"; ls "$work/ck"; }
  ls "$work/ck" | grep -qE '^step_0000000[3-8]$' && bad "an unhealthy step was saved" || ok "no unhealthy step saved"
  run2 "$work/c.out" --steps 3 --resume "$work/ck" || { bad "resume"; cat "$work/c.out"; }
  expect_in "$work/c.out" "resumed at step 2" "--resume takes the newest healthy step"
  t0=$SECONDS
  run2 "$work/d.out" --steps 8 --checkpoint-dir "$work/ck" --checkpoint-every 1 --resume "$work/ck" --lr 1e4 \
    --guard-rewind 2 && bad "the rewinding run exited 0"
  expect_in "$work/d.out" "rewound to step 2 (rewind 2 of 2)" "--guard-rewind rewinds to the healthy step"
  expect_in "$work/d.out" "still unhealthy after 2 rewind" "--guard-rewind gives up, named"
  [[ -f "$work/ck/step_00000002/MANIFEST.json" ]] && ok "step 2 still there" || bad "step 2 gone"
  ;;
foreign)
  run2 "$work/ref.out" --steps 8 --seed 1 --schedule constant --log "$work/ref.log" || bad "reference run"
  run2 "$work/a.out" --steps 4 --seed 1 --schedule constant --checkpoint-dir "$work/ck" --checkpoint-every 2 || bad "run A"
  run2 "$work/b.out" --steps 6 --seed 2 --schedule constant --checkpoint-dir "$work/ckb" --checkpoint-every 2 || bad "run B"
  cp -r "$work/ckb/step_00000006" "$work/ck/"
  run2 "$work/c.out" --steps 8 --seed 1 --schedule constant --checkpoint-dir "$work/ck" --checkpoint-every 2 --resume "$work/ck" \
    --log "$work/c.log" || { bad "resume with a foreign step"; cat "$work/c.out"; }
  expect_in "$work/c.out" "step_00000006 (run [0-9a-f]*) is another run's" "the foreign step is named and skipped"
  expect_in "$work/c.out" "resumed at step 4" "resumed at this run's step 4"
  same_losses "$work/c.log" 5 "losses of steps 5-8 equal this run's uninterrupted ones"
  ls "$work/ck" | grep -q '^step_00000006\.run-' && ok "the foreign step is kept aside, not removed" \
    || { bad "the foreign step is gone"; ls "$work/ck"; }
  [[ -f "$work/ck/step_00000008/MANIFEST.json" ]] && ok "this run's step 8 saved" || bad "step 8 missing"
  ;;
savemodel)
  run2 "$work/a.out" --steps 2 --save-model "$work/m.bin" || bad "first run"
  cp "$work/m.bin" "$work/m0.bin"
  TAGC_GPT2_INJECT_KILL_MODEL=1 run2 "$work/b.out" --steps 3 --save-model "$work/m.bin" && bad "the killed run exited 0"
  expect_in "$work/b.out" "kills itself while writing --save-model" "rank 0 died writing the model"
  cmp -s "$work/m.bin" "$work/m0.bin" && ok "the previous model file is intact" || bad "the model file was damaged"
  run2 "$work/c.out" --steps 3 --save-model "$work/m.bin" || bad "the model run"
  cmp -s "$work/m.bin" "$work/m0.bin" && bad "the new model was not written" || ok "the new model replaced it"
  ls "$work" | grep -q 'm.bin.tmp' && bad "a .tmp file is left" || ok "no .tmp left"
  ;;
startup)
  touch "$work/afile"
  check_startup() {  # WHAT PATTERN ARGS...
    local what="$1" pat="$2" t0=$SECONDS
    shift 2
    run2 "$work/s.out" --steps 3 --collective-timeout 60 "$@" && bad "$what: exited 0"
    local dt=$((SECONDS - t0))
    ((dt <= 20)) && ok "$what: every rank ended in ${dt} s" || bad "$what: took ${dt} s"
    for r in 0 1; do
      grep -q "(rank $r).*$pat" "$work/s.out" && ok "$what: rank $r prints it" || { bad "$what: rank $r: /$pat/"; cat "$work/s.out"; }
    done
  }
  check_startup "--log in a missing directory" "cannot open --log $work/nodir/x.jsonl" --log "$work/nodir/x.jsonl"
  check_startup "--save-model in a missing directory" "--save-model $work/nodir/m.bin cannot be written" \
    --save-model "$work/nodir/m.bin"
  check_startup "--checkpoint-dir under a file" "--checkpoint-dir: cannot create $work/afile/ck" \
    --checkpoint-dir "$work/afile/ck"
  ;;
sigterm)
  run2 "$work/ref.out" --steps 30 --log "$work/ref.log" || bad "reference run"
  run2 "$work/a.out" --steps 30 --checkpoint-dir "$work/ck" --log "$work/a.log" &
  launcher=$!
  for _ in $(seq 600); do grep -q '"step":3,' "$work/a.log" 2>/dev/null && break; sleep 0.1; done
  find_ranks "$work/a.log"
  ((${#ranks[@]} == 2)) || bad "expected 2 rank processes, found ${#ranks[@]}"
  kill -TERM "${ranks[1]}"  # one rank only: the ranks agree on it
  wait "$launcher"
  rc=$?
  ((rc != 0)) && ok "the stopped job exits non-zero ($rc)" || bad "the stopped job exited 0"
  expect_in "$work/a.out" "Exit code: *75" "the stopped rank exits 75"
  expect_in "$work/a.out" "stopped by a signal (SIGTERM or SIGINT) after step [0-9]*: checkpoint .* saved" "the stop is reported with its checkpoint"
  s=$(grep -o "stopped by a signal (SIGTERM or SIGINT) after step [0-9]*" "$work/a.out" | head -1 | grep -o "[0-9]*$")
  [[ -n "$s" && -f "$work/ck/$(printf 'step_%08d' "$s")/MANIFEST.json" ]] && ok "step $s saved on the signal" \
    || { bad "no checkpoint of the stopped step"; ls "$work/ck"; }
  run2 "$work/b.out" --steps 30 --checkpoint-dir "$work/ck" --resume "$work/ck" --log "$work/b.log" \
    || { bad "resume after SIGTERM"; tail "$work/b.out"; }
  same_losses "$work/b.log" $((s + 1)) "the resumed run continues bit for bit (steps $((s + 1))-30)"
  # a second signal: at once (rank 1 is held before step 3, so the first cannot finish a step)
  TAGC_GPT2_INJECT_STALL=3:1:60 run2 "$work/c.out" --steps 30 --log "$work/c.log" &
  launcher=$!
  for _ in $(seq 600); do grep -q '"step":2,' "$work/c.log" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  find_ranks "$work/c.log"
  t0=$SECONDS
  kill -TERM "${ranks[1]}"
  sleep 0.5
  kill -TERM "${ranks[1]}"
  wait "$launcher" && bad "twice signalled job exited 0"
  dt=$((SECONDS - t0))
  ((dt <= 20)) && ok "a second signal ends the job at once (${dt} s)" || bad "the second signal took ${dt} s"
  expect_in "$work/c.out" "second stop signal: exiting now" "the second signal is announced"
  ;;
weak)
  run2 "$work/a.out" --steps 4 --checkpoint-dir "$work/ck" --checkpoint-every 2 || bad "first run"
  # 7: a changed value in the newest manifest is damage: fallback to step 2
  sed -i 's/"--B": "2"/"--B": "3"/; s/"B": "2"/"B": "3"/' "$work/ck/step_00000004/MANIFEST.json"
  grep -q '"3"' "$work/ck/step_00000004/MANIFEST.json" || bad "the manifest was not changed (its format?)"
  run2 "$work/b.out" --steps 4 --resume "$work/ck" || { bad "resume with a damaged manifest"; cat "$work/b.out"; }
  expect_in "$work/b.out" "MANIFEST.json fails its checksum" "the damaged manifest is named"
  expect_in "$work/b.out" "resumed at step 2" "fallback to the intact step 2"
  # 9: --resume naming a file
  run2 "$work/c.out" --steps 4 --resume "$work/ck/step_00000002/rank0.ckpt" && bad "--resume FILE accepted"
  expect_in "$work/c.out" "rank0.ckpt is a file: --resume takes a checkpoint directory" "--resume FILE explained"
  # 10: --sparsity 1 and --clip 0 refused like their neighbours
  "$exe" train --sparsity 1.0 >"$work/d.out" 2>&1; rc=$?
  ((rc == 2)) && ok "--sparsity 1.0 refused (exit 2)" || bad "--sparsity 1.0: exit $rc"
  expect_in "$work/d.out" "sparsity: expected a value in \[0, 1), got 1.0" "--sparsity 1.0 named"
  "$exe" train --clip 0 >"$work/e.out" 2>&1; rc=$?
  ((rc == 2)) && ok "--clip 0 refused (exit 2)" || bad "--clip 0: exit $rc"
  expect_in "$work/e.out" "clip: expected a norm > 0, or 'none'" "--clip 0 says what --clip -1 says"
  # 11: --steps below the checkpoint; --val-batches beyond the validation data
  run2 "$work/f.out" --steps 1 --resume "$work/ck/step_00000002" && bad "--steps below the checkpoint exited 0"
  expect_in "$work/f.out" "--steps 1 is below the checkpoint's step 2: nothing to train" "--steps below the step named"
  run2 "$work/g.out" --steps 1 --val-batches 100000 || { bad "--val-batches 100000"; cat "$work/g.out"; }
  expect_in "$work/g.out" "--val-batches 100000: the validation data holds [0-9]* global batch(es).*using" "--val-batches capped"
  ;;
*)
  echo "unknown case $case"
  exit 2
  ;;
esac
exit $fail
