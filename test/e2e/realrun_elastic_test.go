package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

// worldLine is a line of examples/elastic's script: "rank R of W: step S, ...".
var worldLine = regexp.MustCompile(`rank 0 of (\d+): step (\d+),`)

// newWorld3 is the line rank 0 logs as it starts in a world of 3.
var newWorld3 = regexp.MustCompile(`rank 0 of 3: life`)

// lastWorld is the world size and step of the last step rank 0 logged (0, 0: none yet).
func lastWorld(ns, pod string) (world, step int) {
	m := worldLine.FindAllStringSubmatch(containerLogs(ns, pod, "worker"), -1)
	if len(m) == 0 {
		return 0, 0
	}
	world, _ = strconv.Atoi(m[len(m)-1][1])
	step, _ = strconv.Atoi(m[len(m)-1][2])
	return world, step
}

// TestRealElasticTraining: examples/elastic, torchrun's elastic rendezvous over gloo between
// 2 and 3 workers, asking for 3 in a Kueue queue with room for 2 (100 millicores a worker,
// 200 in the queue). Kueue admits 2 (partial admission) and the job starts with 2, asking for
// the third with a workload slice; the queue's quota is raised to 300, Kueue admits the slice
// and the job grows to 3 by itself: rank 2 joins and the world becomes 3 without anything
// restarted by the controller. Rank 2's pod deleted at once, as with its node, is replaced
// within the quota the job holds, no restart counted, and the world of 3 forms again.
// `kubectl scale` to 2 deletes rank 2, the two first go on in a world of 2 from their
// checkpoint, and the job hands the quota of one worker back to Kueue. The two first pods
// keep their UIDs throughout, no restart is counted, and the job succeeds.
func TestRealElasticTraining(t *testing.T) {
	client := useKueue(t)
	parallel(t, realNode.all())
	ns := namespace(t)
	queue := queueOfCPU(t, ns, cluster.KueueResourceFlavor, "200m")
	needRealNode(t, ns, trainingImage)
	ctx := context.Background()
	script, err := os.ReadFile(filepath.Join(repoRoot, "examples", "elastic", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pytorch-elastic-script"}, Data: map[string]string{"train.py": string(script)}}
	if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "elastic", "elastic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job := &batch.GenericJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	// The checkpoint in a directory of this test's own; the run ends when the test says.
	dir := filepath.Join(os.TempDir(), "t9k-e2e-"+ns)
	t.Cleanup(func() { os.RemoveAll(dir) })
	pod := &job.Spec.ReplicaSpecs[0].Template.Spec
	for i := range pod.Volumes {
		if pod.Volumes[i].HostPath != nil {
			pod.Volumes[i].HostPath.Path = dir
		}
	}
	stop := filepath.Join(dir, "stop")
	job.Labels = map[string]string{kueue.LabelQueueName: queue}
	job.Spec.Elastic.Replicas = 3
	pod.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	pod.Containers[0].Env = append(pod.Containers[0].Env, corev1.EnvVar{Name: "STEPS", Value: "100000"},
		corev1.EnvVar{Name: "STEP_SECONDS", Value: "0.5"}, corev1.EnvVar{Name: "STOP_FILE", Value: "/checkpoint/stop"})
	createJob(t, ns, job)
	name := job.Name
	worker := func(rank int) string { return fmt.Sprintf("%s-worker-%d", name, rank) }

	// world waits until rank 0 steps in a world of n, past step after.
	world := func(n, after int) int {
		t.Helper()
		var step int
		waitForOrReport(t, fmt.Sprintf("rank 0 stepping in a world of %d", n), realTimeout, func(context.Context) (bool, error) {
			var w int
			w, step = lastWorld(ns, worker(0))
			return w == n && step > after, nil
		}, func() string { return logTails(ns, worker(0), worker(1), worker(2)) })
		return step
	}
	step := world(2, 2)
	uids := map[string]types.UID{}
	for _, rank := range []int{0, 1} {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, worker(rank), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[p.Name] = p.UID
	}

	// Kueue admitted 2 of the 3: the job asks for the third with a slice, which waits.
	slice := "genericjob-" + name + "-2"
	waitReal(t, "a slice for 3 workers", func(ctx context.Context) (bool, error) {
		wl, err := client.KueueV1beta2().Workloads(ns).Get(ctx, slice, metav1.GetOptions{})
		return err == nil && wl.Spec.PodSets[0].Count == 3, nil
	})
	raised := time.Now()
	if out, err := kubectl("patch", "clusterqueue", queue, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"300m"}]`); err != nil {
		t.Fatalf("raising the queue's quota: %v: %s", err, out)
	}
	step = world(3, step)
	t.Logf("grown: rank 0 stepped in a world of 3 %.1f s after the queue's quota was raised", time.Since(raised).Seconds())
	waitReal(t, "status.elastic.replicas 3", func(ctx context.Context) (bool, error) {
		j, err := env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && j.Status.Elastic != nil && j.Status.Elastic.Replicas == 3, nil
	})

	// Rank 2 lost, as with its node: the others go on, and a new pod of rank 2 joins them.
	lost := replicaStatusOf(getJob(t, ns, name), worker(2)).UID
	if err := env.kube.CoreV1().Pods(ns).Delete(ctx, worker(2), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	replacedAfterDisruption(t, ns, name, worker(2), lost, 1)
	waitReal(t, "rank 0 in a new world of 3", func(context.Context) (bool, error) {
		return len(newWorld3.FindAllString(containerLogs(ns, worker(0), "worker"), -1)) >= 2, nil
	})
	step = world(3, step)

	scaled := time.Now()
	if out, err := kubectl("scale", "-n", ns, "genericjob/"+name, "--replicas=2"); err != nil {
		t.Fatalf("kubectl scale --replicas=2: %v: %s", err, out)
	}
	world(2, step)
	t.Logf("shrunk: rank 0 stepped in a world of 2 %.1f s after kubectl scale", time.Since(scaled).Seconds())
	waitReal(t, "one worker's quota handed back to Kueue", func(ctx context.Context) (bool, error) {
		wl, err := client.KueueV1beta2().Workloads(ns).Get(ctx, slice, metav1.GetOptions{})
		return err == nil && len(wl.Status.ReclaimablePods) == 1 && wl.Status.ReclaimablePods[0].Count == 1, nil
	})
	waitReal(t, worker(2)+" gone", func(ctx context.Context) (bool, error) {
		_, err := env.kube.CoreV1().Pods(ns).Get(ctx, worker(2), metav1.GetOptions{})
		return err != nil, nil
	})
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := waitGenericPhase(t, ns, name, batch.JobSucceeded)

	if done.Status.Restarts != 0 {
		t.Errorf("status.restarts %d, want 0: a resize restarts nothing", done.Status.Restarts)
	}
	for _, rank := range []int{0, 1} {
		rs := replicaStatusOf(done, worker(rank))
		if rs.UID != uids[worker(rank)] || rs.RestartCount != 0 || rs.Phase != batch.ReplicaSucceeded {
			t.Errorf("%s: UID %s, %d restarts, %s; want its first pod %s, none, Succeeded", worker(rank), rs.UID, rs.RestartCount, rs.Phase, uids[worker(rank)])
		}
	}
	if n := len(done.Status.Tasks[0].Replicas); n != 2 {
		t.Errorf("status lists %d workers, want 2", n)
	}
	if events, ok := eventsSaying(t, ns, name, "worker: 2 of 3 (partial admission)", "Growing: Asked Kueue for worker at 3 replicas",
		"Grown: Kueue admitted Workload "+slice, "Resized worker from 3 to 2 replicas"); !ok {
		t.Errorf("no event for each step (partial admission, Growing, Grown, Resized):\n%s", events)
	}
}

// logTails is the last lines of the worker container's log of each pod, for a failure's
// report.
func logTails(ns string, pods ...string) string {
	var b strings.Builder
	for _, p := range pods {
		lines := strings.Split(strings.TrimSpace(containerLogs(ns, p, "worker")), "\n")
		fmt.Fprintf(&b, "--- %s\n%s\n", p, strings.Join(lines[max(0, len(lines)-25):], "\n"))
	}
	return b.String()
}
