#!/usr/bin/env bash
# Installs Debian's PyTorch (CPU, gloo) + pybind11 and builds the Python package
# tagc (tagc.torch: DDP / FSDP communication hooks) into build-py/python.
# Usage: scripts/build_python.sh [--test]   (--test: also run its 2-process DDP tests)
# Then: PYTHONPATH=$PWD/build-py/python /usr/bin/python3 your_training.py
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --torch
cmake -S . -B build-py -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAGC_BUILD_PYTHON=ON \
  -DTAGC_BUILD_EXAMPLES=OFF -DTAGC_BUILD_BENCH=OFF >/dev/null
cmake --build build-py -j"$(nproc)" --target tagc_python
if [[ ${1:-} == --test ]]; then
  OMP_WAIT_POLICY=PASSIVE ctest --test-dir build-py --output-on-failure -L python --no-tests=error
fi
echo "build_python: import it with PYTHONPATH=$PWD/build-py/python /usr/bin/python3"
