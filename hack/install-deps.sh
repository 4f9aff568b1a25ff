#!/usr/bin/env bash
# Installs, when missing, the Debian packages that stand in for images on the process node
# (docs/testing.md, "The process node"): sshd for the launcher kinds' workers, OpenMPI and mpi4py for
# real MPIJobs, PyTorch for the GenericJob and ColossalAIJob runs (gloo), XGBoost for
# XGBoostTrainingJob, and iproute2 for the node's network namespaces; runc, which runs the
# real node's containers, and nftables, with which its teardown removes the empty tables
# kube-proxy leaves; skopeo, with which hack/image's tests read the image archive as
# users' tools do; and mmdebstrap, which makes the real node's training image
# (hack/lib/images.sh). It needs root; elsewhere
# it says what it would install and exits 0, and the tests that need the packages skip (or
# fail, where the environment variable CI is set).
set -euo pipefail

PACKAGES=(iproute2 openssh-server openssh-client openmpi-bin python3-mpi4py python3-torch python3-xgboost python3-numpy skopeo
  runc nftables mmdebstrap)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "install-deps: all present (${PACKAGES[*]})"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "install-deps: not root, so not installing: ${missing[*]} (the real-run tests will skip, or fail where CI is set)"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# sshd must not start as a service: the process node runs it per pod.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
apt-get install -y -q --no-install-recommends "${missing[@]}" 2>&1 |
  grep --line-buffered -E '^(Get:[0-9]*0 |Unpacking |Setting up |E: )' || true
for p in "${missing[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || { echo "install-deps: $p did not install" >&2; exit 1; }
done
echo "install-deps: done in $((SECONDS - start))s"
