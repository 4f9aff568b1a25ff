package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/apivalidation"
)

// TestLargestJob: the largest GenericJob the CRD admits (apivalidation.MaxReplicas replicas, the
// longest name) runs on the kwok nodes and reaches Running with every replica in its status:
// the controller could write that status. The job is then deleted with its pods, so that the
// tests after it do not wait on them. It holds the fake nodes alone: kwok writes the status of
// its pods at about fifty a second, and a test beside it saw its own pods wait so long behind
// them that Kueue's waitForPodsReady timeout evicted its job.
func TestLargestJob(t *testing.T) {
	parallel(t, fakeNodes.all())
	ns := namespace(t)
	ctx := context.Background()
	// The longest name the CRD allows: <name>-worker-<rank> fits in 63 characters.
	name := "largest-" + strings.Repeat("j", 63-len("largest-")-len("-worker-")-len("749"))
	r := replica("worker", "trainer")
	r.Replicas = ptr.To[int32](apivalidation.MaxReplicas)
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}

	start := time.Now()
	createJob(t, ns, job)
	var running *batch.GenericJob
	waitFor(t, name+" running with every replica in its status", 90*time.Second, func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || j.Status.Phase != batch.JobRunning || len(j.Status.Tasks) != 1 || len(j.Status.Tasks[0].Replicas) != apivalidation.MaxReplicas {
			return false, nil
		}
		running = j
		return true, nil
	})
	t.Logf("%d replicas Running in %s", apivalidation.MaxReplicas, time.Since(start).Round(100*time.Millisecond))

	if c := running.Status.Condition(batch.JobConditionRunning); c.Status != corev1.ConditionTrue {
		t.Errorf("Running condition %+v", c)
	}
	if a := running.Status.Aggregate; a.Running != apivalidation.MaxReplicas {
		t.Errorf("aggregate %+v, want %d running", a, apivalidation.MaxReplicas)
	}
	for rank, rs := range running.Status.Tasks[0].Replicas {
		if want := fmt.Sprintf("%s-worker-%d", name, rank); rs.Name != want || rs.UID == "" || rs.Phase != batch.ReplicaRunning || rs.Node == "" ||
			len(rs.Containers) != 1 || rs.Containers[0].State != batch.ContainerRunning {
			t.Fatalf("replica %d: %+v, want %s running on a node", rank, rs, want)
		}
	}

	// What the API server stores: the whole job, its status listing every replica.
	raw, err := env.jobs.BatchV1beta1().RESTClient().Get().Namespace(ns).Resource("genericjobs").Name(name).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status, _ := json.Marshal(running.Status)
	entry, _ := json.Marshal(running.Status.Tasks[0].Replicas[apivalidation.MaxReplicas-1])
	t.Logf("the job is %d bytes as the API server returns it; its status %d bytes; a running replica's entry %d bytes", len(raw), len(status), len(entry))

	// Deleted with its pods: the garbage collector alone takes about 30 s for them.
	start = time.Now()
	if err := env.jobs.BatchV1beta1().GenericJobs(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job gone", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	selector := metav1.ListOptions{LabelSelector: batch.LabelJobName + "=" + name}
	if err := env.kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, selector); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "its pods gone", 60*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, selector)
		return err == nil && len(pods.Items) == 0, nil
	})
	t.Logf("deleted with its pods in %s", time.Since(start).Round(100*time.Millisecond))
}
