package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
)

// TestGangQueuedInKueue: a job both queued in Kueue and asked to start whole: Kueue admits
// its quota, then its pods are made as a gang, which the scheduler holds back whole while it
// does not fit the nodes, and binds whole once it does. (In a file after kueue_test.go: it
// starts Kueue, which the first Kueue test wants absent.)
func TestGangQueuedInKueue(t *testing.T) {
	skipWithoutGangs(t)
	client := useKueue(t)
	parallel(t)
	ns := namespace(t)
	nodes := newGangNodes(t, ns)
	nodes.add()
	nodes.add()
	queue := queueFor(t, ns, 100)
	job := gangJob(nodes, "queued", true)
	job.Labels = map[string]string{kueue.LabelQueueName: queue}
	createJob(t, ns, job)
	waitFor(t, "Kueue to admit the job", jobTimeout, func(ctx context.Context) (bool, error) {
		wl, err := client.KueueV1beta2().Workloads(ns).Get(ctx, "genericjob-queued", metav1.GetOptions{})
		return err == nil && wl.Status.Admission != nil, nil
	})
	waitHeldBack(t, ns, "queued-", 3)
	for _, p := range jobPods(t, ns, "queued-") {
		if g := p.Spec.SchedulingGroup; g == nil || g.PodGroupName == nil || *g.PodGroupName != "genericjob-queued" {
			t.Fatalf("pod %s joins %+v, want the job's PodGroup", p.Name, g)
		}
	}
	quiet(t, ns, "queued-", time.Second)
	nodes.add()
	waitBound(t, ns, "queued-", 3)
	waitJob(t, ns, "queued", "running", inPhase(batch.JobRunning))
}
