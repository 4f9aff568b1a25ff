#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: writes $DIST (dist/) with
#   install.yaml                         the namespace, CRDs, RBAC, the users' roles and the Deployment, its image
#                                        pinned by digest (kustomize build of manifests/)
#   t9k-job-controller-vX.Y.Z.oci.tar    the image, as make image: for $IMAGE_PLATFORMS (linux/amd64
#                                        and linux/arm64)
#   grafana-dashboard.json               the Grafana dashboard (manifests/monitoring/dashboard.json)
#   prometheus-alerts.yaml               the alert rules as a Prometheus rules file (manifests/monitoring/alerts.yaml)
#   prometheusrule.yaml                  the same rules in a PrometheusRule, for the Prometheus Operator
#   kubectl-t9k_vX.Y.Z_<os>_<arch>.tar.gz the kubectl plugin (docs/kubectl-plugin.md), for each of
#                                        $PLUGIN_PLATFORMS (linux and darwin, amd64 and arm64)
#   t9k.yaml                             the plugin's krew manifest, naming each archive's sha256
#   t9k-jobs-X.Y.Z.tgz                   the Helm chart (charts/t9k-jobs), its image this release's,
#                                        pinned by digest
#   SHA256SUMS                           of them all
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
PLUGIN_PLATFORMS=${PLUGIN_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
IMAGE_PLATFORMS=${IMAGE_PLATFORMS:-linux/amd64,linux/arm64}
# Where the plugin's archives are downloaded from, for the krew manifest.
DOWNLOAD_URL=${DOWNLOAD_URL:-https://github.com/t9k-jobs/t9k-jobs/releases/download/$VERSION}

archive=$DIST/t9k-job-controller-$VERSION.oci.tar
rm -rf "$DIST"
mkdir -p "$DIST" _output
go run ./hack/image build --image "$IMAGE:$VERSION" --version "$VERSION" --platforms "$IMAGE_PLATFORMS" --out "$archive" --digest-file "$archive.digest"
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
# Monitoring (docs/monitoring.md): the dashboard and the rules as they are, and the rules in a
# PrometheusRule whose spec is the rules file's groups.
cp manifests/monitoring/dashboard.json "$DIST/grafana-dashboard.json"
cp manifests/monitoring/alerts.yaml "$DIST/prometheus-alerts.yaml"
{
  echo "# t9k-jobs $VERSION alert rules for the Prometheus Operator: kubectl apply -f prometheusrule.yaml"
  echo "apiVersion: monitoring.coreos.com/v1"
  echo "kind: PrometheusRule"
  echo "metadata:"
  echo "  name: t9k-jobs"
  echo "  namespace: t9k-system"
  echo "  labels: {app.kubernetes.io/name: t9k-jobs}"
  echo "spec:"
  grep -v '^#' manifests/monitoring/alerts.yaml | sed 's/^/  /'
} > "$DIST/prometheusrule.yaml"
# The kubectl plugin: one archive per platform, reproducible (sorted, no times or owners), and
# krew's manifest of them.
plugin_build=$(mktemp -d _output/release-plugin.XXXXXX)
trap 'rm -rf "$overlay" "$plugin_build"' EXIT
ldflags="-s -w -X github.com/t9k-jobs/t9k-jobs/pkg/version.version=$VERSION -X github.com/t9k-jobs/t9k-jobs/pkg/version.revision=$(git rev-parse HEAD)"
platforms_yaml=""
plugins=()
for platform in $PLUGIN_PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  name="kubectl-t9k_${VERSION}_${os}_${arch}.tar.gz"
  mkdir -p "$plugin_build/$os-$arch"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$plugin_build/$os-$arch/kubectl-t9k" ./cmd/kubectl-t9k
  tar -C "$plugin_build/$os-$arch" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - kubectl-t9k | gzip -n > "$DIST/$name"
  sum=$(sha256sum "$DIST/$name" | cut -d' ' -f1)
  plugins+=("$name")
  platforms_yaml+="  - selector:
      matchLabels: {os: $os, arch: $arch}
    uri: $DOWNLOAD_URL/$name
    sha256: $sum
    bin: kubectl-t9k
"
done
cat > "$DIST/t9k.yaml" <<YAML
# krew manifest of kubectl t9k $VERSION: kubectl krew install --manifest=t9k.yaml
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: t9k
spec:
  version: $VERSION
  homepage: https://github.com/t9k-jobs/t9k-jobs
  shortDescription: Jobs of t9k-jobs' five kinds in one table, why they wait, their logs
  description: |
    kubectl t9k lists GenericJobs, MPIJobs, ColossalAIJobs, TensorFlowTrainingJobs and
    XGBoostTrainingJobs in one table, says why a job waits, failed or restarted, prints
    every replica's log interleaved, and pauses, resumes and resizes jobs.
  platforms:
$platforms_yaml
YAML
# The Helm chart, packaged with this release's image as its default: a copy whose links to
# manifests/ are made files (cp -L), its values naming the image by tag and digest.
chart_build=$(mktemp -d _output/release-chart.XXXXXX)
trap 'rm -rf "$overlay" "$plugin_build" "$chart_build"' EXIT
cp -rL charts/t9k-jobs "$chart_build/t9k-jobs"
sed -i -e "s|^  repository: .*|  repository: $IMAGE|" -e "s|^  tag: \"\"|  tag: \"$VERSION\"|" -e "s|^  digest: \"\"|  digest: \"$digest\"|" \
  "$chart_build/t9k-jobs/values.yaml"
chart_version=${VERSION#v}
go -C hack/tools/helm tool helm package "$(realpath "$chart_build/t9k-jobs")" --version "$chart_version" --app-version "$VERSION" \
  --destination "$(realpath "$DIST")" >/dev/null
grep -q "digest: \"$digest\"" "$chart_build/t9k-jobs/values.yaml" || {
  echo "release: the chart's values do not name $digest" >&2
  exit 1
}

(cd "$DIST" && sha256sum install.yaml "$(basename "$archive")" grafana-dashboard.json prometheus-alerts.yaml prometheusrule.yaml \
  "${plugins[@]}" t9k.yaml "t9k-jobs-$chart_version.tgz" > SHA256SUMS)
echo "release $VERSION in $DIST/: image $IMAGE:$VERSION@$digest"
cat "$DIST/SHA256SUMS"
