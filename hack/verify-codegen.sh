#!/usr/bin/env bash
# Fails when anything generated from pkg/apis (deepcopy, OpenAPI, client, listers, informers,
# apply configurations, CRDs) is stale. It regenerates in place, so the tree is up to date
# afterwards either way; the diff says what was stale.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
GENERATED=(pkg/apis pkg/client manifests/crds hack/api-violations.list)

before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
for path in "${GENERATED[@]}"; do
  mkdir -p "$before/$(dirname "$path")"
  cp -a "$path" "$before/$path"
done

hack/update-codegen.sh >/dev/null

stale=0
for path in "${GENERATED[@]}"; do
  if ! diff -ruN "$before/$path" "$path" >"$before/diff" 2>&1; then
    echo "stale: $path"
    head -40 "$before/diff"
    stale=1
  fi
done
if (( stale )); then
  echo "generated code was out of date: run hack/update-codegen.sh (make generate) and commit the result" >&2
  exit 1
fi
echo "generated code is up to date"
