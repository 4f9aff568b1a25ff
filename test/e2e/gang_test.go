package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/gang"
)

// Jobs asked to start whole (docs/queueing.md, "Gang scheduling"): kube-scheduler's own gang
// scheduling, on fake nodes of 4 CPUs of each test's own. The local control plane turns it
// on; another cluster may not, and the tests skip there.

// gangJob is a GenericJob of 3 replicas of 3 CPUs, placed on the test's nodes; gang asks for
// it to start whole.
func gangJob(nodes *gangNodes, name string, wantGang bool) *batch.GenericJob {
	r := replica("worker", "trainer")
	r.Replicas = ptr.To[int32](3)
	nodes.place(&r.Template.Spec, "3")
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
	if wantGang {
		job.Annotations = map[string]string{gang.AnnotationGang: "true"}
	}
	return job
}

func skipWithoutGangs(t *testing.T) {
	t.Helper()
	if env.cluster == nil {
		t.Skip("gang scheduling is on in the local control plane only")
	}
}

// heldBack reports whether the scheduler tried the pod and did not bind it.
func heldBack(p corev1.Pod) bool {
	return p.Spec.NodeName == "" && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse
	})
}

// waitHeldBack waits until the scheduler has tried each of n pods and bound none of them.
func waitHeldBack(t *testing.T, ns, prefix string, n int) {
	t.Helper()
	waitFor(t, prefix+" pods held back by the scheduler", jobTimeout, func(context.Context) (bool, error) {
		pods := jobPods(t, ns, prefix)
		return len(pods) == n && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return !heldBack(p) }), nil
	})
}

// quiet checks, for a short while, that no pod of prefix is bound.
func quiet(t *testing.T, ns, prefix string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, p := range jobPods(t, ns, prefix) {
			if p.Spec.NodeName != "" {
				t.Fatalf("pod %s was bound to %s though its gang does not fit", p.Name, p.Spec.NodeName)
			}
		}
	}
}

// waitBound returns when each pod of prefix was bound, once all n are.
func waitBound(t *testing.T, ns, prefix string, n int) []time.Time {
	t.Helper()
	var times []time.Time
	waitFor(t, prefix+" pods all bound", jobTimeout, func(context.Context) (bool, error) {
		times = nil
		for _, p := range jobPods(t, ns, prefix) {
			for _, c := range p.Status.Conditions {
				if p.Spec.NodeName != "" && c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
					times = append(times, c.LastTransitionTime.Time)
				}
			}
		}
		return len(times) == n, nil
	})
	return times
}

// TestGangGenericJob: a job of 3 replicas of 3 CPUs asked to start whole, on 2 nodes of 4
// CPUs, has no pod bound, though 2 would fit, and says why; a third node, and all 3 are bound
// together. Without the gang, 2 are bound and 1 waits. A replica of a running gang that fails
// and is restarted is bound again at once: the 2 that run count toward its gang's quorum.
func TestGangGenericJob(t *testing.T) {
	parallel(t)
	skipWithoutGangs(t)
	ns := namespace(t)
	nodes := newGangNodes(t, ns)
	nodes.add()
	nodes.add()

	createJob(t, ns, gangJob(nodes, "whole", true))
	waitHeldBack(t, ns, "whole-", 3)
	quiet(t, ns, "whole-", 2*time.Second)
	if why := jobEvent(t, ns, "whole", "GangUnschedulable"); !strings.Contains(why, "whole") {
		t.Errorf("GangUnschedulable says %q, want the PodGroup named", why)
	}
	// The job's Running condition names the replicas held back and quotes the scheduler.
	waiting := waitJob(t, ns, "whole", "saying why it waits", func(j *batch.GenericJob) bool {
		c := j.Status.Condition(batch.JobConditionRunning)
		return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			strings.Contains(c.Message, "worker-0") &&
			(strings.Contains(c.Message, "minCount") || strings.Contains(c.Message, "Insufficient cpu"))
	})
	t.Logf("the job waits: %s", waiting.Status.Condition(batch.JobConditionRunning).Message)
	nodes.add()
	times := waitBound(t, ns, "whole-", 3)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	if spread := times[2].Sub(times[0]); spread > 3*time.Second {
		t.Errorf("the gang was bound over %s, want at once", spread)
	}
	waitJob(t, ns, "whole", "running", inPhase(batch.JobRunning))
	deleteJob(t, ns, "whole")

	// The same job without the gang, on 2 nodes: 2 bound, 1 waits.
	nodes.remove()
	createJob(t, ns, gangJob(nodes, "piecemeal", false))
	waitFor(t, "2 pods bound and 1 held back", jobTimeout, func(context.Context) (bool, error) {
		pods := jobPods(t, ns, "piecemeal-")
		bound := slices.DeleteFunc(slices.Clone(pods), heldBack)
		return len(pods) == 3 && len(bound) == 2, nil
	})
	deleteJob(t, ns, "piecemeal")

	// A restarted replica of a running gang.
	nodes.add()
	job := gangJob(nodes, "restarts", true)
	job.Spec.ReplicaSpecs[0].Replicas = ptr.To[int32](2)
	flaky := replica("flaky", "trainer")
	nodes.place(&flaky.Template.Spec, "3")
	exits(&flaky, 1, "2s")
	flaky.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure}
	job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, flaky)
	createJob(t, ns, job)
	first := waitBound(t, ns, "restarts-flaky-", 1)
	firstUID := jobPods(t, ns, "restarts-flaky-")[0].UID
	waitJob(t, ns, "restarts", "restarting its flaky replica, bound again", func(j *batch.GenericJob) bool {
		for _, task := range j.Status.Tasks {
			for _, r := range task.Replicas {
				if task.Type == "flaky" && r.RestartCount >= 1 {
					// The restart is written before the old pod is deleted: wait for the new one.
					pods := jobPods(t, ns, "restarts-flaky-")
					return len(pods) == 1 && pods[0].UID != firstUID && pods[0].Spec.NodeName != ""
				}
			}
		}
		return false
	})
	if again := waitBound(t, ns, "restarts-flaky-", 1); !again[0].After(first[0]) {
		t.Errorf("the restarted replica's pod was bound at %s, not after the first (%s)", again[0], first[0])
	}
	for _, p := range jobPods(t, ns, "restarts-worker-") {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("worker %s is %s on %q, want running throughout", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
}

// TestGangMPIJob: a gang MPIJob (3 workers of 3 CPUs, and its launcher, made from the same
// template) that does not fit starts nothing, not its workers alone; with room for the
// workers and the launcher, it runs to Succeeded.
func TestGangMPIJob(t *testing.T) {
	parallel(t)
	skipWithoutGangs(t)
	ns := namespace(t)
	nodes := newGangNodes(t, ns)
	nodes.add()
	nodes.add()
	job := &batch.MPIJob{}
	if err := examples.Decode("mpi-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	job.Annotations = map[string]string{gang.AnnotationGang: "true"}
	job.Spec.Worker.Replicas = ptr.To[int32](3)
	nodes.place(&job.Spec.Worker.Template.Spec, "3")
	launcherExits(&job.Spec.Worker.Template, "0")
	if _, err := env.jobs.BatchV1beta1().MPIJobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHeldBack(t, ns, job.Name+"-worker-", 3)
	quiet(t, ns, job.Name+"-", 2*time.Second)
	if launchers := jobPods(t, ns, job.Name+"-launcher"); len(launchers) != 0 {
		t.Fatalf("a launcher %s before its workers run", launchers[0].Name)
	}
	// Room for the 3 workers (a node each), then for the launcher.
	nodes.add()
	nodes.add()
	waitStatus(t, "Succeeded", mpiStatus(ns, job.Name), func(s *batch.JobStatus) bool { return s.Phase == batch.JobSucceeded })
}

// TestGangMinCountChange: a gang that does not fit (3 pods of 3 CPUs, 2 nodes of 4) is given a
// lower spec.scheduling.schedulingPolicy.gang.minCount while it waits: its unplaced pods and its
// PodGroup are made again with the new count, though kube-controller-manager keeps a PodGroup
// any pod joins, and 2 pods are bound. Raised again while those run, the count waits: the
// PodGroup keeps 2, the running pods keep their UIDs, and an event says so (docs/gang.md, "A
// new minCount").
func TestGangMinCountChange(t *testing.T) {
	parallel(t)
	skipWithoutGangs(t)
	ns := namespace(t)
	nodes := newGangNodes(t, ns)
	nodes.add()
	nodes.add()
	job := gangJob(nodes, "regroup", false)
	job.Spec.Scheduling = &batch.SchedulingConfiguration{SchedulingPolicy: &batch.PodGroupSchedulingPolicy{Gang: &batch.GangSchedulingPolicy{MinCount: ptr.To[int32](3)}}}
	createJob(t, ns, job)
	waitHeldBack(t, ns, "regroup-", 3)

	setMinCount := func(n int) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"scheduling":{"schedulingPolicy":{"gang":{"minCount":%d}}}}}`, n)
		if _, err := env.jobs.BatchV1beta1().GenericJobs(ns).Patch(context.Background(), "regroup", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setMinCount(2)
	waitFor(t, "the PodGroup made again with minCount 2, and 2 pods bound", jobTimeout, func(ctx context.Context) (bool, error) {
		pg, err := env.kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, "genericjob-regroup", metav1.GetOptions{})
		if err != nil || pg.DeletionTimestamp != nil || pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 2 {
			return false, nil
		}
		pods := jobPods(t, ns, "regroup-")
		return len(pods) == 3 && len(slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool { return p.Spec.NodeName == "" })) == 2, nil
	})
	if why := jobEvent(t, ns, "regroup", "GangChanging"); !strings.Contains(why, "minCount 3, now 2") {
		t.Errorf("GangChanging says %q, want the change", why)
	}

	running := map[string]types.UID{}
	for _, p := range jobPods(t, ns, "regroup-") {
		if p.Spec.NodeName != "" {
			running[p.Name] = p.UID
		}
	}
	setMinCount(3)
	if why := jobEvent(t, ns, "regroup", "GangChangePending"); !strings.Contains(why, "keeps minCount 2") {
		t.Errorf("GangChangePending says %q, want the PodGroup's count kept", why)
	}
	pg, err := env.kube.SchedulingV1beta1().PodGroups(ns).Get(context.Background(), "genericjob-regroup", metav1.GetOptions{})
	if err != nil || pg.DeletionTimestamp != nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 2 {
		t.Fatalf("the running gang's PodGroup: %v, %+v; want it kept with minCount 2", err, pg)
	}
	for name, uid := range running {
		if p := getPod(t, ns, name); p.UID != uid || p.DeletionTimestamp != nil {
			t.Errorf("%s was replaced or is being deleted for the new count", name)
		}
	}
}
