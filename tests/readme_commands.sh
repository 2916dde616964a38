#!/usr/bin/env bash
# readme_commands.sh REPO [TAGC_GPT2 MAKE_TEST_SHARDS] -- the README's commands and the demo's
# flags stay valid (beside tests/readme_in_sync.cmake, which holds the C++ example).
#   1. Every command line in the README's ```sh blocks that runs a script of the repository
#      (scripts/..., bench/..., also after sudo or VAR=value): the script exists, is
#      executable, and names every --flag the line gives it (its usage text or its parser).
#   2. scripts/demo.sh --help exits 0; --print-commands (default and --quick) prints the two
#      trainer command lines, the second one TAGC's.
#   3. With TAGC_GPT2 and MAKE_TEST_SHARDS: each of those four command lines runs for 3 steps
#      on a tiny model (the shape, data, steps and validation overridden at the end of the
#      line, last flag wins), exits 0, and logs what it was asked for: 3 steps, a TAGC run
#      with packed bf16 values, the baseline with none. A renamed or removed trainer flag, a
#      value the trainer refuses or a policy combination missing from the catalogue fails it.
# Cost: a few seconds (four 3-step runs of a 3.3M-parameter model on one rank).
set -u
repo="$1"
exe="${2:-}"
shards="${3:-}"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$repo" || exit 1

# ---- 1. the README's shell blocks
in_sh=0 n=0
while IFS= read -r line; do
  if [[ $line =~ ^\`\`\`(sh|bash)$ ]]; then in_sh=1; continue; fi
  if [[ $line == '```' ]]; then in_sh=0; continue; fi
  ((in_sh)) || continue
  cmd="${line%%#*}"                                 # drop the comment
  read -r -a words <<<"$cmd"
  # skip sudo and VAR=value prefixes
  i=0
  while ((i < ${#words[@]})) && [[ ${words[i]} == sudo || ${words[i]} =~ ^[A-Z_]+= ]]; do i=$((i + 1)); done
  ((i < ${#words[@]})) || continue
  script="${words[i]}"
  [[ $script == scripts/* || $script == bench/* ]] || continue
  n=$((n + 1))
  if [[ ! -f $script ]]; then bad "README runs $script, which does not exist"; continue; fi
  [[ -x $script ]] || bad "README runs $script, which is not executable"
  for w in "${words[@]:i+1}"; do
    [[ $w == --* ]] || continue
    flag="${w%%=*}"
    grep -q -- "$flag" "$script" || bad "README runs $script $flag, which $script does not mention"
  done
  echo "ok: README command: ${words[*]:i}"
done <README.md
((n >= 2)) || bad "found $n script commands in README.md's sh blocks (expected at least scripts/demo.sh and scripts/test.sh)"
grep -q '^scripts/demo.sh' README.md || bad "README.md has no line starting with scripts/demo.sh"
grep -q '^scripts/test.sh' README.md || bad "README.md has no line starting with scripts/test.sh"

# ---- 2. the demo's own interface
bash scripts/demo.sh --help >/dev/null || bad "scripts/demo.sh --help exits nonzero"
bash scripts/demo.sh --bogus >/dev/null 2>&1 && bad "scripts/demo.sh accepts an unknown argument"
lines=()
for mode in default --quick; do
  args=(--print-commands); [[ $mode == --quick ]] && args+=(--quick)
  out="$(bash scripts/demo.sh "${args[@]}")" || { bad "scripts/demo.sh ${args[*]} exits nonzero"; continue; }
  mapfile -t l <<<"$out"
  if ((${#l[@]} != 2)); then bad "scripts/demo.sh ${args[*]} printed ${#l[@]} lines, expected 2"; continue; fi
  [[ ${l[0]} == train\ * && ${l[0]} == *"--compress none"* ]] || bad "demo ($mode): the first run is not the uncompressed baseline: ${l[0]}"
  [[ ${l[1]} == train\ * && ${l[1]} == *"--compress non-attention"* ]] || bad "demo ($mode): the second run is not TAGC: ${l[1]}"
  lines+=("${l[@]}")
done
echo "ok: scripts/demo.sh --help, --print-commands (${#lines[@]} trainer command lines)"

# ---- 3. the demo's command lines, run
[[ -n $exe && -n $shards ]] || exit $fail
work="$(mktemp -d "${TMPDIR:-/tmp}/tagc_readme_XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$shards" "$work/data" >/dev/null || { bad "$shards"; exit 1; }
tiny=(--L 2 --C 64 --NH 2 --maxT 64 --T 32 --B 2 --steps 3 --val-every 3 --val-batches 1 --print-every 1
      --train-data "$work/data/t_train.bin" --val-data "$work/data/t_val.bin")
k=0
for l in "${lines[@]}"; do
  k=$((k + 1))
  read -r -a a <<<"$l"
  if ! timeout 120 "$exe" "${a[@]}" "${tiny[@]}" --log "$work/$k.jsonl" >"$work/$k.out" 2>&1; then
    bad "the demo's trainer line fails: tagc-gpt2 $l"; cat "$work/$k.out"; continue
  fi
  if python3 - "$work/$k.jsonl" "$l" <<'PY'
import json, sys
rec = [json.loads(x) for x in open(sys.argv[1])]
run = next(r for r in rec if r["type"] == "run")
steps = [r for r in rec if r["type"] == "step"]
tagc = "--compress non-attention" in sys.argv[2]
ok = len(steps) == 3 and run["compress"] == ("non-attention" if tagc else "none")
if tagc:  # what the demo promises: packed bf16 over the exact index, a sparsity warm-up from dense
    ok = ok and run.get("values") == "packed-bf16" and run.get("index_bits") == "exact" \
        and run.get("sparsity_warmup", 0) > 0 and run.get("sparsity_start") == 0.0 \
        and all("compression" in s for s in steps)
sys.exit(0 if ok else 1)
PY
  then
    echo "ok: demo line $k runs (3 steps, tiny model): tagc-gpt2 $l"
  else
    bad "demo line $k ran but its log is not what the line asks for: $(head -c 400 "$work/$k.jsonl")"
  fi
done
exit $fail
