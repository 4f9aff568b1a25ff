package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
)

// endPod makes a running pod's containers terminate with code, as a kubelet would report it.
func endPod(t *testing.T, ns, name string, code int32) {
	t.Helper()
	pods := env.kube.CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodFailed
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			cs.Ready, cs.State = false, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", FinishedAt: now}}
		}
		_, err = pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEndingSyncRestartsNothing: type a (OnFailure, limit 0) and type b (OnFailure, limit 3)
// fail at the same moment. The job fails for want of a restart of a; b's replicas are not
// restarted by the sync that ended the job: no restart counted, reported Failed with their
// exit code, and their pods kept (clean-up Unfinished keeps ended pods).
func TestEndingSyncRestartsNothing(t *testing.T) {
	ns := namespace(t)
	a, b := replica("a", "trainer"), replica("b", "trainer")
	a.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](0)}
	b.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](3)}
	b.Replicas = ptr.To[int32](2)
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "ending"}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{a, b}}}
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "running", inPhase(batch.JobRunning))
	uids := map[string]types.UID{}
	for _, name := range []string{"ending-b-0", "ending-b-1"} {
		p, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = p.UID
	}
	// The three pods end within milliseconds: one (batched) sync sees them all.
	for _, name := range []string{"ending-a-0", "ending-b-0", "ending-b-1"} {
		endPod(t, ns, name, 1)
	}
	failed := waitJob(t, ns, job.Name, "failed with every replica reported", func(j *batch.GenericJob) bool {
		if j.Status.Phase != batch.JobFailed {
			return false
		}
		for _, task := range j.Status.Tasks {
			for _, r := range task.Replicas {
				if r.Phase == batch.ReplicaRunning {
					return false
				}
			}
		}
		return true
	})
	for _, task := range failed.Status.Tasks {
		if task.RestartCount != 0 {
			t.Errorf("type %s counts %d restarts: none happened", task.Type, task.RestartCount)
		}
		for _, r := range task.Replicas {
			if r.RestartCount != 0 || r.Phase != batch.ReplicaFailed || len(r.Containers) == 0 || r.Containers[0].ExitCode == nil || *r.Containers[0].ExitCode != 1 {
				t.Errorf("replica %s: %+v, want Failed with exit code 1, no restart", r.Name, r)
			}
		}
	}
	for name, uid := range uids {
		p, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || p.UID != uid || p.DeletionTimestamp != nil {
			t.Errorf("pod %s was deleted or replaced (err %v): the clean-up policy Unfinished keeps ended pods", name, err)
		}
	}
}

// TestCleanUpKeepsPodsThatJustEnded makes the clean-up race likely: many jobs whose other
// replicas end right around the moment their main replica succeeds. A pod the clean-up
// (Unfinished) decided to delete while it was Running may be deleted; a pod that had ended
// before the delete must be kept, and its exit code must reach status.
//
// The race counts as exercised by a side pod that ended after its job's status said
// Succeeded (resourceVersions of one etcd are its revision, ordered across resources): the
// sync that ended the job saw it Running, so the clean-up set out to delete it, and it must
// have been kept. A round of jobs in which no side pod did so proves nothing; the test runs
// another, and fails if none of its rounds exercised the race.
func TestCleanUpKeepsPodsThatJustEnded(t *testing.T) {
	const rounds = 3
	for round := range rounds {
		raced := cleanUpRaceRound(t, round)
		if t.Failed() {
			return
		}
		if raced > 0 {
			return
		}
		t.Logf("round %d: no side pod ended after its job had ended; running another round", round)
	}
	t.Fatalf("in %d rounds, no side pod ended between its job's end and its clean-up: the race was never exercised", rounds)
}

// cleanUpRaceRound runs one round of TestCleanUpKeepsPodsThatJustEnded in a namespace of its
// own, checks it, and returns how many side pods exercised the race.
func cleanUpRaceRound(t *testing.T, round int) int {
	ns := namespace(t)
	const jobs = 20
	sideRunTimes := []string{"3800ms", "3950ms", "4000ms", "4050ms", "4100ms", "4250ms"}

	// Watch every pod of the namespace: which were seen ended before any delete, and which
	// of those were deleted all the same. (A pod deleted while Running may still be reported
	// Failed afterwards, with its deletionTimestamp set: that is no violation.) And watch the
	// jobs, for the resourceVersion of the status write that ended each.
	var mu sync.Mutex
	ended := map[types.UID]string{}
	endedRV := map[types.UID]uint64{}
	endedAtAll := map[types.UID]bool{} // ended before or while being deleted
	deletedAfterEnd := map[types.UID]string{}
	succeededRV := map[string]uint64{} // by job name
	var badRV []string
	rv := func(m metav1.Object) uint64 {
		n, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
		if err != nil {
			badRV = append(badRV, m.GetResourceVersion())
		}
		return n
	}
	observe := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		_, endedFirst := ended[p.UID]
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			endedAtAll[p.UID] = true
		}
		switch {
		case deleted || p.DeletionTimestamp != nil:
			if endedFirst {
				deletedAfterEnd[p.UID] = p.Name
			}
		case !endedFirst && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded):
			ended[p.UID] = p.Name
			endedRV[p.UID] = rv(p)
		}
	}
	observeJob := func(obj any) {
		j, ok := obj.(*batch.GenericJob)
		if !ok || j.Status.Phase != batch.JobSucceeded {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := succeededRV[j.Name]; !seen {
			succeededRV[j.Name] = rv(j)
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(ns))
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(obj, false) },
		UpdateFunc: func(_, obj any) { observe(obj, false) },
		DeleteFunc: func(obj any) { observe(obj, true) },
	})
	jobFactory := jobinformers.NewSharedInformerFactoryWithOptions(env.jobs, 0, jobinformers.WithNamespace(ns))
	_, _ = jobFactory.Batch().V1beta1().GenericJobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observeJob,
		UpdateFunc: func(_, obj any) { observeJob(obj) },
	})
	stop := make(chan struct{})
	factory.Start(stop)
	jobFactory.Start(stop)
	factory.WaitForCacheSync(stop)
	jobFactory.WaitForCacheSync(stop)

	for i := range jobs {
		main := replica("main", "trainer")
		exits(&main, 0, "3s")
		specs := []batch.GenericReplicaSpec{main}
		for j, runTime := range sideRunTimes {
			side := replica(fmt.Sprintf("side%d", j), "trainer")
			exits(&side, 1, runTime)
			specs = append(specs, side)
		}
		createJob(t, ns, &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("race-%d", i)}, Spec: batch.GenericJobSpec{
			ReplicaSpecs: specs,
			SuccessRules: []batch.ReplicaRule{{"main": {0}}},
			FailureRules: []batch.ReplicaRule{{"main": {0}}},
		}})
	}
	// Every job has ended, reported each replica as final, and no pod is being deleted.
	waitFor(t, "every job ended and settled", 2*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != jobs {
			return false, nil
		}
		for _, j := range list.Items {
			if j.Status.Phase != batch.JobSucceeded {
				return false, nil
			}
			for _, task := range j.Status.Tasks {
				for _, r := range task.Replicas {
					if r.Phase != batch.ReplicaSucceeded && r.Phase != batch.ReplicaFailed && r.Phase != batch.ReplicaDeleted {
						return false, nil
					}
				}
			}
		}
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return true, nil
	})
	close(stop)
	factory.Shutdown()
	jobFactory.Shutdown()

	mu.Lock()
	defer mu.Unlock()
	if len(badRV) > 0 {
		t.Fatalf("resourceVersions that are not etcd revisions (%v): this check needs a cluster with one etcd", badRV)
	}
	for uid, name := range deletedAfterEnd {
		t.Errorf("pod %s (%s) was deleted after it had ended: clean-up Unfinished must keep it", name, uid)
	}
	list, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, deleted, raced := 0, 0, 0 // side replicas seen ended before any delete, the others, and the kept ones that ended after their job
	for _, j := range list.Items {
		jobEnd, ok := succeededRV[j.Name]
		if !ok {
			t.Fatalf("%s was never seen Succeeded by the informer", j.Name)
		}
		for _, task := range j.Status.Tasks {
			for _, r := range task.Replicas {
				_, sawEnd := ended[r.UID]
				switch {
				case task.Type == "main":
				case sawEnd:
					kept++
					if endedRV[r.UID] > jobEnd {
						raced++
					}
					if r.Phase != batch.ReplicaFailed || len(r.Containers) == 0 || r.Containers[0].ExitCode == nil || *r.Containers[0].ExitCode != 1 {
						t.Errorf("replica %s ended with exit code 1 but status says %+v", r.Name, r)
					}
				case r.Phase == batch.ReplicaFailed:
					// Deleted while running, it ended while being deleted: so it says.
					deleted++
					if !endedAtAll[r.UID] || statusExitCode(r) != 1 {
						t.Errorf("replica %s was never seen ended with exit code 1, yet status says %+v", r.Name, r)
					}
				default:
					deleted++
					if r.Phase != batch.ReplicaDeleted {
						t.Errorf("replica %s was never seen ended, yet status says %s", r.Name, r.Phase)
					}
				}
			}
		}
	}
	t.Logf("round %d: side replicas: %d ended and kept, %d of them after their job had ended (the race); %d deleted while running",
		round, kept, raced, deleted)
	return raced
}

// TestRestartBackoffHolds measures the time from a pod's end to the creation of the
// replica's next pod: never shorter than the documented backoff (1s before the second
// restart, 2s before the third). The test ends each pod itself and takes the time just
// before, and takes the creation's time when its informer sees the pod: the span measured can
// only be longer than the real one, so the lower bound needs no slack. The upper bound is
// loose on purpose (a busy machine delays any event): it catches a backoff far too long, not
// one a little too long.
func TestRestartBackoffHolds(t *testing.T) {
	ns := namespace(t)
	const name, pod = "backoff", "backoff-worker-0"
	r := replica("worker", "trainer") // runs until the test ends it
	r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](3)}
	var mu sync.Mutex
	var created []time.Time // in creation order; one pod at a time
	var order []types.UID
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(ns))
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			created = append(created, now)
			order = append(order, obj.(*corev1.Pod).UID)
		},
	})
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	createJob(t, ns, &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}})
	var ended []time.Time // when the test ended pod i: at most when it really ended
	for i := range 4 {
		var uid types.UID
		waitFor(t, fmt.Sprintf("pod %d created", i), jobTimeout, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(order) > i+1 {
				return false, fmt.Errorf("%d pods created, want %d: the replica restarted on its own", len(order), i+1)
			}
			if len(order) == i+1 {
				uid = order[i]
			}
			return len(order) == i+1, nil
		})
		waitFor(t, fmt.Sprintf("pod %d running", i), jobTimeout, func(ctx context.Context) (bool, error) {
			p, err := env.kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			return err == nil && p.UID == uid && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0, nil
		})
		ended = append(ended, time.Now())
		endPod(t, ns, pod, 1)
	}
	failed := waitJob(t, ns, name, "failed after 3 restarts", inPhase(batch.JobFailed))
	if n := failed.Status.Tasks[0].Replicas[0].RestartCount; n != 3 {
		t.Fatalf("restart count %d, want 3", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 4 {
		t.Fatalf("%d pods created, want 4", len(order))
	}
	const batchPeriod, loose = time.Second, 5 * time.Second
	for i, want := range []time.Duration{0, time.Second, 2 * time.Second} {
		delay := created[i+1].Sub(ended[i])
		t.Logf("restart %d: %v after the pod ended (backoff %v)", i+1, delay.Round(time.Millisecond), want)
		if delay < want {
			t.Errorf("restart %d came %v after its pod ended: shorter than the backoff %v", i+1, delay, want)
		}
		if limit := max(want, batchPeriod) + loose; delay > limit {
			t.Errorf("restart %d came %v after its pod ended: backoff %v, so it is late by more than %v", i+1, delay, want, loose)
		}
	}
}

// TestFailedReplicaShownAfterCleanUp: with clean-up All the pods are gone, and `kubectl
// describe` still says which replica failed, on which node, with which exit code and reason.
func TestFailedReplicaShownAfterCleanUp(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	r := replica("worker", "trainer")
	exits(&r, 3, "500ms")
	job := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "forensics"}, Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{r}, CleanUpPolicy: batch.CleanUpAll,
	}}
	createJob(t, ns, job)
	waitJob(t, ns, job.Name, "failed", inPhase(batch.JobFailed))
	waitFor(t, "the pods cleaned up", jobTimeout, func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	failed := getJob(t, ns, job.Name)
	rs := failed.Status.Tasks[0].Replicas[0]
	if rs.Phase != batch.ReplicaFailed || !strings.HasPrefix(rs.Node, "kwok-node-") || len(rs.Containers) != 1 ||
		rs.Containers[0].ExitCode == nil || *rs.Containers[0].ExitCode != 3 || rs.Containers[0].Reason != "Error" {
		t.Errorf("replica status after clean-up: %+v", rs)
	}
	out, err := kubectl("describe", "genericjob", "-n", ns, job.Name)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	flat := strings.Join(strings.Fields(out), " ") // describe aligns values with spaces
	for _, want := range []string{"Name: forensics-worker-0 Node: " + rs.Node, "Exit Code: 3", "Reason: Error", "exit code 3"} {
		if !strings.Contains(flat, want) {
			t.Errorf("kubectl describe does not show %q:\n%s", want, out)
		}
	}
}

func statusExitCode(r batch.ReplicaStatus) int32 {
	for _, c := range r.Containers {
		if c.ExitCode != nil && *c.ExitCode != 0 {
			return *c.ExitCode
		}
	}
	return 0
}
