#!/usr/bin/env bash
# Fails when anything generated from pkg/apis (deepcopy, OpenAPI, client, listers, informers,
# apply configurations, CRDs) is stale. It regenerates in a copy of the tree (the files git
# tracks or would, as they are now) and compares, so the tree itself is never written: a
# build or test running from it meanwhile (the end-to-end tests compile the controller as
# they go) sees no file change under it. To bring the tree up to date: make generate.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
GENERATED=(pkg/apis pkg/client manifests/crds hack/api-violations.list)

copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [[ -e $f ]] && printf '%s\0' "$f" # deleted but not yet committed: not in the tree
done | xargs -0 cp --parents -a -t "$copy"

"$copy/hack/update-codegen.sh" >/dev/null

stale=0
for path in "${GENERATED[@]}"; do
  if ! diff -ruN "$path" "$copy/$path" >"$copy/.diff" 2>&1; then
    echo "stale: $path"
    head -40 "$copy/.diff"
    stale=1
  fi
done
if (( stale )); then
  echo "generated code was out of date: run hack/update-codegen.sh (make generate) and commit the result" >&2
  exit 1
fi
echo "generated code is up to date"
