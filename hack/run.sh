#!/usr/bin/env bash
# make run: with $KUBECONFIG set, install the CRDs there and run the controller in the
# foreground. Without it, start the local control plane, install the CRDs, run the
# controller, submit the GenericJob examples and show their phases until they finish; the
# controller then keeps running until Ctrl-C, which also stops the cluster.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CLUSTER_DIR=${CLUSTER_DIR:-_output/cluster}

go build -o bin/ ./cmd/t9k-job-controller

install_crds() {
  kubectl apply -f manifests/crds/
  kubectl wait --for=condition=Established --timeout=60s -f manifests/crds/ >/dev/null
}

if [[ -n "${KUBECONFIG:-}" ]]; then
  command -v kubectl >/dev/null || PATH="$(hack/lib/tools.sh):$PATH"
  install_crds
  exec bin/t9k-job-controller --kubeconfig "$KUBECONFIG"
fi

BIN=$(hack/lib/tools.sh)
export PATH="$BIN:$PATH"
export KUBECONFIG
KUBECONFIG=$(go run ./hack/cluster up --dir "$CLUSTER_DIR" --bin-dir "$BIN")
controller_pid=
cleanup() {
  [[ -n "$controller_pid" ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  go run ./hack/cluster down --dir "$CLUSTER_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_crds
mkdir -p _output
METRICS_ADDR=${METRICS_ADDR:-127.0.0.1:8080}
bin/t9k-job-controller --kubeconfig "$KUBECONFIG" --bind-address "$METRICS_ADDR" >_output/controller.log 2>&1 &
controller_pid=$!
until curl -sf "http://$METRICS_ADDR/readyz" >/dev/null 2>&1; do
  kill -0 "$controller_pid" 2>/dev/null || { echo "the controller exited; see _output/controller.log" >&2; exit 1; }
  sleep 0.2
done

# The examples as documented. The local cluster's pods run until their annotations say how
# they end (README, Testing), so the demo gives generic-example's pods 10 s and exit code 0;
# generic-tf-config.yaml fails at once, as published, for want of spec.service.
echo
echo "Submitting examples/generic-example.yaml (its pods end after 10s) and examples/generic-tf-config.yaml (as published)"
sed 's|^      template:$|      template:\n        metadata:\n          annotations: {test.batch.tensorstack.dev/exit-code: "0", test.batch.tensorstack.dev/run-time: "10s"}|' \
  examples/generic-example.yaml | kubectl apply -f -
sed 's|^  name: generic-example$|  name: generic-tf-config|' examples/generic-tf-config.yaml | kubectl apply -f -

last=
for _ in $(seq 1 120); do
  now=$(kubectl get genericjobs --no-headers=false -o custom-columns='NAME:.metadata.name,PHASE:.status.phase,RUNNING:.status.aggregate.running,SUCCEEDED:.status.aggregate.succeeded,FAILED:.status.aggregate.failed' 2>/dev/null)
  [[ "$now" != "$last" ]] && { echo; date +%T; echo "$now"; last=$now; }
  phases=$(kubectl get genericjobs -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}')
  grep -qvE '^(Succeeded|Failed)$' <<<"$phases" || break
  sleep 1
done
echo
kubectl get genericjob generic-tf-config -o jsonpath='generic-tf-config: {.status.conditions[?(@.type=="Failed")].message}{"\n"}'
cat <<MSG

The controller runs on a local cluster (log: _output/controller.log, metrics: http://$METRICS_ADDR/metrics).
Use it from another shell:
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH
  kubectl get t9k
  kubectl describe genericjob generic-example
  kubectl apply -f examples/
Ctrl-C stops the controller and the cluster.
MSG
wait "$controller_pid"
