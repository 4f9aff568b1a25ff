#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: writes $DIST (dist/) with
#   install.yaml                         the namespace, CRDs, RBAC, the users' roles and the Deployment, its image
#                                        pinned by digest (kustomize build of manifests/)
#   t9k-job-controller-vX.Y.Z.oci.tar    the image (linux/amd64 and linux/arm64), as make image
#   SHA256SUMS                           of both
# The image is named $IMAGE:vX.Y.Z; push it there (go run ./hack/image push --archive ...)
# before users apply install.yaml. Nothing is pushed or tagged here (docs/install.md,
# "Releasing").
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${VERSION:-}
if [[ ! $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: VERSION=$VERSION: give a semantic version such as v1.2.3 (make release VERSION=v1.2.3)" >&2
  exit 1
fi
# The base's image name, which its own images: entry gives the Deployment.
BASE_IMAGE=$(sed -n 's/^ *newName: *//p' manifests/kustomization.yaml)
IMAGE=${IMAGE:-$BASE_IMAGE}
DIST=${DIST:-dist}

archive=$DIST/t9k-job-controller-$VERSION.oci.tar
rm -rf "$DIST"
mkdir -p "$DIST" _output
go run ./hack/image build --image "$IMAGE:$VERSION" --version "$VERSION" --out "$archive" --digest-file "$archive.digest"
digest=$(cat "$archive.digest")
rm "$archive.digest"

# An overlay of manifests/ that only pins the image: what kubectl apply -k manifests/ installs,
# with this release's image.
overlay=$(mktemp -d _output/release-overlay.XXXXXX)
trap 'rm -rf "$overlay"' EXIT
cat > "$overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../manifests
images:
- name: $BASE_IMAGE
  newName: $IMAGE
  newTag: $VERSION
  digest: $digest
YAML
{
  echo "# t9k-jobs $VERSION: kubectl apply --server-side -f install.yaml"
  (cd hack/tools/kustomize && go tool kustomize build "../../../$overlay")
} > "$DIST/install.yaml"
grep -q "image: $IMAGE:$VERSION@$digest" "$DIST/install.yaml" || {
  echo "release: install.yaml does not name $IMAGE:$VERSION@$digest" >&2
  exit 1
}
(cd "$DIST" && sha256sum install.yaml "$(basename "$archive")" > SHA256SUMS)
echo "release $VERSION in $DIST/: image $IMAGE:$VERSION@$digest"
cat "$DIST/SHA256SUMS"
