#!/usr/bin/env bash
# Builds and caches the binaries of the local cluster: kube-apiserver, kube-scheduler,
# kube-controller-manager and kubectl (hack/tools/kube), etcd (hack/tools/etcd), kwok
# (hack/tools/kwok) and kueue (hack/tools/kueue), with Kueue's CRDs and webhook manifests in
# kueue-config/ beside them (test/cluster reads them when it starts Kueue); and its real
# node's: the kubelet and kube-proxy (hack/tools/kube), containerd with its runc shim and ctr
# (hack/tools/containerd), the CNI plugins in cni/ (hack/tools/cni), crictl
# (hack/tools/crictl), CoreDNS (hack/tools/coredns) and the pause program, from the
# Kubernetes module's pause.c. Binaries land in a cache directory keyed by the tool modules'
# go.mod and go.sum, CoreDNS's main.go and this script, so a fresh clone reuses them and a
# version bump, or a change in how they are built, rebuilds them.
#
# Sourced by hack/cluster.sh; `hack/lib/tools.sh` on its own builds and prints the directory.
set -euo pipefail

T9K_ROOT=${T9K_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
TOOLS_MODULES=(kube etcd kwok kueue containerd cni crictl coredns)

# tools_bin_dir prints the cache directory for the current tool versions.
tools_bin_dir() {
  local cache=${T9K_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs}
  local key m
  key=$(cd "$T9K_ROOT/hack/tools" && for m in "${TOOLS_MODULES[@]}"; do cat "$m/go.sum" "$m/go.mod"; done |
    cat - "$T9K_ROOT/hack/lib/tools.sh" "$T9K_ROOT/hack/tools/coredns/cmd/coredns/main.go" | sha256sum | cut -c1-16)
  echo "$cache/bin/$key"
}

# version_ldflags prints the -ldflags that give the Kubernetes binaries their release version.
# Built from the module, they would report v0.0.0-master+$Format:%H$, which clients that parse
# the server's version (Kueue does) refuse.
version_ldflags() {
  local v major minor p
  if [[ $1 == containerd ]]; then   # otherwise it reports a development version
    printf -- "-X github.com/containerd/containerd/v2/version.Version=%s" "$(go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)"
    return 0
  fi
  [[ $1 == kube ]] || return 0
  v=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)   # v1.37.2
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- "-X '%s.gitVersion=%s' -X '%s.gitMajor=%s' -X '%s.gitMinor=%s' -X '%s.gitTreeState=clean' " \
      "$p" "$v" "$p" "$major" "$p" "$minor" "$p"
  done
}

# build_module builds every tool of one module into $2, printing package-level progress, since
# the first build of the Kubernetes binaries compiles a few thousand packages.
build_module() {
  local module=$1 out=$2 total done=0 start=$SECONDS
  cd "$T9K_ROOT/hack/tools/$module"
  total=$(go list -deps tool 2>/dev/null | wc -l)
  echo "building $module tools ($total packages; cached packages go fast)..."
  local dest=$out tags= modfile=()
  case $module in
    cni) dest=$out/cni; mkdir -p "$dest" ;;   # containerd finds the plugins in a directory of their own
    containerd) tags="no_btrfs no_zfs no_devmapper" ;;   # snapshotters that need C libraries
    kwok) modfile=(-modfile "$(kwok_modfile "$out")") || return 1 ;;
  esac
  # -s -w: no symbol table or DWARF, which nothing here reads (a panic's stack still names
  # its functions); the linker writes the Kubernetes binaries in half the time. Static and
  # trimmed, as the Makefile builds the project: the packages the tools share with it (the
  # Kubernetes libraries) are then compiled once for both (docs/testing.md). Only
  # containerd has cgo code (a PKCS#11 key store for encrypted images), which the real node
  # does not use.
  CGO_ENABLED=0 go build -trimpath -v -tags "$tags" -ldflags "-s -w $(version_ldflags "$module")" "${modfile[@]}" -o "$dest/" tool 2>&1 | while IFS= read -r line; do
    case "$line" in
      *" "*|*:*) echo "  $line" ;;             # compiler errors and warnings pass through
      *) done=$((done + 1))
         if (( done % 200 == 0 )); then echo "  $module: $done/$total packages compiled, $((SECONDS - start))s"; fi ;;
    esac
  done
  # go build's exit status is lost in the pipe: check that every tool was written.
  local t
  for t in $(go list -f '{{.Target}}' tool 2>/dev/null | xargs -n1 basename); do
    [[ -x "$dest/$t" ]] || { echo "build of $module failed: $dest/$t missing" >&2; return 1; }
  done
  echo "built $module tools in $((SECONDS - start))s"
}

# kwok_modfile copies kwok's module under $1, patched to delete a pod only if it is still the
# pod kwok meant (its UID as the delete's precondition), and prints a go.mod that replaces
# the module with the copy (go build -modfile; the module cache itself is read-only). kwok
# v0.8.0 deletes a pod by name and may send the same delete twice; a controller that replaced
# the pod between the two (same name, a new UID) lost its new pod to the second, which a
# kubelet never does (it deletes with the UID as precondition). The patch fails the build if
# the line it replaces is not there.
kwok_modfile() {
  local dir=$1/kwok-patched src file
  src=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r "$src" "$dir/kwok" && chmod -R u+w "$dir/kwok"
  file=$dir/kwok/pkg/kwok/controllers/pod_controller.go
  sed -i 's/Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)/Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: deleteOpt.GracePeriodSeconds, Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})/' "$file"
  grep -q 'NewUIDPreconditions(string(pod.UID))' "$file" ||
    { echo "kwok_modfile: $src no longer deletes pods as patched" >&2; return 1; }
  cp go.mod go.sum "$dir/"
  go mod edit -modfile "$dir/go.mod" -replace "sigs.k8s.io/kwok=$dir/kwok"
  echo "$dir/go.mod"
}

# copy_kueue_config copies what test/cluster needs at run time from the Kueue module into
# $1/kueue-config: the CRDs with the kustomization and patches that say which of them convert
# through the webhook (crd/), and the webhook configurations (webhook/). The module cache is
# read-only, so the copies are made writable, or the cache directory could not be removed.
copy_kueue_config() {
  local out=$1/kueue-config src
  src=$(cd "$T9K_ROOT/hack/tools/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
  rm -rf "$out" && mkdir -p "$out"
  cp -r "$src/config/components/crd" "$out/crd"
  cp -r "$src/config/components/webhook" "$out/webhook"
  chmod -R u+w "$out"
}

# build_pause builds the program a pod's sandbox runs, statically, from the Kubernetes module's
# own source.
build_pause() {
  local src
  src=$(cd "$T9K_ROOT/hack/tools/kube" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
  gcc -Os -static -DVERSION=t9k-local -o "$1/pause" "$src"
}

# TOOLS are the binaries and TOOL_FILES the files a complete tools directory holds.
TOOLS=(kube-apiserver kube-scheduler kube-controller-manager kubectl etcd kwok kueue
  kubelet kube-proxy containerd containerd-shim-runc-v2 ctr crictl coredns pause
  cni/bridge cni/host-local cni/loopback)
TOOL_FILES=(kueue-config/crd/kustomization.yaml kueue-config/webhook/manifests.yaml)

# missing_tool prints the first tool or file directory $1 lacks, and fails when it lacks none.
missing_tool() {
  local t
  for t in "${TOOLS[@]}"; do [[ -x "$1/$t" ]] || { echo "$t"; return 0; }; done
  for t in "${TOOL_FILES[@]}"; do [[ -f "$1/$t" ]] || { echo "$t"; return 0; }; done
  return 1
}

# ensure_tools builds what is missing and prints nothing but errors and progress on stderr.
ensure_tools() {
  local bin missing
  bin=$(tools_bin_dir)
  if missing_tool "$bin" >/dev/null; then
    mkdir -p "$bin.partial"
    local m
    for m in "${TOOLS_MODULES[@]}"; do (build_module "$m" "$bin.partial") >&2; done
    # the etcd main package is the server module itself, so go names its binary "server".
    [[ -x "$bin.partial/server" ]] && mv "$bin.partial/server" "$bin.partial/etcd"
    copy_kueue_config "$bin.partial"
    build_pause "$bin.partial"
    rm -rf "$bin.partial/kwok-patched"
    if missing=$(missing_tool "$bin.partial"); then
      echo "missing $missing after build" >&2
      return 1
    fi
    rm -rf "$bin" && mv "$bin.partial" "$bin"
  fi
  echo "$bin"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  ensure_tools
fi
