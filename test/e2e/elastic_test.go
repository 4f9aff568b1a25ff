package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// runningWorkers is a condition: the job runs n workers, and its status says so.
func runningWorkers(n int32) func(*batch.GenericJob) bool {
	return func(j *batch.GenericJob) bool {
		return j.Status.Phase == batch.JobRunning && j.Status.Aggregate.Running == n &&
			j.Status.Elastic != nil && j.Status.Elastic.Replicas == n && len(j.Status.Tasks) == 1 && len(j.Status.Tasks[0].Replicas) == int(n)
	}
}

// TestElasticScale: on fake nodes, an elastic GenericJob under restartScope Job is resized
// through the scale subresource (kubectl scale and the typed client's UpdateScale), which
// reports its size and selector; a resize past the bounds is refused with the bounds named;
// shrinking deletes the highest ranks and keeps the others' pods; and an evicted worker is
// replaced alone, with no restart of the job, while the type keeps its minimum.
func TestElasticScale(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := context.Background()
	r := replica("worker", "trainer")
	r.Replicas = nil
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure}
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "elastic"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Lifecycle: batch.Lifecycle{RestartScope: batch.RestartScopeJob,
			Elastic: &batch.ElasticPolicy{ReplicaType: "worker", Replicas: 2, MinReplicas: 2, MaxReplicas: 4}},
	}}
	createJob(t, ns, job)
	before := waitJob(t, ns, job.Name, "running 2 workers", runningWorkers(2))

	if out, err := kubectl("scale", "-n", ns, "gj/elastic", "--replicas=4"); err != nil {
		t.Fatalf("kubectl scale --replicas=4: %v: %s", err, out)
	}
	grown := waitJob(t, ns, job.Name, "running 4 workers", runningWorkers(4))
	for _, name := range []string{"elastic-worker-0", "elastic-worker-1"} {
		if replicaStatusOf(grown, name).UID != replicaStatusOf(before, name).UID {
			t.Errorf("%s got a new pod when the job grew", name)
		}
	}
	scale, err := env.jobs.BatchV1beta1().GenericJobs(ns).GetScale(ctx, job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 4 || scale.Status.Replicas != 4 || !strings.Contains(scale.Status.Selector, "batch.tensorstack.dev/replica-type=worker") {
		t.Errorf("scale %+v, want 4 asked, 4 running, a selector of the workers", scale)
	}
	if out, err := kubectl("scale", "-n", ns, "gj/elastic", "--replicas=5"); err == nil || !strings.Contains(out, "outside spec.elastic.minReplicas to maxReplicas") {
		t.Errorf("kubectl scale --replicas=5 past maxReplicas: %v: %s; want it refused, naming the bounds", err, out)
	}

	// An eviction: replaced alone, the job not restarted.
	evicted := replicaStatusOf(grown, "elastic-worker-3").UID
	if err := env.kube.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "elastic-worker-3", Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}}); err != nil {
		t.Fatal(err)
	}
	replacedAfterDisruption(t, ns, job.Name, "elastic-worker-3", evicted, 1)
	after := waitJob(t, ns, job.Name, "running 4 workers again", runningWorkers(4))
	if after.Status.Restarts != 0 {
		t.Errorf("status.restarts %d after an eviction of an elastic worker, want 0", after.Status.Restarts)
	}
	for i := range 3 {
		name := fmt.Sprintf("elastic-worker-%d", i)
		if replicaStatusOf(after, name).UID != replicaStatusOf(grown, name).UID {
			t.Errorf("%s got a new pod when elastic-worker-3 was evicted", name)
		}
	}

	if scale, err = env.jobs.BatchV1beta1().GenericJobs(ns).GetScale(ctx, job.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 2
	if _, err := env.jobs.BatchV1beta1().GenericJobs(ns).UpdateScale(ctx, job.Name, scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	shrunk := waitJob(t, ns, job.Name, "running 2 workers", runningWorkers(2))
	for _, name := range []string{"elastic-worker-0", "elastic-worker-1"} {
		if replicaStatusOf(shrunk, name).UID != replicaStatusOf(before, name).UID {
			t.Errorf("%s got a new pod when the job shrank", name)
		}
	}
	waitFor(t, "the highest ranks' pods gone", jobTimeout, func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 2, nil
	})
	if events, ok := eventsSaying(t, ns, job.Name, "Resized worker from 2 to 4 replicas", "Resized worker from 4 to 2 replicas"); !ok {
		t.Errorf("no Resized event for each resize:\n%s", events)
	}
}

// TestEditorsScaleJobs: manifests/user-roles.yaml, aggregated into Kubernetes' own edit and
// view ClusterRoles, lets a namespace's editor create and resize a job with kubectl, and its
// viewer read it but not resize it.
func TestEditorsScaleJobs(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := context.Background()
	roles := filepath.Join(repoRoot, "manifests", "user-roles.yaml")
	if out, err := kubectl("apply", "-f", roles); err != nil {
		t.Fatalf("kubectl apply -f manifests/user-roles.yaml: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = kubectl("delete", "--ignore-not-found", "-f", roles) })
	for user, role := range map[string]string{"alice": "edit", "carol": "view"} {
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
		if _, err := env.kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The aggregation controller adds the rules to edit and view shortly after.
	waitFor(t, "alice may resize GenericJobs", jobTimeout, func(context.Context) (bool, error) {
		out, _ := kubectl("auth", "can-i", "update", "genericjobs.batch.tensorstack.dev", "--subresource=scale", "-n", ns, "--as=alice")
		return strings.TrimSpace(out) == "yes", nil
	})
	r := replica("worker", "trainer")
	r.Replicas = nil
	job := &batch.GenericJob{TypeMeta: metav1.TypeMeta{APIVersion: batch.SchemeGroupVersion.String(), Kind: "GenericJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r},
			Lifecycle: batch.Lifecycle{Elastic: &batch.ElasticPolicy{ReplicaType: "worker", Replicas: 1, MinReplicas: 1, MaxReplicas: 3}}}}
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(manifest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl("create", "-n", ns, "--as=alice", "-f", manifest); err != nil {
		t.Fatalf("alice's kubectl create: %v: %s", err, out)
	}
	if out, err := kubectl("scale", "-n", ns, "--as=alice", "gj/team", "--replicas=2"); err != nil {
		t.Fatalf("alice's kubectl scale: %v: %s", err, out)
	}
	waitJob(t, ns, "team", "running 2 workers", runningWorkers(2))
	if out, err := kubectl("get", "-n", ns, "--as=carol", "gj/team"); err != nil {
		t.Errorf("carol's kubectl get: %v: %s", err, out)
	}
	if out, err := kubectl("scale", "-n", ns, "--as=carol", "gj/team", "--replicas=3"); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("carol's kubectl scale: %v: %s; want it forbidden", err, out)
	}
}
