#!/usr/bin/env bash
# The Python package's test environment: a Debian testing (forky) root with its
# PyTorch 2.14 (CPU, gloo), built once by debootstrap and reused. The repository is
# bind-mounted into it at the same path; the extension is built there against that
# torch (into build-torch/, gitignored) and the Python tests run there over gloo on
# the loopback.
#
# Usage: scripts/torch_root.sh setup          build or refresh the root only
#        scripts/torch_root.sh build          + configure and build tagc_python in build-torch/
#        scripts/torch_root.sh test           + ctest -L python in build-torch/ (DDP, FSDP1, FSDP2, pip)
#        scripts/torch_root.sh run CMD...     run CMD in the root (cwd: the repository)
# Env:   TAGC_TORCH_ROOT    where the root lives (default /var/cache/tagc-torch-root; ~2.3 GB)
#        TAGC_TORCH_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#        TAGC_JOBS          build parallelism (default: nproc)
#        CCACHE_DIR         if set, mounted into the root and used by the build
# Needs root (debootstrap, chroot, mount) and the network to a Debian mirror.
#
# Why a root and not the host's torch: the host is bookworm (torch 1.13, whose FSDP
# needs CUDA and which has no FSDP2); testing packages torch 2.14. debootstrap has no
# script named forky: testing's is sid's. Testing's Release file can be past its
# Valid-Until date, so apt runs with Acquire::Check-Valid-Until=false.
# Mounts (/proc, /dev, /dev/shm, /dev/pts, the repository, CCCL's headers, ccache) live in
# a private mount namespace (unshare): they vanish with it, even if this script is killed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
root=${TAGC_TORCH_ROOT:-/var/cache/tagc-torch-root}
mirror=${TAGC_TORCH_MIRROR:-http://deb.debian.org/debian}
jobs=${TAGC_JOBS:-$(nproc)}
action=${1:-test}
[[ $# -gt 0 ]] && shift
case $action in setup | build | test | run) ;; *)
  echo "torch_root: unknown action '$action' (setup, build, test, run CMD...)" >&2; exit 2 ;;
esac
# What the root needs: torch and its CMake config, pybind11, the compiler (OpenMP comes
# with g++), CMake + Ninja for the CMake build, pip + setuptools for `pip install .`.
packages=(python3-torch python3-numpy libtorch-dev pybind11-dev python3-pybind11 python3-dev g++ cmake
          ninja-build ccache python3-pip python3-setuptools python3-wheel python3-venv)

if [[ $(id -u) -ne 0 ]]; then
  echo "torch_root: needs root (debootstrap, chroot, mount); run it with sudo" >&2
  exit 1
fi
# CCCL's headers (Thrust, CUB, libcu++) from the host's CUDA toolkit, as the main build finds them.
cccl=${TAGC_CCCL_INCLUDE_DIR:-}
for d in "${CUDA_HOME:-/nonexistent}/include/cccl" /usr/local/cuda/include/cccl /usr/local/cuda/include; do
  [[ -z $cccl && -f $d/thrust/version.h ]] && cccl=$d
done
if [[ -z $cccl ]]; then
  echo "torch_root: CCCL headers not found (install the CUDA toolkit or set TAGC_CCCL_INCLUDE_DIR)" >&2
  exit 1
fi
command -v debootstrap >/dev/null || bash scripts/install_deps.sh --torch2

now() { date +%s; }
t_start=$(now)
report() { printf 'torch_root: %-40s %4d s\n' "$1" "$2"; }

# One run at a time per root (two would race in apt and in the build directory).
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9

# ---- 1. the root: debootstrap into <root>.partial, renamed when complete --------
if [[ ! -f $root/etc/debian_version ]]; then
  rm -rf "$root.partial"
  t=$(now)
  debootstrap --variant=minbase forky "$root.partial" "$mirror" /usr/share/debootstrap/scripts/sid
  mv "$root.partial" "$root"
  report "debootstrap forky" $(($(now) - t))
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
echo 'Acquire::Check-Valid-Until "false";' > "$root/etc/apt/apt.conf.d/99tagc-no-valid-until"

# Runs "$@" in the root with /proc, /dev, /dev/shm, the repository, CCCL (at /opt/cccl)
# and ccache (at /var/cache/ccache) mounted, all inside a private mount namespace.
read -r -d '' in_root_script <<'EOF' || true
root=$1 repo=$2 cccl=$3 ccache=$4; shift 4
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
cache_env=()
if [[ -n $ccache ]]; then
  mkdir -p "$ccache/torch-root"
  mnt --bind "$ccache/torch-root" "$root/var/cache/ccache"
  cache_env=(CCACHE_DIR=/var/cache/ccache "CCACHE_BASEDIR=$repo" CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime)
fi
# A fresh environment: the host's PATH (pyenv...) and Python settings mean nothing there.
# USE_LIBUV=0: torch's TCPStore otherwise wants libuv; gloo talks over the loopback.
cd /
env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
  USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo OMP_WAIT_POLICY=PASSIVE TAGC_CCCL_INCLUDE_DIR=/opt/cccl "${cache_env[@]}" \
  chroot "$root" /bin/sh -c 'cd "$0" && exec "$@"' "$repo" "$@"
EOF
in_root() {
  unshare --mount --propagation private /bin/bash -euo pipefail -c "$in_root_script" in_root \
    "$root" "$repo" "$cccl" "${CCACHE_DIR:-}" "$@"
}

# ---- 2. torch 2.x and the build tools in the root ----------------------------------
want="${packages[*]}"
if [[ $(cat "$root/.tagc-packages" 2>/dev/null) != "$want" ]]; then
  t=$(now)
  in_root /bin/sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $want >/dev/null && apt-get clean"
  echo "$want" > "$root/.tagc-packages"
  report "apt-get install (in the root)" $(($(now) - t))
fi
torch_version=$(in_root /usr/bin/python3 -c "import torch; print(torch.__version__)")
echo "torch_root: torch $torch_version in $root"
[[ $action == setup ]] && exit 0
if [[ $action == run ]]; then
  # The root is ready: let other runs, builds and tests in (a long benchmark would hold
  # the lock for its whole run). run writes nothing of the root's own.
  flock -u 9
  in_root "$@"
  exit
fi

# ---- 3. the extension, against the root's torch ------------------------------------
t=$(now)
launcher=()
[[ -n ${CCACHE_DIR:-} ]] && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
in_root cmake -S "$repo" -B "$repo/build-torch" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTAGC_BUILD_PYTHON=ON -DTAGC_BUILD_TESTS=OFF -DTAGC_BUILD_EXAMPLES=OFF -DTAGC_BUILD_BENCH=OFF \
  -DTAGC_WITH_MPI=OFF -DTAGC_CCCL_INCLUDE_DIR=/opt/cccl "${launcher[@]}" >/dev/null
in_root cmake --build "$repo/build-torch" -j"$jobs" --target tagc_python
report "build the extension (torch $torch_version)" $(($(now) - t))
[[ $action == build ]] && exit 0

# ---- 4. the Python tests (2 and 4 processes over gloo) ------------------------------
t=$(now)
status=0
in_root ctest --test-dir "$repo/build-torch" --output-on-failure -L python --no-tests=error || status=$?
report "ctest -L python" $(($(now) - t))
report "total" $(($(now) - t_start))
exit $status
