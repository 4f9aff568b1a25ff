package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// The -kueue mode: what queueing costs the controller, and what placing by topology adds.
// Each round runs the burst twice on fresh clusters with Kueue, in alternating order:
// "queued", the jobs in a LocalQueue of a flavor without a topology, and "topology", the
// same jobs in a LocalQueue of a flavor with one (rack, hostname: Kueue's implicit TAS places
// every pod set, its pods made gated and placed by Kueue's ungater). It reports, for both,
// the burst's time, latencies and the controller's writes per job by verb and resource.

// Queue modes of a controller run: no Kueue, a plain flavor, a flavor with a topology.
const (
	queueNone     = ""
	queuePlain    = "queued"
	queueTopology = "topology"
)

// benchQueue is the LocalQueue (in the jobs' namespace) and ClusterQueue of a queued run.
const benchQueue = "bench"

// benchRackKey labels the fake nodes by rack for the topology run.
const benchRackKey = "bench.t9k.dev/rack"

// startQueue starts Kueue on the cluster (before the controller, which looks for its API when
// it starts) and makes the run's queue: of the default flavor, or of one with a topology of
// the fake nodes, put two to a rack.
func startQueue(ctx context.Context, cl *cluster.Cluster, kube kubernetes.Interface, mode string) error {
	if err := cl.StartKueue(ctx, cluster.KueueOptions{}); err != nil {
		return err
	}
	if err := namespace(ctx, kube, jobNamespace); err != nil {
		return err
	}
	flavor := cluster.KueueResourceFlavor
	var manifests []string
	if mode == queueTopology {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return err
		}
		names := make([]string, 0, len(nodes.Items))
		for _, n := range nodes.Items {
			names = append(names, n.Name)
		}
		sort.Strings(names)
		for i, name := range names {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"rack-%d"}}}`, benchRackKey, i/2)
			if _, err := kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
		}
		flavor = "bench-topology"
		manifests = append(manifests, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: bench
spec:
  levels:
  - nodeLabel: %s
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: %s
spec:
  nodeLabels:
    type: kwok
  topologyName: bench`, benchRackKey, flavor))
	}
	manifests = append(manifests, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %[1]s
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: %[2]s
      resources:
      - {name: cpu, nominalQuota: "100000"}
      - {name: memory, nominalQuota: 100Ti}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: %[1]s
  namespace: %[3]s
spec:
  clusterQueue: %[1]s`, benchQueue, flavor, jobNamespace))
	_, err := cluster.CreateObjects(ctx, dynamic.NewForConfigOrDie(cl.Config), strings.Join(manifests, "\n---\n"))
	return err
}

// kueueRuns is the -kueue mode.
func kueueRuns(ctx context.Context, c config, dir string) error {
	fmt.Printf("\n%d queued GenericJobs x %d replicas (with services), without and with placement by topology; %d rounds\n",
		c.jobs, c.replicas, c.rounds)
	runs := map[string][]controllerRun{}
	for round := range c.rounds {
		order := []string{queuePlain, queueTopology}
		if round%2 == 1 {
			order = []string{queueTopology, queuePlain}
		}
		fmt.Printf("\nround %d of %d\n", round+1, c.rounds)
		for _, mode := range order {
			fmt.Printf("  %s:\n", mode)
			rc := c
			rc.queue = mode
			r, err := controllerPhase(ctx, rc, filepath.Join(dir, fmt.Sprintf("%d-%s", round+1, mode)), nil)
			if err != nil {
				return err
			}
			runs[mode] = append(runs[mode], r)
		}
	}
	fmt.Printf("\nsummary of %d rounds (medians; writes summed over the rounds)\n", c.rounds)
	for _, mode := range []string{queuePlain, queueTopology} {
		rs := runs[mode]
		total := requestCounts{}
		for _, r := range rs {
			for k, v := range r.requests {
				total[k] += v
			}
		}
		lats := make([]latencySummary, len(rs))
		for i, r := range rs {
			lats[i] = r.latencies
		}
		fmt.Printf("%s: %.1fs; %s\n", mode, medianOf(rs, func(r controllerRun) float64 { return r.elapsed.Seconds() }), medianLatencies(lats))
		fmt.Printf("  writes per job: %.2f\n", writesPerJob(total, c.jobs*len(rs)))
		var keys []string
		for k, n := range total {
			if f := strings.Fields(k); n > 0 && len(f) > 1 && isWrite(f[0]) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("    %-40s %6.2f\n", k, total[k]/float64(c.jobs*len(rs)))
		}
	}
	return nil
}
