package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
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
// rank 1 exits 1 in its first life, under restartScope Job, twice at once: restarted by
// recreating its pods, and in place. Each job Succeeded with each replica restarted once and
// the job once, in attempt 2, which each program of the second life reads from T9K_ATTEMPT,
// and the second life's all-reduce succeeds.
//
// The barrier is shown from the pods' own clocks: every rank stamps, on a hostPath of the node,
// when each of its lives started and, every 100 ms, that it is alive; no rank of attempt 2
// started before the last stamp of attempt 1. Recreated, the old pods are gone before a new one
// is made, in the API server's order of events; their ranks, Python as pid 1 of the container
// waiting for rank 1 in the rendezvous, ignore the kubelet's SIGTERM and end at its SIGKILL,
// after the pods' grace period (30 s). In place, every pod keeps its UID, node and address,
// the gang's PodGroup stays, each container restarts once, and the kubelet stops the old containers within its own
// grace of 2 s: the time from rank 1's exit to every rank running again is reported for both,
// and in place takes at most half of recreating.
func TestRealWholeJobRestart(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage, agentImage)
	ctx := context.Background()
	allreduceScripts(t, ns)
	events := watchPods(t, ns)
	recreate, inPlace := ddpJob(t, ns, "ddp", batch.RestartRecreate), ddpJob(t, ns, "ddp-in-place", batch.RestartInPlace)
	// In place, a gang's PodGroup stays as it is: its pods stay.
	inPlace.job.Spec.Scheduling = &batch.SchedulingConfiguration{SchedulingPolicy: &batch.PodGroupSchedulingPolicy{Gang: &batch.GangSchedulingPolicy{MinCount: ptr.To[int32](3)}}}
	createJob(t, ns, recreate.job)
	createJob(t, ns, inPlace.job)
	before := podsByName(t, ns, inPlace.job.Name, 3)
	group, err := env.kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, "genericjob-"+inPlace.job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recreated := recreate.check(t, ns, "RestartedWithJob")
	kept := inPlace.check(t, ns, "RestartedWithJob")

	// Recreated: new pods, made once every old one was gone in the API server's order.
	first, second := map[types.UID]string{}, map[types.UID]string{}
	for _, rs := range recreated.Status.Tasks[0].Replicas {
		first[rs.LastTermination.UID], second[rs.UID] = rs.Name, rs.Name
		if rs.UID == rs.LastTermination.UID {
			t.Errorf("%s recreated kept its pod %s", rs.Name, rs.UID)
		}
	}
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
		t.Errorf("pod events: the first new pod at %d, the last old one gone at %d; want every old pod gone first:\n%v", firstMade, lastGone, events())
	}
	if ev, ok := eventsSaying(t, ns, recreate.job.Name, "RestartingJob: Restarting every replica together as attempt 2 (spec.restartScope: Job): ddp-worker-1 failed with exit code 1."); !ok {
		t.Errorf("no RestartingJob event naming worker-1:\n%s", ev)
	}

	// In place: the same pods, on the same node at the same address, each container restarted
	// once by the kubelet.
	after := podsByName(t, ns, inPlace.job.Name, 3)
	for name, b := range before {
		a := after[name]
		if a == nil || a.UID != b.UID || a.Spec.NodeName != b.Spec.NodeName || a.Status.PodIP != b.Status.PodIP {
			t.Errorf("%s: before the restart %s on %s at %s, after %+v; want the same pod", name, b.UID, b.Spec.NodeName, b.Status.PodIP, a)
			continue
		}
		for _, c := range a.Status.ContainerStatuses {
			if c.RestartCount != 1 {
				t.Errorf("%s, container %s: restarted %d times by the kubelet, want once", name, c.Name, c.RestartCount)
			}
		}
	}
	for _, rs := range kept.Status.Tasks[0].Replicas {
		if rs.UID != before[rs.Name].UID || rs.LastTermination.UID != rs.UID {
			t.Errorf("%s: status %s, last termination %s; want its one pod %s", rs.Name, rs.UID, rs.LastTermination.UID, before[rs.Name].UID)
		}
	}
	if ev, ok := eventsSaying(t, ns, inPlace.job.Name, "RestartingInPlace: Restarting pods in place for attempt 2", "Released: Every pod's attempt 1 is down"); !ok {
		t.Errorf("no RestartingInPlace and Released events:\n%s", ev)
	}
	if pg, err := env.kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, group.Name, metav1.GetOptions{}); err != nil || pg.UID != group.UID || pg.DeletionTimestamp != nil {
		t.Errorf("the gang's PodGroup after the restart: %v, %+v; want %s kept", err, pg, group.UID)
	}

	slow, fast := recreate.recovery(t), inPlace.recovery(t)
	t.Logf("from rank 1's exit to every rank running again: recreated %.1fs, in place %.1fs", slow.Seconds(), fast.Seconds())
	if fast > slow/2 {
		t.Errorf("in place took %.1fs, more than half of recreating (%.1fs)", fast.Seconds(), slow.Seconds())
	}
}

// allreduceScripts makes the ConfigMap "scripts" of the ddpRun jobs: examples/pytorch's
// all-reduce.
func allreduceScripts(t *testing.T, ns string) {
	t.Helper()
	allreduceConfigMap(t, ns, "scripts", "pytorch")
}

// ddpRun is one DDP job of TestRealWholeJobRestart and the hostPath directory its ranks stamp
// (start-<attempt>-<rank>, alive-<attempt>-<rank>, exit-1-1).
type ddpRun struct {
	job   *batch.GenericJob
	dir   string
	names []string
}

func ddpJob(t *testing.T, ns, name string, strategy batch.RestartStrategy) *ddpRun {
	dir := filepath.Join(os.TempDir(), "t9k-e2e-"+ns+"-"+name)
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := replica("worker", trainingImage)
	r.Replicas = ptr.To[int32](3)
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](1)}
	c := &r.Template.Spec.Containers[0]
	c.Name = "worker"
	c.Command = []string{"sh", "-c", ddpRank}
	c.Env = []corev1.EnvVar{{Name: "RANK", Value: "$(rank)"}, {Name: "WORLD_SIZE", Value: "$(replicas[worker])"},
		{Name: "MASTER_ADDR", Value: "$(service.worker[0].host)"}, {Name: "MASTER_PORT", Value: "$(service.port[torch])"}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "scripts", MountPath: "/scripts"}, {Name: "stamps", MountPath: "/stamps"}}
	r.Template.Spec.Volumes = []corev1.Volume{
		{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "scripts"}}}},
		{Name: "stamps", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
	}
	onRealNode(&r.Template.Spec)
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r},
		Service:      &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "torch", Port: 29500}}},
		Lifecycle:    batch.Lifecycle{RestartScope: batch.RestartScopeJob, RestartStrategy: strategy},
	}}
	return &ddpRun{job: job, dir: dir, names: []string{name + "-worker-0", name + "-worker-1", name + "-worker-2"}}
}

// ddpRank is what each rank of a ddpRun runs, given RANK: it stamps its start and, every
// 100 ms, that it is alive; rank 1 exits 1 in its first life; then the all-reduce.
const ddpRank = `s=/stamps; a=$T9K_ATTEMPT; date +%s.%N > $s/start-$a-$RANK
(while :; do date +%s.%N > $s/.alive-$a-$RANK && mv $s/.alive-$a-$RANK $s/alive-$a-$RANK; sleep 0.1; done) &
echo "rank $RANK attempt $a"
if [ "$RANK" = 1 ] && [ "$a" = 1 ]; then sleep 3; date +%s.%N > $s/exit-1-1; echo "rank 1: first life, exit 1"; exit 1; fi
exec /usr/bin/python3 /scripts/allreduce.py`

// check waits for the job to succeed and checks what both strategies share: one restart of the
// job and of each replica, in attempt 2, worker-1's exit code and the others' reason (other),
// the second life's all-reduce and T9K_ATTEMPT, and the barrier by the ranks' own stamps.
func (r *ddpRun) check(t *testing.T, ns, other string) *batch.GenericJob {
	t.Helper()
	done := waitGenericPhase(t, ns, r.job.Name, batch.JobSucceeded)
	if done.Status.Restarts != 1 || done.Status.Attempt != 2 {
		t.Errorf("%s: status.restarts %d, attempt %d; want 1 and 2: the job restarted once", r.job.Name, done.Status.Restarts, done.Status.Attempt)
	}
	for i, name := range r.names {
		rs := replicaStatusOf(done, name)
		if rs.RestartCount != 1 || rs.Phase != batch.ReplicaSucceeded || rs.LastTermination == nil {
			t.Errorf("%s: %+v, want Succeeded, restarted once", name, rs)
			continue
		}
		code := int32(-1)
		if cs := rs.LastTermination.Containers; len(cs) > 0 && cs[0].ExitCode != nil {
			code = *cs[0].ExitCode
		}
		switch {
		case i == 1 && code != 1:
			t.Errorf("%s's first life ended with %d, want its exit 1", name, code)
		case i != 1 && rs.LastTermination.Reason != other:
			t.Errorf("%s's first life: %+v, want it ended with the job (%s)", name, rs.LastTermination, other)
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
	r.checkBarrier(t)
	return done
}

// checkBarrier checks, by the ranks' own stamps, that no rank of attempt 2 started before the
// last rank of attempt 1 was last seen alive.
func (r *ddpRun) checkBarrier(t *testing.T) {
	t.Helper()
	lastAlive, firstStart := 0.0, math.Inf(1)
	for rank := range 3 {
		lastAlive = max(lastAlive, r.stamp(t, fmt.Sprintf("alive-1-%d", rank)))
		firstStart = min(firstStart, r.stamp(t, fmt.Sprintf("start-2-%d", rank)))
	}
	if !(lastAlive < firstStart) {
		t.Errorf("%s: a rank of attempt 1 was alive at %.3f, after a rank of attempt 2 started at %.3f", r.job.Name, lastAlive, firstStart)
	}
	t.Logf("%s: the last rank of attempt 1 was last seen alive %.2fs before the first of attempt 2 started", r.job.Name, firstStart-lastAlive)
}

// recovery is the time from rank 1's exit to the start of the last rank of attempt 2, by the
// ranks' own clocks.
func (r *ddpRun) recovery(t *testing.T) time.Duration {
	last := 0.0
	for rank := range 3 {
		last = max(last, r.stamp(t, fmt.Sprintf("start-2-%d", rank)))
	}
	return time.Duration((last - r.stamp(t, "exit-1-1")) * float64(time.Second))
}

// stamp is the time a rank wrote to a file of the job's directory, in seconds since the epoch.
func (r *ddpRun) stamp(t *testing.T, file string) float64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.dir, file))
	if err != nil {
		t.Fatalf("%s: %v", r.job.Name, err)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		t.Fatalf("%s: %s: %v", r.job.Name, file, err)
	}
	return v
}

// podsByName are a job's pods, by name, once n of them have an address and are not being deleted.
func podsByName(t *testing.T, ns, job string, n int) map[string]*corev1.Pod {
	t.Helper()
	var pods map[string]*corev1.Pod
	waitReal(t, fmt.Sprintf("%d pods of %s with addresses", n, job), func(ctx context.Context) (bool, error) {
		list, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batch.LabelJobName + "=" + job})
		if err != nil {
			return false, err
		}
		pods = map[string]*corev1.Pod{}
		for i := range list.Items {
			if p := &list.Items[i]; p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				pods[p.Name] = p
			}
		}
		return len(pods) == n, nil
	})
	return pods
}
