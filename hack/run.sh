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
# As root, the cluster also has the real node (docs/testing.md, "The real node"), with the
# training image its pods run (built once, then cached).
real_node=
if [[ $(id -u) == 0 ]]; then
  if training=$(hack/lib/images.sh); then
    cluster_flags+=(--real-node --image "$training")
    real_node=1
  else
    echo "The real node is left out: the training image did not build (run hack/install-deps.sh for mmdebstrap)." >&2
  fi
fi
export KUBECONFIG
KUBECONFIG=$(go run ./hack/cluster up --dir "$CLUSTER_DIR" --bin-dir "$BIN" ${cluster_flags[@]+"${cluster_flags[@]}"})
controller_pid=
realnode_help=
kueue_help=
if [[ -n "$KUEUE" && "$KUEUE" != 0 ]]; then
  kueue_help="  kubectl get clusterqueue,localqueue,workloads -A   (Kueue; log: $CLUSTER_DIR/logs/kueue.log)
"
fi
cleanup() {
  [[ -n "$controller_pid" ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  go run ./hack/cluster down --dir "$CLUSTER_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_crds
mkdir -p _output
METRICS_ADDR=${METRICS_ADDR:-127.0.0.1:8080}
# The progress endpoint (docs/progress.md) listens on every address of this machine; the real
# node's pods reach it at the node's address, their gateway, for which its certificate is made.
PROGRESS_PORT=${PROGRESS_PORT:-10443}
controller_flags+=(--progress-bind-address ":$PROGRESS_PORT")
[[ -n $real_node ]] && controller_flags+=(--progress-url "https://10.245.0.1:$PROGRESS_PORT")
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

# A real run, where the machine allows it: the PyTorch example's gloo all-reduce on the real
# node, in real containers of the training image.
echo
if [[ -z $real_node ]]; then
  echo "Real run skipped: the real node needs root (and hack/install-deps.sh's packages)."
else
  echo "Running examples/pytorch for real on the real node (kubectl apply -k examples/pytorch); its replicas report each step"
  kubectl apply -k examples/pytorch
  last=
  for _ in $(seq 1 180); do
    now=$(kubectl get genericjob pytorch-allreduce -o jsonpath='{.status.phase}|{.status.progress.step}/{.status.progress.totalSteps}|{.status.progress.progressPercentage}')
    IFS='|' read -r phase steps percent <<<"$now"
    [[ "$now" != "$last" ]] && { echo "$(date +%T) pytorch-allreduce: ${phase:-(new)}${percent:+, step $steps, $percent%}"; last=$now; }
    [[ "$phase" == Succeeded || "$phase" == Failed ]] && break
    sleep 1
  done
  echo "rank 0's log (kubectl logs pytorch-allreduce-worker-0):"
  kubectl logs pytorch-allreduce-worker-0 | sed 's/^/  /'
  realnode_help="  kubectl apply -k examples/mpi; kubectl logs -f mpi-allreduce-launcher   (real runs on the real node)
  kubectl exec -it <pod on the real node> -- bash; kubectl port-forward <pod> 6006
"
fi
cat <<MSG

The controller runs on a local cluster (log: _output/controller.log, metrics: http://$METRICS_ADDR/metrics).
Use it from another shell:
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH
  kubectl get t9k
  kubectl describe genericjob generic-example
  kubectl apply -f examples/
${realnode_help}${kueue_help}Ctrl-C stops the controller and the cluster.
MSG
wait "$controller_pid"
