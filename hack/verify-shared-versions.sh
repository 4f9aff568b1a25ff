#!/usr/bin/env bash
# Fails when two builds that CI runs on one machine compile the same module at different
# versions. Go's build cache keys a package by its source and by its dependencies' own
# keys, so client-go compiled for the project and client-go compiled for kube-apiserver
# share one compile only if every module beneath them is at the same version too; one
# module a patch apart recompiles everything above it (docs/testing.md, "One version of a
# library"). The project's module and the tool modules built against Kubernetes' current
# libraries form one group; kwok and Kueue, built against the previous minor release, form
# another. Only modules whose packages the builds compile are compared.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# compiled prints "<module> <version> <dir>" for every module whose packages a build
# compiles: $1 is the module's directory, the rest are the packages built there (the
# project's tests too, which its packages' list names with -test).
compiled() {
  local dir=$1 test=()
  shift
  [[ $dir == . ]] && test=(-test)
  (cd "$dir" && go list -deps "${test[@]}" -f '{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} {{.Version}}{{end}}{{end}}' "$@") |
    awk -v dir="$dir" 'NF >= 2 { print $1, $NF, dir }' | sort -u
}

# check compares the versions of one group's builds, given as "<dir>:<packages>".
check() {
  local group=$1 build list
  shift
  list=$(mktemp)
  for build in "$@"; do
    compiled "${build%%:*}" ${build#*:} >>"$list" || { rm -f "$list"; return 2; }
  done
  awk -v group="$group" '
    { seen[$1] = seen[$1] " " $2 " (" $3 ")"; if (!(($1, $2) in v)) { v[$1, $2] = 1; n[$1]++ } }
    END {
      bad = 0
      for (m in n) if (n[m] > 1) { print group ": " m " at" seen[m]; bad = 1 }
      exit bad
    }' "$list" | sort
  local rc=${PIPESTATUS[0]}
  rm -f "$list"
  return "$rc"
}

ok=1
check "Kubernetes v1.37" ".:./..." hack/tools/kube:tool hack/tools/helm:tool \
  hack/tools/controller-gen:tool hack/tools/coredns:tool || ok=0
check "Kubernetes v1.36 (kwok, Kueue)" hack/tools/kwok:tool hack/tools/kueue:tool || ok=0
if (( ! ok )); then
  echo "a module is compiled at two versions: raise the lower (go get <module>@<version> and go mod tidy in its directory), so that Go's build cache compiles it once" >&2
  exit 1
fi
