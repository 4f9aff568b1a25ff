package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// unusableTaint makes the real node unusable for the pods that do not tolerate it: the
// taint-eviction controller evicts them at once, and no new one is placed there.
var unusableTaint = corev1.Taint{Key: "test.batch.tensorstack.dev/unusable", Value: "true", Effect: corev1.TaintEffectNoExecute}

// TestRealInPlaceRestartInKueueWithANodeGoneBad: the three-rank gloo job of
// TestRealWholeJobRestart, restarting in place, admitted by Kueue, whose third rank's node
// becomes unusable in the middle of the restart. There is one real node, so "its node" is the
// real node as that pod sees it: a NoExecute taint that the two other ranks' pods tolerate and
// the third's does not, put on once the controller has begun the restart (the pods carry the
// next attempt) and lifted once the pod is evicted, as a node repaired; the pod made again for
// the third rank is placed there then.
//
// The third rank's pod is made again behind the same barrier; the two others restart in place
// (same UIDs, each container restarted once by the kubelet). The job restarts once, in attempt
// 2, and succeeds with the second life's all-reduce. Its Workload stays the same, admitted
// throughout: never evicted nor requeued, its Admitted condition unchanged since admission.
func TestRealInPlaceRestartInKueueWithANodeGoneBad(t *testing.T) {
	client := useKueue(t)
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage, agentImage)
	ctx := context.Background()
	allreduceScripts(t, ns)
	run := ddpByType(t, ns, "ddp-bad-node", queueFor(t, ns, 2))
	workload := watchWorkload(t, ns, "genericjob-"+run.job.Name)
	createJob(t, ns, run.job)
	before := podsByName(t, ns, run.job.Name, 3)
	admitted := workloadOf(t, client, ns, "genericjob-"+run.job.Name)
	third := before[run.names[2]]

	// The restart has begun once the controller writes attempt 2 to the pods' labels.
	waitReal(t, "the third rank's pod labelled with attempt 2", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, third.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.UID != third.UID || p.Labels[batch.LabelAttempt] != "1" && p.Labels[batch.LabelAttempt] != "2" {
			return false, fmt.Errorf("the third rank's pod is %s, attempt %s: want %s to be restarted", p.UID, p.Labels[batch.LabelAttempt], third.UID)
		}
		return p.Labels[batch.LabelAttempt] == "2", nil
	})
	released := func(p *corev1.Pod) bool { return p.Annotations[batch.AnnotationReleasedAttempt] == "2" }
	if p, err := env.kube.CoreV1().Pods(ns).Get(ctx, third.Name, metav1.GetOptions{}); err != nil || released(p) {
		t.Fatalf("the third rank's pod was released into attempt 2 before its node went bad (%v): the test came too late", err)
	}
	taintRealNode(t, true)
	t.Cleanup(func() { taintRealNode(t, false) })
	waitReal(t, "the third rank's pod evicted", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, third.Name, metav1.GetOptions{})
		return err != nil || p.UID != third.UID || p.DeletionTimestamp != nil, nil
	})
	taintRealNode(t, false)

	done := run.check(t, ns, "RestartedWithJob")
	after := podsByName(t, ns, run.job.Name, 3)
	for _, name := range run.names[:2] {
		a, b := after[name], before[name]
		if a.UID != b.UID || a.Spec.NodeName != b.Spec.NodeName || a.Status.PodIP != b.Status.PodIP {
			t.Errorf("%s: before the restart %s at %s, after %s at %s; want the same pod", name, b.UID, b.Status.PodIP, a.UID, a.Status.PodIP)
		}
		for _, c := range a.Status.ContainerStatuses {
			if c.RestartCount != 1 {
				t.Errorf("%s, container %s: restarted %d times by the kubelet, want once", name, c.Name, c.RestartCount)
			}
		}
	}
	if a := after[third.Name]; a.UID == third.UID || a.Labels[batch.LabelAttempt] != "2" {
		t.Errorf("%s: pod %s of attempt %s after the restart; want a new pod of attempt 2 for the one evicted (%s)", third.Name, a.UID, a.Labels[batch.LabelAttempt], third.UID)
	}
	if rs := replicaStatusOf(done, third.Name); rs.UID == third.UID {
		t.Errorf("%s's status names its evicted pod %s", third.Name, rs.UID)
	}
	if ev, ok := eventsSaying(t, ns, run.job.Name, "RestartingInPlace: Restarting pods in place for attempt 2", "Released: Every pod's attempt 1 is down"); !ok {
		t.Errorf("no RestartingInPlace and Released events:\n%s", ev)
	}

	// Kueue: the same Workload, admitted once and never since evicted or requeued.
	end := workloadOf(t, client, ns, "genericjob-"+run.job.Name)
	was, is := meta.FindStatusCondition(admitted.Status.Conditions, kueue.WorkloadAdmitted), meta.FindStatusCondition(end.Status.Conditions, kueue.WorkloadAdmitted)
	if end.UID != admitted.UID || was == nil || is == nil || was.Status != metav1.ConditionTrue || is.Status != metav1.ConditionTrue || !is.LastTransitionTime.Equal(&was.LastTransitionTime) {
		t.Errorf("Workload %s admitted %+v; after the restart %s admitted %+v: want the same Workload, admitted once", admitted.UID, was, end.UID, is)
	}
	for _, c := range []string{kueue.WorkloadEvicted, kueue.WorkloadPreempted} {
		if seen, _, ok := workload.ever(c); ok {
			t.Errorf("the Workload was %s: %+v", c, seen)
		}
	}
}

// ddpByType is the job of ddpJob restarting in place, in a Kueue queue, with each rank a
// replica type of its own (master, worker, straggler: ranks 0, 1 and 2), so that the third
// alone does not tolerate unusableTaint.
func ddpByType(t *testing.T, ns, name, queue string) *ddpRun {
	base := ddpJob(t, ns, name, batch.RestartInPlace).job
	spec := base.Spec.ReplicaSpecs[0]
	var types []batch.GenericReplicaSpec
	for rank, typ := range []string{"master", "worker", "straggler"} {
		r := *spec.DeepCopy()
		r.Type, r.Replicas = typ, ptr.To[int32](1)
		c := &r.Template.Spec.Containers[0]
		c.Command = []string{"sh", "-c", "export RANK=" + fmt.Sprint(rank) + "; " + ddpRank}
		c.Env = []corev1.EnvVar{{Name: "WORLD_SIZE", Value: "3"},
			{Name: "MASTER_ADDR", Value: "$(service.master[0].host)"}, {Name: "MASTER_PORT", Value: "$(service.port[torch])"}}
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		r.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
		if typ != "straggler" {
			r.Template.Spec.Tolerations = append(r.Template.Spec.Tolerations, corev1.Toleration{Key: unusableTaint.Key, Operator: corev1.TolerationOpExists, Effect: unusableTaint.Effect})
		}
		types = append(types, r)
	}
	base.Spec.ReplicaSpecs = types
	base.Labels = map[string]string{kueue.LabelQueueName: queue}
	dir := filepath.Join(os.TempDir(), "t9k-e2e-"+ns+"-"+name)
	return &ddpRun{job: base, dir: dir, names: []string{name + "-master-0", name + "-worker-0", name + "-straggler-0"}}
}

// taintRealNode puts unusableTaint on the real node, or lifts it.
func taintRealNode(t *testing.T, on bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := env.kube.CoreV1().Nodes().Get(context.Background(), cluster.RealNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints := slices.DeleteFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.Key == unusableTaint.Key })
		if on {
			taints = append(taints, unusableTaint)
		}
		if len(taints) == len(node.Spec.Taints) && !on {
			return nil
		}
		node.Spec.Taints = taints
		_, err = env.kube.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Errorf("tainting the real node (%v): %v", on, err)
	}
}
