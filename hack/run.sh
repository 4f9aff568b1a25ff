#!/usr/bin/env bash
# make run: with $KUBECONFIG set, install the CRDs there and run the controller in the
# foreground. Without it, start the local control plane, install the CRDs, run the
# controller, submit the GenericJob examples and show their phases until they finish; the
# controller then keeps running until Ctrl-C, which also stops the cluster.
#
# KUEUE=1 (make run KUEUE=1): the local cluster also runs Kueue, with a ClusterQueue and a
# LocalQueue "default" in namespace default (docs/queueing.md), and the controller
# runs with --scheduler=kueue. With $KUBECONFIG, only the controller's flag changes: Kueue is
# that cluster's to install.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CLUSTER_DIR=${CLUSTER_DIR:-_output/cluster}
KUEUE=${KUEUE:-}
cluster_flags=()
controller_flags=()
if [[ -n "$KUEUE" && "$KUEUE" != 0 ]]; then
  cluster_flags=(--kueue)
  controller_flags=(--scheduler=kueue)
fi

go build -o bin/ ./cmd/t9k-job-controller

install_crds() {
  kubectl apply -f manifests/crds/
  kubectl wait --for=condition=Established --timeout=60s -f manifests/crds/ >/dev/null
}

if [[ -n "${KUBECONFIG:-}" ]]; then
  command -v kubectl >/dev/null || PATH="$(hack/lib/tools.sh):$PATH"
  install_crds
  exec bin/t9k-job-controller --kubeconfig "$KUBECONFIG" ${controller_flags[@]+"${controller_flags[@]}"}
fi

BIN=$(hack/lib/tools.sh)
export PATH="$BIN:$PATH"
export KUBECONFIG
KUBECONFIG=$(go run ./hack/cluster up --dir "$CLUSTER_DIR" --bin-dir "$BIN" ${cluster_flags[@]+"${cluster_flags[@]}"})
controller_pid=
procnode_pid=
procnode_help=
kueue_help=
if (( ${#cluster_flags[@]} )); then
  kueue_help="  kubectl get clusterqueue,localqueue,workloads -A   (Kueue; log: $CLUSTER_DIR/logs/kueue.log)
"
fi
cleanup() {
  [[ -n "$procnode_pid" ]] && kill "$procnode_pid" 2>/dev/null && wait "$procnode_pid" 2>/dev/null
  [[ -n "$controller_pid" ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  go run ./hack/cluster down --dir "$CLUSTER_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_crds
mkdir -p _output
METRICS_ADDR=${METRICS_ADDR:-127.0.0.1:8080}
bin/t9k-job-controller --kubeconfig "$KUBECONFIG" --bind-address "$METRICS_ADDR" ${controller_flags[@]+"${controller_flags[@]}"} >_output/controller.log 2>&1 &
controller_pid=$!
# /readyz says "ok" once the controller leads and its caches are synced.
until [[ $(curl -sf "http://$METRICS_ADDR/readyz" 2>/dev/null) == ok ]]; do
  kill -0 "$controller_pid" 2>/dev/null || { echo "the controller exited; see _output/controller.log" >&2; exit 1; }
  sleep 0.2
done

# The examples as documented. The local cluster's pods run until their annotations say how
# they end (docs/testing.md, "Fake nodes"), so the demo gives generic-example's pods 10 s and exit code 0;
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

# A real run, where the machine allows it: a process node (docs/testing.md, "The process node") and
# the PyTorch example's gloo all-reduce on it.
echo
if [[ $(id -u) != 0 ]]; then
  echo "Real run skipped: the process node needs root (and hack/install-deps.sh's packages)."
elif [[ ! -x /usr/bin/torchrun ]]; then
  echo "Real run skipped: run hack/install-deps.sh first (it installs PyTorch, OpenMPI and sshd from Debian)."
else
  go build -o bin/ ./hack/procnode
  STATE=$ROOT/_output/procnode
  # The node serves the kubelet API (kubectl logs, exec, port-forward) to the API server only:
  # the local cluster's CA issued its serving certificate and the API server's client one.
  bin/procnode --kubeconfig "$KUBECONFIG" --state-dir "$STATE" --port 0 --client-ca-file "$CLUSTER_DIR/pki/ca.crt" \
    --tls-cert-file "$CLUSTER_DIR/pki/kubelet.crt" --tls-private-key-file "$CLUSTER_DIR/pki/kubelet.key" >_output/procnode.log 2>&1 &
  procnode_pid=$!
  until kubectl get node procnode -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; do
    kill -0 "$procnode_pid" 2>/dev/null || { echo "the process node exited; see _output/procnode.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "Running examples/pytorch for real on the process node (kubectl apply -k examples/pytorch)"
  kubectl apply -k examples/pytorch
  last=
  for _ in $(seq 1 180); do
    phase=$(kubectl get genericjob pytorch-allreduce -o jsonpath='{.status.phase}')
    [[ "$phase" != "$last" ]] && { echo "$(date +%T) pytorch-allreduce: ${phase:-(new)}"; last=$phase; }
    [[ "$phase" == Succeeded || "$phase" == Failed ]] && break
    sleep 1
  done
  echo "rank 0's log (kubectl logs pytorch-allreduce-worker-0):"
  kubectl logs pytorch-allreduce-worker-0 | sed 's/^/  /'
  procnode_help="  kubectl apply -k examples/mpi; kubectl logs -f mpi-allreduce-launcher   (real runs on the process node)
  kubectl exec -it <pod on the process node> -- bash; kubectl port-forward <pod> 6006
"
fi
cat <<MSG

The controller runs on a local cluster (log: _output/controller.log, metrics: http://$METRICS_ADDR/metrics).
Use it from another shell:
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH
  kubectl get t9k
  kubectl describe genericjob generic-example
  kubectl apply -f examples/
${procnode_help}${kueue_help}Ctrl-C stops the controller and the cluster.
MSG
wait "$controller_pid"
