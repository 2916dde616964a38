#!/usr/bin/env bash
# `pip install --no-build-isolation .` builds tagc against the installed torch (ctest
# tagc_python_pip, in scripts/torch_root.sh's root). Into a fresh venv that sees the
# system's torch, from a copy of what the package needs (the build writes next to
# setup.py), with --no-index (nothing may be fetched); then, from another directory,
# import tagc.torch from the venv and run the FSDP2 tests against that build.
set -euo pipefail
unset PYTHONPATH  # ctest sets it to the CMake build: the venv must import its own install
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
cp -r "$repo/include" "$repo/python" "$repo/setup.py" "$repo/pyproject.toml" "$work/src/"
rm -rf "$work/src/python/tests"
python3 -m venv --system-site-packages "$work/venv"
t=$(date +%s)
"$work/venv/bin/pip" install -q --no-build-isolation --no-index "$work/src"
echo "pip install: $(($(date +%s) - t)) s"
cd "$work"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import sys
import tagc, tagc.torch, torch
where = tagc.__file__
assert where.startswith(sys.argv[1]), "tagc imported from %s, not the venv" % where
assert "packed" in tagc.torch.catalogue(), tagc.torch.catalogue()
print("PASS  import tagc.torch from the pip install (%s), torch %s" % (where, torch.__version__))
PY
# The installed package against a real FSDP2 (the harness from the sources' tests).
PYTHONPATH="$repo/python/tests" "$work/venv/bin/python" "$repo/python/tests/test_fsdp2.py"
