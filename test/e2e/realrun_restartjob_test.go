package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// podEvent is one pod event of a watch, in the order the API server sent it.
type podEvent struct {
	kind watch.EventType
	name string
	uid  types.UID
	at   time.Time
}

// watchPods records the namespace's pod events until the test ends.
func watchPods(t *testing.T, ns string) func() []podEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := env.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr.To[int64](600)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []podEvent
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			if p, ok := e.Object.(*corev1.Pod); ok {
				mu.Lock()
				events = append(events, podEvent{e.Type, p.Name, p.UID, time.Now()})
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() []podEvent {
		mu.Lock()
		defer mu.Unlock()
		return append([]podEvent(nil), events...)
	}
}

// TestRealWholeJobRestart: plain DDP, a gloo process group with no elastic rendezvous, whose
// rank 1 exits 1 in its first life, under restartScope Job: every rank is restarted, the new
// pods are made only once every old one is gone, the second life's all-reduce succeeds, and
// the job Succeeded with each replica restarted once and the job once, in attempt 2, which
// each program of the second life reads from T9K_ATTEMPT. The barrier lasts the
// old pods' grace period (30 s): their ranks, Python as pid 1 of the container, waiting for
// rank 1 in the rendezvous, ignore the kubelet's SIGTERM and end at its SIGKILL.
func TestRealWholeJobRestart(t *testing.T) {
	parallel(t, realNode.one())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	ctx := context.Background()
	script, err := os.ReadFile(filepath.Join(repoRoot, "examples", "pytorch", "allreduce.py"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "scripts"}, Data: map[string]string{"allreduce.py": string(script)}}
	if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(os.TempDir(), "t9k-e2e-"+ns)
	t.Cleanup(func() { os.RemoveAll(marker) })

	r := replica("worker", trainingImage)
	r.Replicas = ptr.To[int32](3)
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](1)}
	c := &r.Template.Spec.Containers[0]
	c.Name = "worker"
	c.Command = []string{"sh", "-c", `echo "rank $RANK attempt $T9K_ATTEMPT"; if [ "$RANK" = 1 ] && [ ! -e /work/failed ]; then touch /work/failed; echo "rank 1: first life, exit 1"; exit 1; fi; exec /usr/bin/python3 /scripts/allreduce.py`}
	c.Env = []corev1.EnvVar{{Name: "RANK", Value: "$(rank)"}, {Name: "WORLD_SIZE", Value: "$(replicas[worker])"},
		{Name: "MASTER_ADDR", Value: "$(service.worker[0].host)"}, {Name: "MASTER_PORT", Value: "$(service.port[torch])"}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "scripts", MountPath: "/scripts"}, {Name: "work", MountPath: "/work"}}
	r.Template.Spec.Volumes = []corev1.Volume{
		{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "scripts"}}}},
		{Name: "work", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: marker, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
	}
	onRealNode(&r.Template.Spec)
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "ddp"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Service:      &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "torch", Port: 29500}}},
		Lifecycle:    batch.Lifecycle{RestartScope: batch.RestartScopeJob},
	}}
	events := watchPods(t, ns)
	createJob(t, ns, job)
	done := waitGenericPhase(t, ns, job.Name, batch.JobSucceeded)

	if done.Status.Restarts != 1 || done.Status.Attempt != 2 {
		t.Errorf("status.restarts %d, attempt %d; want 1 and 2: the job restarted once", done.Status.Restarts, done.Status.Attempt)
	}
	first, second := map[types.UID]string{}, map[types.UID]string{}
	for i := range 3 {
		name := fmt.Sprintf("ddp-worker-%d", i)
		rs := replicaStatusOf(done, name)
		if rs.RestartCount != 1 || rs.Phase != batch.ReplicaSucceeded || rs.LastTermination == nil {
			t.Errorf("%s: %+v, want Succeeded, restarted once", name, rs)
			continue
		}
		first[rs.LastTermination.UID], second[rs.UID] = name, name
		code := int32(-1)
		if cs := rs.LastTermination.Containers; len(cs) > 0 && cs[0].ExitCode != nil {
			code = *cs[0].ExitCode
		}
		switch {
		case i == 1 && code != 1:
			t.Errorf("%s's first life ended with %d, want its exit 1", name, code)
		case i != 1 && rs.LastTermination.Reason != "RestartedWithJob":
			t.Errorf("%s's first life: %+v, want it deleted with the job (RestartedWithJob)", name, rs.LastTermination)
		}
		if rs.LastTermination.Attempt != 1 {
			t.Errorf("%s's first life is recorded in attempt %d, want 1", name, rs.LastTermination.Attempt)
		}
		log := containerLogs(ns, name, "worker")
		if !strings.Contains(log, fmt.Sprintf("rank %d of 3: all-reduce sum 6, want 6", i)) {
			t.Errorf("%s's second life did not all-reduce:\n%s", name, log)
		}
		// The kubelet gave the program its pod's attempt label as T9K_ATTEMPT.
		if !strings.Contains(log, fmt.Sprintf("rank %d attempt 2\n", i)) {
			t.Errorf("%s's second life was not told its attempt (T9K_ATTEMPT 2):\n%s", name, log)
		}
	}

	// The barrier: in the API server's order of events, no pod of the second life was
	// created before every pod of the first was gone.
	lastGone, firstMade := -1, -1
	for i, e := range events() {
		switch {
		case e.kind == watch.Deleted && first[e.uid] != "":
			lastGone = i
		case e.kind == watch.Added && second[e.uid] != "" && firstMade < 0:
			firstMade = i
		}
	}
	if lastGone < 0 || firstMade < 0 || firstMade < lastGone {
		t.Fatalf("pod events: the first new pod at %d, the last old one gone at %d; want every old pod gone first:\n%v", firstMade, lastGone, events())
	}
	all := events()
	t.Logf("the last old pod was gone %.1fs after the first pod was made; the first new pod %.1fs after that",
		all[lastGone].at.Sub(all[0].at).Seconds(), all[firstMade].at.Sub(all[lastGone].at).Seconds())
	if ev, ok := eventsSaying(t, ns, job.Name, "RestartingJob: Restarting every replica together as attempt 2 (spec.restartScope: Job): ddp-worker-1 failed with exit code 1."); !ok {
		t.Errorf("no RestartingJob event naming worker-1:\n%s", ev)
	}
}
