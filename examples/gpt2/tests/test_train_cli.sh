#!/usr/bin/env bash
# test_train_cli.sh TAGC_GPT2 [MAKE_TEST_SHARDS [TOKENIZER_DIR]] -- command-line errors of
# tagc-gpt2: each bad input must give a message naming the problem and a nonzero exit
# code (2: usage, 1: runtime). With MAKE_TEST_SHARDS (gpt2_make_test_shards), also short
# 1-rank runs of the tiny model: --val-every's step-0 validation, --init-from's model
# shape, `eval` of the saved model (= the trainer's own val loss); with TOKENIZER_DIR
# (data/gpt2, scripts/fetch_data.sh), `sample` of it.
set -u
exe="$1"
shards="${2:-}"
tokenizer="${3:-}"
fail=0
# expect CODE PATTERN -- ARGS...: run, compare exit code and stderr.
expect() {
  local code="$1" pattern="$2"
  shift 3
  local out rc
  out="$("$exe" "$@" 2>&1 >/dev/null)"
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: tagc-gpt2 $* -> exit $rc (want $code), stderr: $out (want /$pattern/)"
    fail=1
  else
    echo "ok: tagc-gpt2 $* -> $code: $(head -n1 <<<"$out")"
  fi
}
expect 2 "missing command" --
expect 2 "unknown command 'fly'" -- fly
expect 2 "unknown flag --bogus" -- train --bogus 1
expect 2 "expected 2|4|10" -- train --ratio 3
expect 2 "expected 1|4|exact" -- train --index-bits 2
expect 2 "expected sketch|sketch-bf16|sketch-fp16|packed|packed-bf16" -- train --values fp8
expect 2 "no reducer 'values=sketch-bf16 ratio=10 index=4" -- train --values sketch-bf16 --index-bits 4
expect 2 "ratio=4 (they have 10)" -- train --values sketch-fp16 --index-bits 1 --ratio 4
expect 2 "expected all-reduce|reduce-scatter" -- train --index-exchange gather
expect 2 "expected float|bf16" -- train --residual fp8
# policy combinations that are not in the reducer catalogue: refused before any rank
# starts, naming the fields the closest built reducers differ in, with the list
expect 2 "needs an index exact at any world size (index=exact)" -- train --index-exchange reduce-scatter
expect 2 "the catalogue has: values=sketch ratio=2" -- train --index-exchange reduce-scatter --index-bits 4
expect 2 "exchange=all-reduce (they have reduce-scatter)" -- train --index-bits exact
expect 2 "ratio=2 (they have 4|10)" -- train --index-bits exact --index-exchange reduce-scatter --ratio 2
expect 2 "decoder=peel (they have peel-estimate)" -- train --index-bits exact --index-exchange reduce-scatter --decoder peel
expect 2 "index=1 (they have exact|shared|pooled|gathered|routed)" -- train --values packed --index-bits 1
expect 2 "need the whole reduced index" -- train --values packed-bf16 --index-bits exact --index-exchange reduce-scatter
expect 2 "packed values have no sketch" -- train --values packed --index-bits exact --adaptive
expect 2 "expected a number" -- train --B four
expect 2 "missing value" -- train --steps
expect 2 "expected fp32|bf16" -- train --baseline-dtype fp16
expect 2 "--gather-dtype: expected fp32|bf16|int8" -- train --gather-dtype fp16
expect 2 "expected non-attention|all|none|auto" -- train --compress some
expect 2 "link-mbps: expected a bandwidth > 0" -- train --compress auto --link-mbps 0
expect 2 "link-latency-us: expected a latency >= 0" -- train --compress auto --link-latency-us -5
# optimizer values out of range (issue 14)
expect 2 "--lr: expected a learning rate >= 0, got -1" -- train --lr -1
expect 2 "--beta1: expected a value in \[0, 1), got 2" -- train --beta1 2
expect 2 "--eps: expected a value > 0, got -1" -- train --eps -1
expect 2 "--clip: expected a norm > 0, or 'none', got -1" -- train --clip -1
expect 2 "--collective-timeout: expected seconds" -- train --collective-timeout 0
expect 2 "--keep-checkpoints: must be >= 1" -- train --keep-checkpoints 0
expect 1 "divisible" -- train --C 100 --NH 3
expect 1 "max_seq_len" -- train --T 2048
expect 1 "missing_dir" -- train --train-data /nonexistent/missing_dir --steps 1
expect 1 "model-file is required" -- eval
expect 1 "model-file is required" -- sample
"$exe" help >/dev/null || { echo "FAIL: help"; fail=1; }
# <command> --help: that command's flags only, exit 0, whatever else is on the line
help_has() {  # help_has COMMAND PRESENT ABSENT
  local out
  out="$("$exe" "$1" --ratio 3 --help)" || { echo "FAIL: $1 --help exits nonzero"; fail=1; return; }
  if ! grep -q -- "$2" <<<"$out" || grep -q -- "$3" <<<"$out"; then
    echo "FAIL: $1 --help should list $2 and not $3: $out"; fail=1
  else
    echo "ok: $1 --help lists $2, not $3"
  fi
}
help_has train "--index-bits" "--prompt"
help_has train "--gather-dtype V.*(fp32)" "--prompt"
help_has sample "--prompt" "--index-bits"
help_has eval "--model-file" "--corpus"
help_has prepare "--corpus" "--top-k"
"$exe" help | grep -q "^sample: " || { echo "FAIL: help does not group the flags by command"; fail=1; }

[[ -n $shards ]] || exit $fail
work="$(mktemp -d "${TMPDIR:-/tmp}/tagc_cli_XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$shards" "$work/data" >/dev/null || { echo "FAIL: $shards"; exit 1; }
data=(--train-data "$work/data/t_train.bin" --val-data "$work/data/t_val.bin" --T 32 --B 2 --lr 1e-3
      --compress none --val-batches 1 --print-every 1)
shape=(--model d2 --L 2 --C 64 --NH 2 --maxT 64)
# train1 NAME ARGS...: one rank, no launcher (MPI singleton); output in $work/NAME.out
train1() {
  local name="$1"
  shift
  timeout 120 "$exe" train "${data[@]}" "$@" >"$work/$name.out" 2>&1
}
# lines LOG TYPE: "step value" of each line of TYPE (step: loss, val: val_loss), full precision
lines() {
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d.get("type") == sys.argv[2]: print(d["step"], repr(d["loss" if sys.argv[2] == "step" else "val_loss"]))' "$1" "$2"
}
# --val-every: a val line at step 0 (before the first step, as llm.c), then every K steps
# and at the end; validating does not change the training losses
train1 plain "${shape[@]}" --steps 4 --log "$work/plain.jsonl" --save-model "$work/tiny.bin" || { echo "FAIL: tiny run"; cat "$work/plain.out"; fail=1; }
train1 val "${shape[@]}" --steps 4 --val-every 2 --log "$work/val.jsonl" || { echo "FAIL: --val-every run"; cat "$work/val.out"; fail=1; }
if [[ "$(lines "$work/val.jsonl" val | cut -d' ' -f1 | tr '\n' ' ')" != "0 2 4 " ]]; then
  echo "FAIL: --val-every 2 --steps 4 should validate at steps 0 2 4: $(lines "$work/val.jsonl" val)"; fail=1
elif [[ "$(lines "$work/val.jsonl" step)" != "$(lines "$work/plain.jsonl" step)" ]]; then
  echo "FAIL: validating changed the step losses"; fail=1
else
  echo "ok: --val-every 2 validates at steps 0 2 4, step losses unchanged"
fi
# --gather-dtype bf16: named in the run line and the log's run record; it changes the losses
if train1 g16 "${shape[@]}" --steps 4 --gather-dtype bf16 --log "$work/g16.jsonl" &&
   grep -q "gather-dtype=bf16" "$work/g16.out" && grep -q '"gather_dtype":"bf16"' "$work/g16.jsonl" &&
   [[ -n "$(lines "$work/g16.jsonl" step)" && "$(lines "$work/g16.jsonl" step)" != "$(lines "$work/plain.jsonl" step)" ]]; then
  echo "ok: --gather-dtype bf16 is in the run line and the log, and its losses are its own"
else
  echo "FAIL: --gather-dtype bf16 run: $(cat "$work/g16.out")"; fail=1
fi
# eval computes with the trainers' model (DeviceModel<exec::host>): on the batch the run
# validated on (same B, T, first val batch), the saved model's loss is the run's last
# val loss (eval prints 6 decimals)
eval_out="$(timeout 60 "$exe" eval --model-file "$work/tiny.bin" --data "$work/data/t_val.bin" --B 2 --T 32 --val-batches 1 2>&1)"
if python3 - "$eval_out" "$(lines "$work/plain.jsonl" val | tail -n1 | cut -d' ' -f2)" <<'PY'
import re, sys
m = re.search(r"loss (\S+) over 1 batches of 2x32 tokens", sys.argv[1])
sys.exit(0 if m and sys.argv[2] and abs(float(m.group(1)) - float(sys.argv[2])) <= 1.5e-6 else 1)
PY
then
  echo "ok: eval of the saved model = the run's last val loss ($eval_out)"
else
  echo "FAIL: eval of the saved model: '$eval_out', the run's last val loss: $(lines "$work/plain.jsonl" val | tail -n1)"; fail=1
fi
# sample: the prompt, then --tokens tokens; greedy (--top-k 0) ignores the seed, top-k
# sampling repeats itself for one seed
if [[ -n $tokenizer ]]; then
  smp() { timeout 60 "$exe" sample --model-file "$work/tiny.bin" --tokenizer "$tokenizer" --prompt "The Congress" --tokens 8 "$@"; }
  if [[ ! -f $tokenizer/encoder.json ]]; then
    echo "FAIL: no tokenizer in $tokenizer (run scripts/fetch_data.sh)"; fail=1
  elif g1="$(smp --top-k 0 --seed 1)" && g2="$(smp --top-k 0 --seed 2)" && k1="$(smp --top-k 40 --seed 3)" &&
       k2="$(smp --top-k 40 --seed 3)" && [[ $g1 == "The Congress"?* && $g1 == "$g2" && $k1 == "The Congress"?* && $k1 == "$k2" ]]; then
    echo "ok: sample greedy: '$g1', top-k 40: '$k1'"
  else
    echo "FAIL: sample: greedy '${g1:-}' / '${g2:-}', top-k 40 seed 3 '${k1:-}' / '${k2:-}'"; fail=1
  fi
fi
grep -q "step 0: val loss" "$work/val.out" || { echo "FAIL: no 'step 0: val loss' line: $(cat "$work/val.out")"; fail=1; }
# --init-from: the model shape is the checkpoint's (L=2 C=64 NH=2 maxT=64 here, not d2's)
if train1 init --init-from "$work/tiny.bin" --steps 1 --log "$work/init.jsonl" --checkpoint-dir "$work/ck" &&
   grep -q '"L":2' "$work/init.jsonl" && grep -q '"C":64' "$work/init.jsonl"; then
  echo "ok: --init-from takes L=2 C=64 NH=2 maxT=64 from the checkpoint"
else
  echo "FAIL: --init-from without --model: $(cat "$work/init.out")"; fail=1
fi
# the same command line resumes (the shape is the --init-from file's again)
train1 init_resume --init-from "$work/tiny.bin" --steps 2 --checkpoint-dir "$work/ck" --resume "$work/ck" ||
  { echo "FAIL: --resume of an --init-from run: $(cat "$work/init_resume.out")"; fail=1; }
# the same shape given explicitly is accepted; another one refused, naming both shapes
train1 init_same "${shape[@]}" --init-from "$work/tiny.bin" --steps 1 || { echo "FAIL: --init-from with its own shape: $(cat "$work/init_same.out")"; fail=1; }
if train1 init_other --model d2 --init-from "$work/tiny.bin" --steps 1; then
  echo "FAIL: --model d2 with a L=2 C=64 maxT=64 checkpoint should be refused"; fail=1
elif ! grep -q "holds a model of L=2 C=64 NH=2 maxT=64.*leave out --model" "$work/init_other.out"; then
  echo "FAIL: --model d2 refusal message: $(cat "$work/init_other.out")"; fail=1
else
  echo "ok: --init-from refuses --model d2 naming both shapes"
fi
exit $fail
