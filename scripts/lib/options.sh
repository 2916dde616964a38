# scripts/lib/options.sh -- sourced (not run) by the bench scripts that take `--name value`
# options (bench/e2e/{run,long,scale}.sh, bench/run_collectives.sh, bench/torch/{run,fsdp2_run}.sh,
# bench/llmc_side_by_side.sh): their option loop, written once, so every script refuses a
# mistyped option or a missing value the same way.
#
#   parse_options SCRIPT [--option VAR | --option VAR=VALUE]... -- ARG...
#       Reads ARG... against the table before `--`: `--option VAR` takes a value into VAR,
#       `--option VAR=VALUE` is a switch that sets VAR to VALUE. -h/--help prints the
#       script's usage (its function `usage` where it has one, else its opening comment)
#       and exits 0. A bare `--` among the ARGs ends the options: what follows it is left
#       in the array options_rest (passed on to a program). An unknown option, or one
#       without its value, is refused naming SCRIPT and the option, exit status 2.
#
#   Example: parse_options scale.sh --steps STEPS --no-flat FLAT=0 -- "$@"

parse_options() {
  local _script=$1 _opt _var
  local -A _takes=() _sets=()
  shift
  while [[ $# -gt 0 && $1 != -- ]]; do
    [[ $# -ge 2 ]] || { echo "parse_options: $1 has no variable" >&2; exit 2; }
    if [[ $2 == *=* ]]; then _sets[$1]=$2; else _takes[$1]=$2; fi
    shift 2
  done
  shift  # the `--` between the table and the arguments
  options_rest=()
  while [[ $# -gt 0 ]]; do
    _opt=$1
    if [[ -n ${_takes[$_opt]:-} ]]; then
      [[ $# -ge 2 ]] || { echo "$_script: $_opt needs a value (see --help)" >&2; exit 2; }
      printf -v "${_takes[$_opt]}" '%s' "$2"
      shift 2
    elif [[ -n ${_sets[$_opt]:-} ]]; then
      _var=${_sets[$_opt]}
      printf -v "${_var%%=*}" '%s' "${_var#*=}"
      shift
    elif [[ $_opt == -h || $_opt == --help ]]; then
      if declare -F usage >/dev/null; then usage; else awk 'NR > 1 { if (!/^#/) exit; print }' "$0"; fi
      exit 0
    elif [[ $_opt == -- ]]; then
      shift
      options_rest=("$@")
      return 0
    else
      echo "$_script: unknown argument $_opt (see --help)" >&2
      exit 2
    fi
  done
}
