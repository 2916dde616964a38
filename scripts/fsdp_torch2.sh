#!/usr/bin/env bash
# Tests tagc.torch's fsdp_comm_hook against a real FSDP (torch >= 2, CPU, gloo).
#
# Debian bookworm's torch 1.13 runs FSDP only on CUDA, so this builds (or reuses)
# a Debian trixie root (torch 2.6, CPU) with debootstrap, builds the extension
# inside it against that torch, and runs python/tests/test_fsdp_hook.py on 2
# processes there. One command; the root is kept for the next run.
#
# Usage: scripts/fsdp_torch2.sh [--setup]    (--setup: only build/refresh the root)
# Env:   TAGC_TRIXIE_ROOT   where the root lives (default /opt/tagc-trixie; ~2.1 GB)
#        TAGC_TRIXIE_MIRROR Debian mirror (default http://deb.debian.org/debian)
#        TAGC_JOBS          build parallelism (default: nproc)
# Needs root (debootstrap, chroot, mount). The build goes to build-torch2/ in this
# repository (the repository is bind-mounted into the root at the same path).
#
# Mounts (/proc, /dev, /dev/shm, /dev/pts, the repository, CCCL's headers) are made inside a
# private mount namespace (unshare): they vanish with it, even if this script is
# killed, and the trap unmounts them in order on a normal exit.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
root=${TAGC_TRIXIE_ROOT:-/opt/tagc-trixie}
mirror=${TAGC_TRIXIE_MIRROR:-http://deb.debian.org/debian}
jobs=${TAGC_JOBS:-$(nproc)}
setup_only=0; [[ ${1:-} == --setup ]] && setup_only=1
# What the root needs to build and run the extension (pybind11 and torch's CMake
# config, the compiler, OpenMP comes with g++).
packages=(python3-torch libtorch-dev pybind11-dev python3-pybind11 python3-dev g++ cmake ninja-build)

if [[ $(id -u) -ne 0 ]]; then
  echo "fsdp_torch2: needs root (debootstrap, chroot, mount); run it with sudo" >&2
  exit 1
fi
# CCCL's headers (Thrust, CUB, libcu++) from the host's CUDA toolkit, as the main build finds them.
cccl=${TAGC_CCCL_INCLUDE_DIR:-}
for d in "${CUDA_HOME:-/nonexistent}/include/cccl" /usr/local/cuda/include/cccl /usr/local/cuda/include; do
  [[ -z $cccl && -f $d/thrust/version.h ]] && cccl=$d
done
if [[ -z $cccl ]]; then
  echo "fsdp_torch2: CCCL headers not found (install the CUDA toolkit or set TAGC_CCCL_INCLUDE_DIR)" >&2
  exit 1
fi
command -v debootstrap >/dev/null || bash scripts/install_deps.sh --torch2

now() { date +%s; }
t_start=$(now)
report() { printf 'fsdp_torch2: %-34s %4d s\n' "$1" "$2"; }

# One run at a time per root (two would race in apt and in the build directory).
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9

# ---- 1. the root: debootstrap into <root>.partial, renamed when complete --------
if [[ ! -f $root/etc/debian_version ]]; then
  rm -rf "$root.partial"
  t=$(now)
  debootstrap --variant=minbase trixie "$root.partial" "$mirror"
  mv "$root.partial" "$root"
  report "debootstrap trixie" $(($(now) - t))
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# Runs "$@" in the root with /proc, /dev, /dev/shm, the repository and CCCL mounted,
# all inside a private mount namespace.
read -r -d '' in_root_script <<'EOF' || true
root=$1 repo=$2 cccl=$3; shift 3
mounted=()
cleanup() { local i; for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || umount -l "${mounted[i]}"; done; }
trap cleanup EXIT
mnt() { mkdir -p "${@: -1}"; mount "$@"; mounted+=("${@: -1}"); }
mnt -t proc proc "$root/proc"
mnt --bind /dev "$root/dev"
mnt --bind /dev/shm "$root/dev/shm"
[[ -e /dev/pts/ptmx ]] && mnt --bind /dev/pts "$root/dev/pts"  # apt and dpkg log through a pty
mnt --bind "$repo" "$root$repo"
mnt --bind "$cccl" "$root/opt/cccl"
mount -o remount,bind,ro "$root/opt/cccl"
# A fresh environment: the host's PATH (pyenv...) and Python settings mean nothing there.
env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
  USE_LIBUV=0 OMP_WAIT_POLICY=PASSIVE chroot "$root" "$@"
EOF
in_root() { unshare --mount --propagation private /bin/bash -euo pipefail -c "$in_root_script" in_root "$root" "$repo" "$cccl" "$@"; }

# ---- 2. torch 2.x and the build tools in the root ----------------------------------
want="${packages[*]}"
if [[ $(cat "$root/.tagc-packages" 2>/dev/null) != "$want" ]]; then
  t=$(now)
  in_root /bin/sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $want >/dev/null && apt-get clean"
  echo "$want" > "$root/.tagc-packages"
  report "apt-get install (in the root)" $(($(now) - t))
fi
torch_version=$(in_root /usr/bin/python3 -c "import torch; print(torch.__version__)")
echo "fsdp_torch2: torch $torch_version in $root ($(du -sh --one-file-system "$root" 2>/dev/null | cut -f1))"
if ((setup_only)); then exit 0; fi

# ---- 3. the extension, against the root's torch ------------------------------------
t=$(now)
in_root /bin/sh -c "cmake -S '$repo' -B '$repo/build-torch2' -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTAGC_BUILD_PYTHON=ON -DTAGC_BUILD_TESTS=OFF -DTAGC_BUILD_EXAMPLES=OFF -DTAGC_BUILD_BENCH=OFF \
  -DTAGC_WITH_MPI=OFF -DTAGC_CCCL_INCLUDE_DIR=/opt/cccl >/dev/null && \
  cmake --build '$repo/build-torch2' -j$jobs --target tagc_python"
report "build the extension (torch $torch_version)" $(($(now) - t))

# ---- 4. the 2-process FSDP test -----------------------------------------------------
t=$(now)
status=0
in_root /bin/sh -c "cd '$repo' && PYTHONPATH='$repo/build-torch2/python' OMP_NUM_THREADS=1 \
  python3 python/tests/test_fsdp_hook.py" || status=$?
report "FSDP test" $(($(now) - t))
report "total" $(($(now) - t_start))
exit $status
