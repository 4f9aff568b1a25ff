package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
)

// Kueue's topology-aware scheduling (docs/queueing.md, "Placement by topology"), on fake
// nodes of 4 CPUs labelled by rack, a Topology of rack and hostname, and a ResourceFlavor of
// it that only the test's nodes have.

// tasRackKey is the node label of the tests' racks.
const tasRackKey = "test.batch.tensorstack.dev/tas-rack"

// tasCluster is one test's racks of nodes and the LocalQueue (named as its namespace) whose
// flavor places jobs on them by topology.
type tasCluster struct {
	ns    string
	nodes *gangNodes
	// racks lists each rack's nodes, in the order Kueue sorts domains (by name).
	racks map[string][]string
}

// newTASCluster makes the racks (name: node count), a Topology rack/hostname, a flavor of
// it with the nodes' label and toleration, and a ClusterQueue whose quota is not the limit:
// the topology is.
func newTASCluster(t *testing.T, racks map[string]int) *tasCluster {
	t.Helper()
	useKueue(t)
	c := &tasCluster{ns: namespace(t), racks: map[string][]string{}}
	c.nodes = newGangNodes(t, c.ns)
	for _, rack := range slices.Sorted(maps.Keys(racks)) {
		for range racks[rack] {
			c.racks[rack] = append(c.racks[rack], c.nodes.addNode("4", map[string]string{tasRackKey: rack}))
		}
	}
	createKueueObjects(t, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: %[1]s
spec:
  levels:
  - nodeLabel: %[2]s
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: %[1]s
spec:
  nodeLabels:
    %[3]s: %[1]s
  tolerations:
  - {key: %[3]s, operator: Equal, value: %[1]s, effect: NoSchedule}
  topologyName: %[1]s`, c.ns, tasRackKey, gangNodeKey))
	queueOfFlavor(t, c.ns, c.ns, 100)
	return c
}

// rackOf is the rack of a node of the test.
func (c *tasCluster) rackOf(node string) string {
	for rack, nodes := range c.racks {
		if slices.Contains(nodes, node) {
			return rack
		}
	}
	return ""
}

// tasJob is a GenericJob in the test's queue of n workers of 3 CPUs (one per node) that run
// until deleted, whose template has the annotations.
func (c *tasCluster) tasJob(name string, n int32, annotations map[string]string) *batch.GenericJob {
	job := queuedJob(name, c.ns, n, "")
	tmpl := &job.Spec.ReplicaSpecs[0].Template
	delete(tmpl.Annotations, exitCodeAnnotation)
	for k, v := range annotations {
		tmpl.Annotations[k] = v
	}
	tmpl.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	return job
}

// nodesByRank waits until the job's n workers are bound and returns their nodes, by rank.
func nodesByRank(t *testing.T, ns, prefix string, n int) []string {
	t.Helper()
	var nodes []string
	waitFor(t, fmt.Sprintf("%d pods %s* bound", n, prefix), jobTimeout, func(ctx context.Context) (bool, error) {
		nodes = make([]string, n)
		bound := 0
		for _, p := range jobPods(t, ns, prefix) {
			var rank int
			if _, err := fmt.Sscan(p.Labels[batch.LabelReplicaIndex], &rank); err != nil || rank >= n || p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
				continue
			}
			nodes[rank] = p.Spec.NodeName
			bound++
		}
		return bound == n, nil
	})
	return nodes
}

// TestKueueTopologyRequiredRack: a job whose workers must share a rack lands in the one rack
// with room for all of them, though the other has room for part; its ranks follow the
// assignment (worker-i on the i-th node of the rack, as Kueue orders its domains); its
// pods were made gated and given their node by Kueue's ungater; the Admitted event says
// where. The controller wrote no pod after creating it.
func TestKueueTopologyRequiredRack(t *testing.T) {
	c := newTASCluster(t, map[string]int{"r1": 2, "r2": 3})
	parallel(t)
	client := useKueue(t)
	job := c.tasJob("train", 3, map[string]string{kueue.AnnotationRequiredTopology: tasRackKey})
	createJob(t, c.ns, job)
	nodes := nodesByRank(t, c.ns, "train-worker-", 3)
	if !slices.Equal(nodes, c.racks["r2"]) {
		t.Fatalf("workers by rank on %v, want rack r2's nodes in order %v", nodes, c.racks["r2"])
	}
	wl := workloadOf(t, client, c.ns, "genericjob-train")
	if r := wl.Spec.PodSets[0].TopologyRequest; r == nil || ptr.Deref(r.Required, "") != tasRackKey || ptr.Deref(r.PodIndexLabel, "") != batch.LabelReplicaIndex {
		t.Errorf("the Workload's topology request %+v: want required %s by %s", r, tasRackKey, batch.LabelReplicaIndex)
	}
	for _, p := range jobPods(t, c.ns, "train-worker-") {
		if len(p.Spec.SchedulingGates) != 0 || p.Spec.NodeSelector["kubernetes.io/hostname"] != p.Spec.NodeName ||
			p.Labels[kueue.LabelPodSet] != "worker" || p.Annotations[kueue.AnnotationWorkload] != wl.Name {
			t.Errorf("pod %s: gates %v, nodeSelector %v, on %s: want the ungater's node in its selector, its gate gone, marked with pod set and Workload",
				p.Name, p.Spec.SchedulingGates, p.Spec.NodeSelector, p.Spec.NodeName)
		}
		for _, f := range p.ManagedFields {
			if f.Manager == "t9k-job-controller" && f.Operation == metav1.ManagedFieldsOperationUpdate && f.Subresource == "" && f.Time != nil && f.Time.After(p.CreationTimestamp.Add(time.Second)) {
				t.Errorf("pod %s: the controller updated it after creating it (%v)", p.Name, f)
			}
		}
	}
	waitJob(t, c.ns, "train", "running", inPhase(batch.JobRunning))
	if admitted := jobEvent(t, c.ns, "train", "Admitted"); !strings.Contains(admitted, "placed by topology: worker in kubernetes.io/hostname: "+c.racks["r2"][0]+" (1)") {
		t.Errorf("the Admitted event does not say where the workers go: %q", admitted)
	}
}

// TestKueueTopologyTooBig: a job whose workers must share a rack, and no rack has room for
// them all, stays Queued with Kueue's own topology message, and nothing is made.
func TestKueueTopologyTooBig(t *testing.T) {
	c := newTASCluster(t, map[string]int{"r1": 2, "r2": 2})
	parallel(t)
	createJob(t, c.ns, c.tasJob("big", 3, map[string]string{kueue.AnnotationRequiredTopology: tasRackKey}))
	j := waitJob(t, c.ns, "big", "queued with Kueue's topology message", func(j *batch.GenericJob) bool {
		return strings.Contains(j.Status.Condition(batch.JobConditionRunning).Message, "allows to fit only 2 out of 3 pod(s)")
	})
	if running := j.Status.Condition(batch.JobConditionRunning); j.Status.Phase != batch.JobPending || running.Reason != "Queued" {
		t.Errorf("phase %s, Running %+v: want Pending, Queued", j.Status.Phase, running)
	}
	if pods := jobPods(t, c.ns, "big-"); len(pods) != 0 {
		t.Errorf("%d pods of a job Kueue cannot place", len(pods))
	}
}

// TestKueueTopologyMPIJobLauncher: an MPIJob's workers and launcher are two pod sets, each
// placed by its own template's request. The launcher, made once the workers are Ready, is
// gated too, and the ungater gives it the node of its own pod set's assignment; the
// workers share the one rack with room for both.
func TestKueueTopologyMPIJobLauncher(t *testing.T) {
	c := newTASCluster(t, map[string]int{"r1": 1, "r2": 3})
	parallel(t)
	client := useKueue(t)
	job := &batch.MPIJob{}
	if err := examples.Decode("mpi-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	job.Labels = map[string]string{kueue.LabelQueueName: c.ns}
	job.Spec.Worker.Replicas = ptr.To[int32](2)
	worker := &job.Spec.Worker.Template
	worker.Annotations = map[string]string{kueue.AnnotationRequiredTopology: tasRackKey}
	for i := range worker.Spec.Containers {
		worker.Spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
	}
	launcherExits(worker, "0")
	if _, err := env.jobs.BatchV1beta1().MPIJobs(c.ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	workers := nodesByRank(t, c.ns, job.Name+"-worker-", 2)
	if !slices.Equal(workers, c.racks["r2"][:2]) {
		t.Errorf("workers by rank on %v, want rack r2's first nodes %v", workers, c.racks["r2"][:2])
	}
	launcher := nodesByRank(t, c.ns, job.Name+"-launcher", 1)[0]
	wl := workloadOf(t, client, c.ns, "mpijob-"+job.Name)
	var assigned string
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name == "launcher" && psa.TopologyAssignment != nil && len(psa.TopologyAssignment.Slices) == 1 {
			v := psa.TopologyAssignment.Slices[0].ValuesPerLevel[0]
			assigned = ptr.Deref(v.Universal, "")
			if v.Individual != nil {
				assigned = ptr.Deref(v.Individual.Prefix, "") + v.Individual.Roots[0] + ptr.Deref(v.Individual.Suffix, "")
			}
		}
	}
	if assigned == "" || launcher != assigned {
		t.Errorf("launcher on %s, want the node of its pod set's topology assignment (%q)", launcher, assigned)
	}
	for _, p := range jobPods(t, c.ns, job.Name+"-launcher") {
		if p.Labels[kueue.LabelPodSet] != "launcher" || p.Annotations[kueue.AnnotationUnconstrainedTopology] != "true" {
			t.Errorf("launcher pod: labels %v, annotations %v: want pod set launcher, placed unconstrained (its template asks nothing)", p.Labels, p.Annotations)
		}
	}
	waitStatus(t, "Succeeded", mpiStatus(c.ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded })
}

// TestKueueTopologyNodeHotSwap: a worker's node is tainted (NoExecute) while the job runs.
// Kubernetes evicts the worker; the controller replaces it (a disruption, no restart) with a
// gated pod; Kueue, seeing no pod of the job left on the tainted node, moves its domain to a
// node with room in the same rack, and the ungater puts the new pod there. Should the
// ungater give the replacement the tainted node before Kueue marked it (a race of Kueue's
// own), Kueue fails that pod (TerminatedByKueue), which is one more disruption, not a
// restart.
func TestKueueTopologyNodeHotSwap(t *testing.T) {
	c := newTASCluster(t, map[string]int{"r1": 3})
	parallel(t)
	createJob(t, c.ns, c.tasJob("swap", 2, map[string]string{kueue.AnnotationRequiredTopology: tasRackKey}))
	nodes := nodesByRank(t, c.ns, "swap-worker-", 2)
	j := waitJob(t, c.ns, "swap", "running", inPhase(batch.JobRunning))
	old := replicaStatusOf(j, "swap-worker-1").UID
	bad := nodes[1]
	if _, err := env.kube.CoreV1().Nodes().Patch(context.Background(), bad, types.MergePatchType,
		[]byte(`{"spec":{"taints":[{"key":"`+gangNodeKey+`","value":"`+c.ns+`","effect":"NoSchedule"},{"key":"test.batch.tensorstack.dev/broken","effect":"NoExecute"}]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, c.ns, "swap", "worker-1 replaced, running off the tainted node", func(j *batch.GenericJob) bool {
		r := replicaStatusOf(j, "swap-worker-1")
		return j.Status.Phase == batch.JobRunning && r.UID != old && r.Phase == batch.ReplicaRunning && r.Node != "" && r.Node != bad && r.Disruptions >= 1
	})
	r := replicaStatusOf(j, "swap-worker-1")
	if r.RestartCount != 0 || r.LastTermination == nil || !r.LastTermination.Disrupted {
		t.Errorf("worker-1 after Kueue's node swap: restarts %d, last termination %+v; want no restart, disrupted", r.RestartCount, r.LastTermination)
	}
	moved := nodesByRank(t, c.ns, "swap-worker-", 2)
	if moved[1] == bad || c.rackOf(moved[1]) != "r1" || moved[0] != nodes[0] {
		t.Errorf("after the taint: workers on %v (were %v): want worker-1 moved off %s within rack r1, worker-0 where it was", moved, nodes, bad)
	}
	if w0 := replicaStatusOf(j, "swap-worker-0"); w0.Disruptions != 0 || w0.RestartCount != 0 {
		t.Errorf("worker-0, on a good node: %d disruptions, %d restarts; want none", w0.Disruptions, w0.RestartCount)
	}
}

// TestKueuePodSetLimitOfTheCluster: the controller reads the cluster's Workload CRD for how
// many pod sets Kueue takes (18 on v0.19, 8 before): a GenericJob of 16 replica types, the
// most its API allows, is queued as 16 pod sets, admitted and runs whole.
func TestKueuePodSetLimitOfTheCluster(t *testing.T) {
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	queue := queueFor(t, ns, 40)
	job := queuedJob("sixteen", queue, 1, "")
	one := job.Spec.ReplicaSpecs[0]
	delete(one.Template.Annotations, exitCodeAnnotation)
	job.Spec.ReplicaSpecs = nil
	for i := range 16 {
		r := *one.DeepCopy()
		r.Type = fmt.Sprintf("t%d", i)
		job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, r)
	}
	createJob(t, ns, job)
	running := waitJob(t, ns, job.Name, "running, its 16 pod sets admitted", inPhase(batch.JobRunning))
	if wl := workloadOf(t, client, ns, "genericjob-"+job.Name); len(wl.Spec.PodSets) != 16 {
		t.Errorf("the Workload has %d pod sets, want 16", len(wl.Spec.PodSets))
	}
	if n := len(jobPods(t, ns, job.Name+"-")); n != 16 || running.Status.Phase != batch.JobRunning {
		t.Errorf("%d pods, want one per replica type", n)
	}
}
