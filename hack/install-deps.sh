#!/usr/bin/env bash
# Installs, when missing, the Debian packages the tests need on this machine: the real node's
# (docs/testing.md, "The real node"): runc, which runs its containers; iproute2, with which it
# makes its bridge; iptables, which kube-proxy programs and its teardown reads back; nftables,
# with which its teardown removes the empty tables kube-proxy leaves; mmdebstrap, which makes
# its training image (hack/lib/images.sh); and skopeo, with which hack/image's tests read the
# image archive as users' tools do. The programs the real runs use (PyTorch, OpenMPI, sshd,
# XGBoost) are in the training image, not on the machine. It needs root; elsewhere it says
# what it would install and exits 0, and the tests that need the packages skip (or fail,
# where the environment variable CI is set).
set -euo pipefail

PACKAGES=(runc iproute2 iptables nftables mmdebstrap skopeo)

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
apt-get install -y -q --no-install-recommends "${missing[@]}" 2>&1 |
  grep --line-buffered -E '^(Get:[0-9]*0 |Unpacking |Setting up |E: )' || true
for p in "${missing[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || { echo "install-deps: $p did not install" >&2; exit 1; }
done
echo "install-deps: done in $((SECONDS - start))s"
