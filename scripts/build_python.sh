#!/usr/bin/env bash
# Builds the Python package tagc (tagc.torch: FSDP2 reduce-scatter, DDP / FSDP1 hooks)
# against PyTorch 2.14 in a Debian testing root (scripts/torch_root.sh: made once by
# debootstrap, then reused), into build-torch/python.
# Usage: scripts/build_python.sh [--test]   (--test: also run its 2-process tests there)
# Use it from the root:  scripts/torch_root.sh run env PYTHONPATH=$PWD/build-torch/python python3 your_training.py
# On a machine with its own torch 2.x, `pip install --no-build-isolation .` builds it there instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --test ]]; then
  exec bash scripts/torch_root.sh test
fi
exec bash scripts/torch_root.sh build
