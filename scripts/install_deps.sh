#!/usr/bin/env bash
# Installs what tagc's build, tests, benchmarks and GPT-2 demo need, from Debian's
# packages (and node's npm for the data, see fetch_data.sh). Idempotent and quick
# when everything is there. CUDA (nvcc, NCCL, CCCL headers) is expected at
# /usr/local/cuda; without nvcc the CUDA compile check is skipped with a message.
set -euo pipefail
# --torch: also the host's PyTorch (bookworm: 1.13, CPU, gloo) and pybind11, for
# bench/torch/ (~650-830 MB, ~2.5 min, so only when asked for). The package's tests
# run on torch 2.14 in scripts/torch_root.sh's root instead.
# --torch2: debootstrap, for scripts/torch_root.sh (a Debian testing root with
# torch 2.14, where FSDP1/FSDP2 run on the CPU; that script builds the root itself).
with_torch=0 with_torch2=0
for arg in "$@"; do
  case $arg in
    --torch) with_torch=1 ;;
    --torch2) with_torch2=1 ;;
    *) echo "install_deps: unknown option $arg (--torch, --torch2)" >&2; exit 2 ;;
  esac
done

packages=(cmake ninja-build g++ pkg-config
          doctest-dev libbenchmark-dev
          libopenmpi-dev openmpi-bin
          libopenblas-dev libpcre2-dev nlohmann-json3-dev
          clang libclang-rt-dev
          nodejs npm iproute2 gnuplot-nox)
if ((with_torch)); then
  packages+=(python3-torch libtorch-dev pybind11-dev python3-pybind11)
fi
if ((with_torch2)); then
  packages+=(debootstrap)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from elsewhere than Debian (the image ships them): accept those.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<< "${missing[*]}"
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ ! -d /usr/local/cuda/include/cccl && ! -f /usr/local/cuda/include/thrust/version.h ]]; then
  echo "install_deps: CCCL headers (thrust, cub, libcu++) not found under /usr/local/cuda." >&2
  echo "              Install the CUDA Toolkit (12.x or 13.x) or pass -DTAGC_CCCL_INCLUDE_DIR=... to cmake." >&2
  exit 1
fi
if ((with_torch)) && ! /usr/bin/python3 -c "import torch, torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null; then
  echo "install_deps: /usr/bin/python3 cannot import torch with gloo after installing python3-torch" >&2
  exit 1
fi
echo "install_deps: ok"
