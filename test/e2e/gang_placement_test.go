package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Placement with spec.scheduling (docs/gang.md, "Placement"): a gang kept in one rack, a gang
// preempted whole, a device claim shared by a gang. The local control plane turns on the
// gates they need (TopologyAwareWorkloadScheduling, DRAWorkloadResourceClaims); on fake
// nodes of each test's own.

// rackKey labels the racks of the topology test's nodes.
const rackKey = "test.batch.tensorstack.dev/rack"

// nodesOf maps each pod of prefix to its node, once all n are bound.
func nodesOf(t *testing.T, ns, prefix string, n int) map[string]string {
	t.Helper()
	waitBound(t, ns, prefix, n)
	nodes := map[string]string{}
	for _, p := range jobPods(t, ns, prefix) {
		nodes[p.Name] = p.Spec.NodeName
	}
	return nodes
}

// racksOf lists the racks the pods were placed in, each once, sorted.
func racksOf(pods map[string]string, rackOf map[string]string) []string {
	var racks []string
	for _, node := range pods {
		if !slices.Contains(racks, rackOf[node]) {
			racks = append(racks, rackOf[node])
		}
	}
	sort.Strings(racks)
	return racks
}

// TestGangPlacementTopology: a gang of 3 pods of 3 CPUs, on two racks: rack a of 2 nodes of
// 5 CPUs (room for 2 of the pods, and the scheduler's first choice: more room left on each),
// rack b of 3 nodes of 4 CPUs (room for all 3). Without a topology constraint the gang is
// placed across both racks; with spec.scheduling.schedulingConstraints.topology on the rack
// label, in rack b alone.
func TestGangPlacementTopology(t *testing.T) {
	parallel(t)
	skipWithoutGangs(t)
	ns := namespace(t)
	nodes := newGangNodes(t, ns)
	rackOf := map[string]string{}
	for _, rack := range []struct {
		name, cpu string
		nodes     int
	}{{ns + "-a", "5", 2}, {ns + "-b", "4", 3}} {
		for range rack.nodes {
			rackOf[nodes.addNode(rack.cpu, map[string]string{rackKey: rack.name})] = rack.name
		}
	}

	createJob(t, ns, gangJob(nodes, "spread", true))
	spread := nodesOf(t, ns, "spread-", 3)
	if racks := racksOf(spread, rackOf); len(racks) != 2 {
		t.Fatalf("without the constraint the gang went to racks %v (%v), want both: the test's racks do not show what the constraint does", racks, spread)
	}
	t.Logf("without a topology constraint: %v", spread)
	deleteJob(t, ns, "spread")

	job := gangJob(nodes, "rack", false)
	job.Spec.Scheduling = &batch.SchedulingConfiguration{
		SchedulingConstraints: &batch.PodGroupSchedulingConstraints{Topology: []batch.TopologyConstraint{{Key: rackKey}}},
	}
	createJob(t, ns, job)
	placed := nodesOf(t, ns, "rack-", 3)
	if racks := racksOf(placed, rackOf); len(racks) != 1 || racks[0] != ns+"-b" {
		t.Fatalf("with the rack constraint the gang went to racks %v (%v), want rack b alone", racks, placed)
	}
	t.Logf("with the rack constraint: %v", placed)
	pg, err := env.kube.SchedulingV1beta1().PodGroups(ns).Get(context.Background(), "genericjob-rack", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := pg.Spec.SchedulingConstraints; c == nil || len(c.Topology) != 1 || c.Topology[0].Key != rackKey || pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 3 {
		t.Errorf("PodGroup spec %+v, want a gang of 3 constrained to %s", pg.Spec, rackKey)
	}
	waitJob(t, ns, "rack", "running", inPhase(batch.JobRunning))
}

// priorityClass makes a PriorityClass of the test, deleted when it ends.
func priorityClass(t *testing.T, name string, value int32) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := env.kube.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// TestGangPlacementDisruptionAll: a low-priority gang of 3 pods of 3 CPUs runs on 3 nodes of
// 4 CPUs; a higher-priority gang of 2 such pods comes. With disruptionMode single (the
// contrast) the scheduler preempts the 2 pods it needs room for, and the third runs on. With
// disruptionMode all it preempts all 3, the one on the node the high gang does not need too:
// the low job records a disruption on every replica and counts no restart, and its new pods
// wait whole, none bound though one would fit. Once the high job goes, the low gang is placed
// whole again.
func TestGangPlacementDisruptionAll(t *testing.T) {
	parallel(t)
	skipWithoutGangs(t)
	ns := namespace(t)
	nodes := newGangNodes(t, ns)
	for range 3 {
		nodes.add()
	}
	priorityClass(t, ns+"-low", 1000)
	priorityClass(t, ns+"-high", 2000)

	// run starts a low gang, "<name>-low", with mode, then a high gang, "<name>-high", and
	// returns the low job once want of its replicas were disrupted and their new pods are
	// held back. Each run has jobs of its own names: a job deleted in the foreground stays a
	// while after its pods.
	run := func(name string, mode *batch.PodGroupDisruptionMode, want int) *batch.GenericJob {
		t.Helper()
		lowName, highName := name+"-low", name+"-high"
		low := gangJob(nodes, lowName, false)
		low.Spec.ReplicaSpecs[0].Template.Spec.PriorityClassName = ns + "-low"
		low.Spec.Scheduling = &batch.SchedulingConfiguration{DisruptionMode: mode}
		createJob(t, ns, low)
		lowNodes := nodesOf(t, ns, lowName+"-", 3)
		t.Logf("the low gang runs on %v", lowNodes)
		waitJob(t, ns, lowName, "running", inPhase(batch.JobRunning))
		// The high gang is kept off the first node, which it leaves free. The low pods on the
		// others take 3 s to go once deleted, as pods that take their grace period do, and the
		// one on the free node goes at once: a new pod made for it while the others still
		// terminate would be bound there alone (the scheduler counts the terminating pods
		// toward minCount), and the gang would not wait whole.
		free := nodes.names[0]
		for pod, node := range lowNodes {
			if node != free {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"3s"}}}`, deleteTimeAnnotation)
				if _, err := env.kube.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}

		high := gangJob(nodes, highName, true)
		high.Spec.ReplicaSpecs[0].Replicas = ptr.To[int32](2)
		high.Spec.ReplicaSpecs[0].Template.Spec.PriorityClassName = ns + "-high"
		high.Spec.ReplicaSpecs[0].Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpNotIn, Values: []string{free}}}}}}}}
		start := time.Now()
		createJob(t, ns, high)
		after := nodesOf(t, ns, highName+"-", 2)
		t.Logf("the high gang was bound on %v %s after it was made", after, time.Since(start).Round(time.Millisecond))
		// The low job's new pods, made for the disrupted ones, are held back once the
		// scheduler has done preempting.
		waitFor(t, "the low gang's new pods held back", jobTimeout, func(context.Context) (bool, error) {
			pods := jobPods(t, ns, lowName+"-")
			return len(pods) == 3 && len(slices.DeleteFunc(pods, func(p corev1.Pod) bool { return !heldBack(p) })) == want, nil
		})
		return waitJob(t, ns, lowName, "disrupted on replicas", func(j *batch.GenericJob) bool {
			n := 0
			for _, r := range j.Status.Tasks[0].Replicas {
				if r.Disruptions == 1 && r.LastTermination != nil && r.LastTermination.Disrupted {
					n++
				}
			}
			return n == want
		})
	}
	noRestart := func(j *batch.GenericJob) {
		t.Helper()
		for _, r := range j.Status.Tasks[0].Replicas {
			if r.RestartCount != 0 || r.Disruptions > 0 && r.LastTermination.Reason != "PreemptionByScheduler" {
				t.Errorf("replica %s: restartCount %d, last termination %+v; want no restart, preempted by the scheduler", r.Name, r.RestartCount, r.LastTermination)
			}
		}
		if j.Status.Restarts != 0 {
			t.Errorf("the job counts %d restarts, want none", j.Status.Restarts)
		}
	}

	// The contrast: disrupted one by one, the scheduler takes only what it needs.
	single := run("single", &batch.PodGroupDisruptionMode{Single: &batch.SingleDisruptionMode{}}, 2)
	noRestart(single)
	if bound := slices.DeleteFunc(jobPods(t, ns, "single-low-"), heldBack); len(bound) != 1 || bound[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("with disruptionMode single, low pods still bound: %d, want the one the high gang did not need, running", len(bound))
	}
	deleteJob(t, ns, "single-high")
	deleteJob(t, ns, "single-low")

	all := run("all", &batch.PodGroupDisruptionMode{All: &batch.AllDisruptionMode{}}, 3)
	noRestart(all)
	// The node the high gang left free has room for one of the low gang's new pods: the gang
	// waits whole instead.
	quiet(t, ns, "all-low-", 2*time.Second)
	// It is still in phase Running (it ran), saying that none of its replicas runs and why.
	if c := getJob(t, ns, "all-low").Status.Condition(batch.JobConditionRunning); c.Reason != corev1.PodReasonUnschedulable || !strings.Contains(c.Message, "0 of 3 replicas are running") {
		t.Errorf("the low job's Running condition %+v, want none of its replicas running, unschedulable", c)
	} else {
		t.Logf("the low job waits whole: %s", c.Message)
	}

	deleteJob(t, ns, "all-high")
	nodesOf(t, ns, "all-low-", 3)
	waitJob(t, ns, "all-low", "running again", inPhase(batch.JobRunning))
}

// TestGangPlacementSharedClaim: a job-level resource claim from a ResourceClaimTemplate
// (spec.scheduling.resourceClaims) is one ResourceClaim, made for the job's PodGroup and
// reserved for it, that every pod of the gang references and runs with. A DeviceClass and
// ResourceSlices of two fake GPUs on each of the test's nodes stand in for GPUs.
func TestGangPlacementSharedClaim(t *testing.T) {
	parallel(t)
	skipWithoutGangs(t)
	ctx := context.Background()
	ns := namespace(t)
	nodes := newGangNodes(t, ns)
	driver := ns + ".gpu.t9k.test"
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-gpu"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}
	if _, err := env.kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.ResourceV1().DeviceClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	for range 2 {
		node := nodes.add()
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"}, Spec: resourcev1.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}}}
		if _, err := env.kube.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.kube.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
		})
	}
	template := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpus"}, Spec: resourcev1.ResourceClaimTemplateSpec{
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}}
	if _, err := env.kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Pods of 1 CPU: the claim's device is on one node, so all three go there.
	job := gangJob(nodes, "shared", false)
	spec := &job.Spec.ReplicaSpecs[0].Template.Spec
	nodes.place(spec, "1")
	spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	job.Spec.Scheduling = &batch.SchedulingConfiguration{
		ResourceClaims: []batch.PodGroupResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpus")}},
	}
	createJob(t, ns, job)
	// Bound and running, by their nodes and phases: kube-scheduler 1.37 binds a gang's pods in
	// parallel, and the PreBind of each pod that shares the group's claim stores the same
	// allocation; the first one wins, the others find the claim allocated ("got allocated
	// elsewhere in the meantime", dynamicresources.go bindClaim), fail that binding cycle and
	// are bound on a retry, but the failure's PodScheduled False may be written after their
	// binding and stay on a running pod.
	placed := map[string]string{}
	waitFor(t, "shared- pods all bound and running", jobTimeout, func(context.Context) (bool, error) {
		pods := jobPods(t, ns, "shared-")
		for _, p := range pods {
			placed[p.Name] = p.Spec.NodeName
		}
		return len(pods) == 3 && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning }), nil
	})
	waitJob(t, ns, "shared", "running", inPhase(batch.JobRunning))
	for _, p := range jobPods(t, ns, "shared-") {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				t.Logf("pod %s runs on %s with a stale PodScheduled %s (%s: %s): the scheduler's race, above", p.Name, p.Spec.NodeName, c.Status, c.Reason, c.Message)
			}
		}
	}

	claims, err := env.kube.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 1 {
		t.Fatalf("%d ResourceClaims, want the PodGroup's one: %+v", len(claims.Items), claims.Items)
	}
	claim := claims.Items[0]
	const pgName = "genericjob-shared"
	if owner := metav1.GetControllerOf(&claim); owner == nil || owner.Kind != "PodGroup" || owner.Name != pgName {
		t.Errorf("claim %s is owned by %+v, want PodGroup %s", claim.Name, owner, pgName)
	}
	if claim.Status.Allocation == nil || !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
		return r.Resource == "podgroups" && r.Name == pgName
	}) {
		t.Errorf("claim %s: allocation %+v, reserved for %+v; want allocated and reserved for PodGroup %s", claim.Name, claim.Status.Allocation, claim.Status.ReservedFor, pgName)
	}
	pg, err := env.kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, pgName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := pg.Status.ResourceClaimStatuses; len(s) != 1 || s[0].Name != "gpus" || ptr.Deref(s[0].ResourceClaimName, "") != claim.Name {
		t.Errorf("PodGroup status.resourceClaimStatuses %+v, want gpus: %s", s, claim.Name)
	}
	device := ""
	if claim.Status.Allocation != nil && len(claim.Status.Allocation.Devices.Results) == 1 {
		r := claim.Status.Allocation.Devices.Results[0]
		device = r.Pool + "/" + r.Device
	}
	for _, p := range jobPods(t, ns, "shared-") {
		c := p.Spec.ResourceClaims
		if len(c) != 1 || c[0].Name != "gpus" || ptr.Deref(c[0].ResourceClaimTemplateName, "") != "gpus" {
			t.Errorf("pod %s claims %+v, want gpus from template gpus", p.Name, c)
		}
		if device != "" && !strings.HasPrefix(device, p.Spec.NodeName+"/") {
			t.Errorf("pod %s runs on %s, not where its claim's device %s is", p.Name, p.Spec.NodeName, device)
		}
	}
	t.Logf("one claim %s (device %s) for pods on %v", claim.Name, device, placed)
}
