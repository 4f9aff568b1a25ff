#!/usr/bin/env bash
# Regenerates everything derived from pkg/apis: deepcopy, OpenAPI definitions, the typed
# clientset (with its fake), listers, informers, apply configurations, and the CRDs in
# manifests/crds. Run it after any change to the API types; hack/verify-codegen.sh checks
# that nobody forgot.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
MODULE=github.com/t9k-jobs/t9k-jobs
BOILERPLATE=hack/boilerplate.go.txt

# The generators are pinned by go.mod; kube_codegen.sh installs them into GOBIN, which we keep
# inside the project so nothing outside it changes.
export GOBIN="$ROOT/bin"
mkdir -p "$GOBIN"
# kube_codegen.sh makes temporary files it does not remove (gen_openapi's report): they go
# with this directory.
TMPDIR=$(mktemp -d)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
go mod download k8s.io/code-generator # a fresh module cache has it listed, not downloaded
CODEGEN_PKG=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
# shellcheck source=/dev/null
source "$CODEGEN_PKG/kube_codegen.sh"

kube::codegen::gen_helpers --boilerplate "$BOILERPLATE" pkg/apis

kube::codegen::gen_openapi \
  --output-dir pkg/client/openapi \
  --output-pkg "$MODULE/pkg/client/openapi" \
  --extra-pkgs k8s.io/api/core/v1 \
  --extra-pkgs k8s.io/apimachinery/pkg/util/intstr \
  --report-filename hack/api-violations.list \
  --update-report \
  --boilerplate "$BOILERPLATE" \
  pkg/apis

models=$(mktemp) # in TMPDIR
go run ./hack/openapi-models > "$models"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --applyconfig-openapi-schema "$models" \
  --applyconfig-externals "k8s.io/api/core/v1.PodTemplateSpec:k8s.io/client-go/applyconfigurations/core/v1" \
  --output-dir pkg/client \
  --output-pkg "$MODULE/pkg/client" \
  --one-input-api batch \
  --boilerplate "$BOILERPLATE" \
  pkg/apis

# Kueue's API, as far as the controller uses it (pkg/apis/kueue): a client of its own, so that
# the project's clientset offers only the project's kinds.
kube::codegen::gen_client \
  --with-watch \
  --output-dir pkg/client/kueue \
  --output-pkg "$MODULE/pkg/client/kueue" \
  --one-input-api kueue \
  --boilerplate "$BOILERPLATE" \
  pkg/apis

echo "Generating CRDs"
rm -f manifests/crds/*.yaml
(cd hack/tools/controller-gen && go tool controller-gen \
  crd:generateEmbeddedObjectMeta=true \
  paths="$ROOT/pkg/apis/batch/..." \
  output:crd:dir="$ROOT/manifests/crds")
go run ./hack/crd-trim manifests/crds/*.yaml
