#!/usr/bin/env bash
# Prints the version a build reports when none is given: the nearest release tag (v1.2.3, or
# v1.2.3-4-gabcdef012345 past it), else v0.0.0-<commit>; "-dirty" when the tree has changes.
set -euo pipefail
cd "$(dirname "$0")/.."
if v=$(git describe --tags --match 'v[0-9]*' --abbrev=12 --dirty 2>/dev/null); then
  echo "$v"
  exit 0
fi
v=v0.0.0-$(git rev-parse --short=12 HEAD)
[[ -z $(git status --porcelain) ]] || v+=-dirty
echo "$v"
