#!/usr/bin/env bash
# Builds and caches the real node's training image (docs/testing.md, "The training image"),
# the image its pods run, since nothing can be pulled: a Debian root file system made by
# mmdebstrap, with Python, PyTorch (with gloo), NumPy, OpenMPI and mpi4py, sshd and the ssh
# client, XGBoost and the CA certificates, packed into an OCI image archive of one layer by
# `go run ./hack/image rootfs`. The archive lands in a cache directory keyed by the suite, the
# packages, mmdebstrap's options and the code that builds it (this script, hack/image), so a
# fresh clone reuses it and a change rebuilds it; Debian's own updates do not (remove the
# directory for them).
#
# It needs root and mmdebstrap (hack/install-deps.sh). Sourced, it defines the functions;
# `hack/lib/images.sh` on its own builds what is missing and prints the archive's path.
set -euo pipefail

T9K_ROOT=${T9K_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

# TRAINING_IMAGE is the training image's reference, as pods name it.
TRAINING_IMAGE=localhost/t9k/training:bookworm
TRAINING_SUITE=bookworm
TRAINING_MIRROR=http://deb.debian.org/debian
# What jobs run: PyTorch's gloo all-reduce, mpirun through sshd, mpi4py, XGBoost (Debian has
# no TensorFlow). mmdebstrap installs no Recommends; OpenBLAS is named here, which PyTorch and
# NumPy would otherwise find only as the reference BLAS (a matrix product 27 times slower).
TRAINING_PACKAGES=(python3 python3-torch python3-numpy openmpi-bin python3-mpi4py
  openssh-server openssh-client python3-xgboost ca-certificates libopenblas0-pthread)
# Hard dependencies that nothing in the image runs, provided by a stub package instead:
# SciPy's on pythran, an ahead-of-time compiler that would bring gcc, g++, Boost's headers and
# Python's development files (SciPy runs the modules pythran compiled when it was built, not
# pythran); and Mesa's on its GPU drivers with LLVM, which libGL loads only to draw on a
# display (PyTorch links OpenCV, which links libGL). Together 66 packages, 640 MiB of the
# 1.7 GiB that apt would install.
TRAINING_STUBBED=(python3-pythran libgl1-mesa-dri)
# Files nobody reads at run time: documentation (but the licences), manual pages, info,
# translations, and libtorch's own C++ test programs (50 MB).
TRAINING_EXCLUDES=('/usr/share/doc/*' '/usr/share/man/*' '/usr/share/info/*' '/usr/share/locale/*'
  '/usr/share/lintian/*' '/usr/lib/libtorch-test/*')
TRAINING_INCLUDES=('/usr/share/doc/*/copyright' /usr/share/locale/locale.alias)
# Checked inside the root file system before it is packed, so that a broken image is never
# cached. The host keys openssh-server's installation made go: every container of the image
# would share them, and the launcher kinds give sshd keys of their own; so do the build
# machine's resolv.conf and hostname, which mmdebstrap copies in (the runtime mounts its own).
TRAINING_CHECK='import torch, torch.distributed as dist, numpy, scipy, xgboost, mpi4py; from mpi4py import MPI; '\
'assert dist.is_gloo_available(), "PyTorch has no gloo"; '\
'print("torch", torch.__version__, "numpy", numpy.__version__, "xgboost", xgboost.__version__, "mpi4py", mpi4py.__version__, MPI.Get_library_version().splitlines()[0])'

# training_mmdebstrap_args prints mmdebstrap's options, one a line, for the stub package $1.
training_mmdebstrap_args() {
  local p
  echo "--variant=essential"
  echo "--include=$1"
  local IFS=,
  echo "--include=${TRAINING_PACKAGES[*]}"
  unset IFS
  # makes the stub package, given by its path, readable inside the root file system
  echo "--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount"
  # merges /usr as debootstrap does, with usr-is-merged, so that the essential
  # init-system-helpers does not bring the usrmerge package and Perl to merge it
  echo "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr"
  for p in "${TRAINING_EXCLUDES[@]}"; do echo "--dpkgopt=path-exclude=$p"; done
  for p in "${TRAINING_INCLUDES[@]}"; do echo "--dpkgopt=path-include=$p"; done
  echo "--customize-hook=chroot \"\$1\" python3 -c '$TRAINING_CHECK'"
  echo "--customize-hook=chroot \"\$1\" sh -ec 'mkdir -p /run/sshd; /usr/sbin/sshd -t; mpirun --version | head -n 1'"
  echo "--customize-hook=rm -f \"\$1\"/etc/ssh/ssh_host_* \"\$1\"/etc/resolv.conf \"\$1\"/etc/hostname"
}

# training_image_dir prints the cache directory of the current recipe.
training_image_dir() {
  local cache=${T9K_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs}
  local key
  key=$({
    echo "$TRAINING_IMAGE $TRAINING_SUITE ${TRAINING_PACKAGES[*]} ${TRAINING_STUBBED[*]}"
    training_mmdebstrap_args stub.deb
    cd "$T9K_ROOT" && cat hack/lib/images.sh $(ls hack/image/*.go hack/image/archive/*.go | grep -v '_test\.go$')
  } | sha256sum | cut -c1-16)
  echo "$cache/images/$key"
}

# build_stub writes to $1 the package that provides TRAINING_STUBBED.
build_stub() {
  local dir=$1.d
  mkdir -p "$dir/DEBIAN"
  local IFS=,
  cat >"$dir/DEBIAN/control" <<EOF
Package: t9k-training-stubs
Version: 1
Architecture: all
Maintainer: t9k-jobs
Provides: ${TRAINING_STUBBED[*]}
Description: stands in for packages the training image never runs
 See hack/lib/images.sh.
EOF
  unset IFS
  dpkg-deb --root-owner-group --build "$dir" "$1" >/dev/null || return 1
  chmod 644 "$1" && rm -rf "$dir"
}

# build_training_image builds the archive into $1. Every step says when it fails: a caller's
# `||` or `if` would turn set -e off in here.
build_training_image() {
  local out=$1 work=$1.partial start=$SECONDS
  [[ $(id -u) == 0 ]] || { echo "images: building the training image needs root (mmdebstrap)" >&2; return 1; }
  command -v mmdebstrap >/dev/null || { echo "images: mmdebstrap missing: run hack/install-deps.sh" >&2; return 1; }
  remove_work "$work" || return 1
  mkdir -p "$work" || return 1
  trap 'remove_work "'"$work"'"' EXIT
  build_stub "$work/t9k-training-stubs.deb" || return 1
  local args=()
  mapfile -t args < <(training_mmdebstrap_args "$work/t9k-training-stubs.deb")
  echo "images: building $TRAINING_IMAGE: mmdebstrap $TRAINING_SUITE with ${TRAINING_PACKAGES[*]} (1 to 2 minutes)" >&2
  mmdebstrap "${args[@]}" "$TRAINING_SUITE" "$work/rootfs" "$TRAINING_MIRROR" >&2 || { echo "images: mmdebstrap failed" >&2; return 1; }
  echo "images: root file system of $(du -sm "$work/rootfs" | cut -f1) MiB in $((SECONDS - start))s; packing it" >&2
  local pack=$SECONDS
  (cd "$T9K_ROOT" && go run ./hack/image rootfs --dir "$work/rootfs" --image "$TRAINING_IMAGE" --out "$work/training.oci.tar" \
    --created-by "mmdebstrap --variant=essential $TRAINING_SUITE: ${TRAINING_PACKAGES[*]} (hack/lib/images.sh)") >&2 || return 1
  echo "images: packed in $((SECONDS - pack))s" >&2
  mkdir -p "$out" && mv "$work/training.oci.tar" "$out/training.oci.tar" || return 1
  trap - EXIT
  remove_work "$work" || return 1
  echo "images: built $out/training.oci.tar ($(du -m "$out/training.oci.tar" | cut -f1) MiB) in $((SECONDS - start))s" >&2
}

# remove_work removes a build's directory, which may hold gigabytes. mmdebstrap mounts /dev,
# /proc and /sys in the root file system while it runs, and the stub package, which a failed
# run leaves mounted: what is mounted under the directory is unmounted first, and nothing is
# removed while anything is, lest the removal reach the host's files through it.
remove_work() {
  [[ -e $1 ]] || return 0
  local m
  while read -r m; do umount "$m" || true; done < <(findmnt -rn -o TARGET | grep -F "$1/" | sort -r)
  if findmnt -rn -o TARGET | grep -qF "$1/"; then
    echo "images: not removing $1: something is still mounted under it" >&2
    return 1
  fi
  rm -rf --one-file-system "$1"
}

# ensure_training_image builds the archive when missing and prints its path.
ensure_training_image() {
  local dir
  dir=$(training_image_dir)
  if [[ ! -f $dir/training.oci.tar ]]; then
    mkdir -p "$(dirname "$dir")"
    # one build at a time per cache directory
    (
      flock 9
      if [[ ! -f $dir/training.oci.tar ]]; then build_training_image "$dir"; fi
    ) 9>"$dir.lock"
  fi
  echo "$dir/training.oci.tar"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  ensure_training_image
fi
