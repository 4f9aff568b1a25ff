package kubectlt9k

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
)

// now is the clock of every test: ages are counted from it, so tables are golden.
var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func meta(ns, name string, age time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-age))}
}

func fixture(objects ...runtime.Object) (*Options, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &Options{Jobs: fake.NewClientset(objects...), Kube: kubefake.NewClientset(), Namespace: "team",
		Out: &out, ErrOut: &errOut, Timeout: 10 * time.Second, Now: func() time.Time { return now }}, &out, &errOut
}

func running() *batch.GenericJob {
	j := &batch.GenericJob{ObjectMeta: meta("team", "train", 5*time.Minute)}
	j.Labels = map[string]string{queueLabel: "team-a"}
	j.Status = batch.JobStatus{Phase: batch.JobRunning, Aggregate: batch.Aggregate{Running: 3, Pending: 1},
		Progress: &batch.JobProgress{ProgressPercentage: ptr.To[int32](40)},
		Tasks:    []batch.TaskStatus{{Type: "worker", RestartCount: 2}}, Attempt: 1}
	return j
}

func failed() *batch.MPIJob {
	j := &batch.MPIJob{ObjectMeta: meta("team", "hvd", 3*time.Hour)}
	j.Status = batch.JobStatus{Phase: batch.JobFailed, Aggregate: batch.Aggregate{Failed: 1, Succeeded: 2}, Restarts: 1, Attempt: 2,
		Progress: &batch.JobProgress{Step: ptr.To[int64](120), TotalSteps: ptr.To[int64](1000)}}
	return j
}

func TestGetPrintsEveryKindInOneTable(t *testing.T) {
	fresh := &batch.XGBoostTrainingJob{ObjectMeta: meta("team", "boost", 20*time.Second)}
	other := &batch.GenericJob{ObjectMeta: meta("elsewhere", "x", time.Minute)}
	o, out, _ := fixture(running(), failed(), fresh, other)
	if err := o.Get(context.Background(), nil, false); err != nil {
		t.Fatal(err)
	}
	want := `KIND                 NAME    PHASE     RUNNING   PROGRESS        RESTARTS   ATTEMPT   QUEUE    AGE
xgboosttrainingjob   boost   Pending   0/0       -               0          -         -        20s
mpijob               hvd     Failed    0/3       step 120/1000   1          2         -        3h
genericjob           train   Running   3/4       40%             2          1         team-a   5m
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}

	o, out, _ = fixture(running(), other)
	o.Namespace = ""
	if err := o.Get(context.Background(), nil, false); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "NAMESPACE ") ||
		!strings.HasPrefix(lines[1], "elsewhere ") || !strings.HasPrefix(lines[2], "team ") {
		t.Errorf("with -A: got\n%s\nwant a NAMESPACE column, elsewhere's job first", out.String())
	}
}

func TestGetSaysWhenThereIsNothing(t *testing.T) {
	o, out, errOut := fixture()
	if err := o.Get(context.Background(), nil, false); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || errOut.String() != "No jobs found in namespace team.\n" {
		t.Errorf("out %q, err %q", out.String(), errOut.String())
	}
}

func TestFindNamesWhatIsWrong(t *testing.T) {
	sameName := &batch.TensorFlowTrainingJob{ObjectMeta: meta("team", "train", time.Minute)}
	o, _, _ := fixture(running(), sameName)
	ctx := context.Background()
	for ref, want := range map[string]string{
		"pytorchjob/train": `unknown kind "pytorchjob": want one of genericjob (gj), mpijob (mj), colossalaijob (caj), tensorflowtrainingjob (tfj), xgboosttrainingjob (xgbj)`,
		"nothere":          `no job named "nothere" in namespace "team" (of any of the five kinds); ` + "`kubectl t9k get` lists them",
		"mj/train":         `no mpijob named "train" in namespace "team"; ` + "`kubectl t9k get` lists the jobs there",
		"train":            `2 jobs are named "train" in namespace "team": name one of genericjob/train, tensorflowtrainingjob/train`,
	} {
		if _, err := find(ctx, o.Jobs, o.Namespace, ref); err == nil || err.Error() != want {
			t.Errorf("find(%q) = %v, want %q", ref, err, want)
		}
	}
	for _, ref := range []string{"gj/train", "genericjob/train", "GenericJob/train", "genericjobs.batch.tensorstack.dev/train", "tfj/train"} {
		if _, err := find(ctx, o.Jobs, o.Namespace, ref); err != nil {
			t.Errorf("find(%q): %v", ref, err)
		}
	}
}

func TestForbiddenSaysWhichRole(t *testing.T) {
	o, _, _ := fixture()
	o.Jobs.(*fake.Clientset).PrependReactor("list", "mpijobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: batch.GroupName, Resource: "mpijobs"}, "", nil)
	})
	err := o.Get(context.Background(), nil, false)
	if err == nil || err.Error() != "you may not list mpijobs in namespace team: ask for the t9k-jobs-view role there (t9k-jobs-edit to change jobs; docs/install.md)" {
		t.Errorf("got %v", err)
	}
}

func TestWhyTellsConditionsTerminationsAndWarnings(t *testing.T) {
	j := failed()
	j.Status.Conditions = []batch.JobCondition{
		{Type: batch.JobConditionRunning, Status: corev1.ConditionFalse, Reason: "Failed", LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Minute))},
		{Type: batch.JobConditionFailed, Status: corev1.ConditionTrue, Reason: "ReplicaFailed", Message: "worker-1 failed with exit code 3: failurePolicy rule 0 fails the job",
			LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Minute))},
		{Type: batch.JobConditionInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Hour))},
	}
	j.Status.Tasks = []batch.TaskStatus{{Type: "worker", Replicas: []batch.ReplicaStatus{
		{Name: "worker-0"},
		{Name: "worker-1", RestartCount: 1, LastTermination: &batch.ReplicaTermination{Phase: batch.ReplicaFailed, Node: "node-3", Attempt: 2,
			Containers: []batch.ContainerStatus{{Name: "mpi-worker", ExitCode: ptr.To[int32](3), Reason: "Error"}},
			Rule:       &batch.FailurePolicyRuleRef{Index: 0, Action: "FailJob"}}},
	}}}
	j.Status.ExcludedNodes = []batch.ExcludedNode{{Node: "node-3", Replica: "worker-1", Reason: "exit code 3", Time: metav1.NewTime(now.Add(-10 * time.Minute))}}
	o, out, _ := fixture(j)
	warning := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "hvd.1"}, Type: corev1.EventTypeWarning, Reason: "ReplicaFailed",
		Message: "worker-1 failed with exit code 3", Count: 2, LastTimestamp: metav1.NewTime(now.Add(-2 * time.Minute)),
		InvolvedObject: corev1.ObjectReference{Kind: "MPIJob", Name: "hvd", Namespace: "team"}}
	o.Kube = kubefake.NewClientset(warning)
	if err := o.Why(context.Background(), "hvd"); err != nil {
		t.Fatal(err)
	}
	want := `mpijob/hvd in namespace team is Failed: 0 running, 2 succeeded, 1 failed replicas; 1 whole-job restarts, attempt 2.
  Failed True (ReplicaFailed, 2m ago): worker-1 failed with exit code 3: failurePolicy rule 0 fails the job
  Running False (Failed, 2m ago)
  Initialized True (-, 3h ago)
Last terminations:
  worker-1: Failed in attempt 2, mpi-worker exited 3 (Error); on node-3; failurePolicy rule 0 decided FailJob; restarted 1 times
Nodes its new pods avoid (spec.failurePolicy.avoidFailedNodes):
  node-3: worker-1 failed there (exit code 3, 10m ago)
Recent warnings:
  2m ago  ReplicaFailed: worker-1 failed with exit code 3 (x2)
Look further:
  kubectl describe mpijob hvd -n team
  kubectl get events -n team --field-selector involvedObject.name=hvd
  kubectl t9k logs mpijob/hvd -n team
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

// playController plays the controller's part for the GenericJobs of namespace team: the first
// time a write makes asked true of a job, its status is written once for each step, in turn.
// The watch is open before it returns, so it sees the test's write that follows.
func playController(t *testing.T, o *Options, asked func(*batch.GenericJob) bool, steps ...func(*batch.JobStatus)) {
	t.Helper()
	jobs := o.Jobs.BatchV1beta1().GenericJobs("team")
	w, err := jobs.Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for e := range w.ResultChan() {
			j, ok := e.Object.(*batch.GenericJob)
			if !ok || !asked(j) {
				continue
			}
			for _, step := range steps {
				step(&j.Status)
				updated, err := jobs.UpdateStatus(context.Background(), j, metav1.UpdateOptions{})
				if err != nil {
					return
				}
				j = updated
			}
			return
		}
	}()
}

func TestPauseWritesTheSpecAndWaitsForThePhase(t *testing.T) {
	o, out, _ := fixture(running())
	jobs := o.Jobs.BatchV1beta1().GenericJobs("team")
	// Paused at once, Pausing while pods go, then Paused: only the last is the pause done.
	playController(t, o, func(j *batch.GenericJob) bool { return j.Spec.RunMode != nil && j.Status.Phase != batch.JobPaused },
		func(s *batch.JobStatus) {
			s.Phase, s.Aggregate = batch.JobPaused, batch.Aggregate{Running: 3}
			s.Conditions = []batch.JobCondition{{Type: batch.JobConditionPaused, Status: corev1.ConditionTrue, Reason: "Pausing"}}
		},
		func(s *batch.JobStatus) { s.Aggregate, s.Conditions[0].Reason = batch.Aggregate{Deleted: 4}, "Paused" })
	if err := o.SetPaused(context.Background(), "train", true); err != nil {
		t.Fatal(err)
	}
	j, err := jobs.Get(context.Background(), "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.RunMode == nil || j.Spec.RunMode.Pause == nil || !j.Spec.RunMode.Pause.Enabled {
		t.Errorf("spec.runMode %+v, want pause enabled", j.Spec.RunMode)
	}
	if got, want := out.String(), "genericjob/train paused: Paused (was Running), 0 replicas running\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	out.Reset()
	if err := o.SetPaused(context.Background(), "train", true); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "genericjob/train is already paused: spec.runMode.pause.enabled is true (phase Paused)\n"; got != want {
		t.Errorf("pausing again printed %q, want %q", got, want)
	}
}

// Restart asks for a restart of the job's current attempt through its annotation, and waits
// until the next attempt runs whole: the barrier's moment (attempt 2, replicas deleted) is
// not the end.
func TestRestartAsksForTheCurrentAttemptAndWaitsForTheNext(t *testing.T) {
	o, out, _ := fixture(running())
	playController(t, o, func(j *batch.GenericJob) bool {
		return j.Annotations[batch.AnnotationRestartAttempt] == "1" && j.Status.Attempt == 1
	},
		func(s *batch.JobStatus) { s.Attempt, s.Aggregate = 2, batch.Aggregate{Deleted: 4} },
		func(s *batch.JobStatus) { s.Aggregate = batch.Aggregate{Running: 4} })
	if err := o.Restart(context.Background(), "train"); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "genericjob/train restarted: attempt 2 (was 1), Running, 4 replicas running\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}

// A change the job does not show in time is an error that says what was asked, what is not
// shown yet, and where to look.
func TestRestartNotShownInTime(t *testing.T) {
	o, _, _ := fixture(running())
	o.Timeout = 100 * time.Millisecond
	err := o.Restart(context.Background(), "train")
	want := "genericjob/train: asked to restart attempt 1, but its next attempt does not run after 100ms; `kubectl t9k why genericjob/train` says why"
	if err == nil || err.Error() != want {
		t.Errorf("restart that nothing carries out: %v, want %q", err, want)
	}
}

func TestRestartRefusesWhatCannotRestart(t *testing.T) {
	paused := running()
	paused.Name = "held"
	paused.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true}}
	fresh := &batch.XGBoostTrainingJob{ObjectMeta: meta("team", "boost", 20*time.Second)}
	o, _, _ := fixture(failed(), paused, fresh)
	ctx := context.Background()
	for ref, want := range map[string]string{
		"hvd":   "mpijob/hvd has ended (Failed): an ended job is not restarted",
		"held":  "genericjob/held is paused: `kubectl t9k resume genericjob/held`",
		"boost": "xgboosttrainingjob/boost has no attempt yet",
	} {
		if err := o.Restart(ctx, ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("restart %s: %v, want %q", ref, err, want)
		}
	}
}

func TestScaleRefusesWhatHasNoSize(t *testing.T) {
	o, _, _ := fixture(running(), failed())
	ctx := context.Background()
	if err := o.Scale(ctx, "hvd", 3); err == nil || !strings.Contains(err.Error(), "mpijob/hvd cannot be resized: only a GenericJob with spec.elastic") {
		t.Errorf("scaling an MPIJob: %v", err)
	}
	if err := o.Scale(ctx, "train", 3); err == nil || !strings.Contains(err.Error(), "genericjob/train has no spec.elastic") {
		t.Errorf("scaling a GenericJob without spec.elastic: %v", err)
	}
}

func TestLogsPrefixEachLineWithItsReplica(t *testing.T) {
	o, out, _ := fixture(running())
	pod := func(typ, rank string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train-" + typ + "-" + rank, Labels: map[string]string{
			batch.LabelJobName: "train", batch.LabelControllerUID: "uid-train", batch.LabelReplicaType: typ, batch.LabelReplicaIndex: rank}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	}
	stranger := pod("worker", "9")
	stranger.Labels[batch.LabelControllerUID] = "uid-of-an-older-train"
	o.Kube = kubefake.NewClientset(pod("worker", "0"), pod("worker", "1"), pod("ps", "0"), stranger)
	if err := o.Logs(context.Background(), "train", LogOptions{Rank: -1}); err != nil {
		t.Fatal(err)
	}
	// The fake clientset's every log is "fake logs".
	want := "ps-0| fake logs\nworker-0| fake logs\nworker-1| fake logs\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if err := o.Logs(context.Background(), "train", LogOptions{Type: "worker", Rank: 1}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "worker-1| fake logs\n" {
		t.Errorf("--type worker --rank 1: got %q", out.String())
	}
	if err := o.Logs(context.Background(), "train", LogOptions{Type: "chief", Rank: -1}); err == nil || !strings.Contains(err.Error(), "genericjob/train has no pods of type chief now") {
		t.Errorf("no pods: %v", err)
	}
}

// --all reads every container of each replica, init containers first, each line naming its
// container.
func TestLogsOfEveryContainer(t *testing.T) {
	o, out, _ := fixture(running())
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train-worker-0", Labels: map[string]string{
		batch.LabelJobName: "train", batch.LabelControllerUID: "uid-train", batch.LabelReplicaType: "worker", batch.LabelReplicaIndex: "0"}},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "fetch"}}, Containers: []corev1.Container{{Name: "main"}, {Name: "exporter"}}}}
	o.Kube = kubefake.NewClientset(p)
	if err := o.Logs(context.Background(), "train", LogOptions{Rank: -1, All: true}); err != nil {
		t.Fatal(err)
	}
	if want := "worker-0/fetch| fake logs\nworker-0/main| fake logs\nworker-0/exporter| fake logs\n"; out.String() != want {
		t.Errorf("--all: got %q, want %q", out.String(), want)
	}
}

// --attempt reads the pods of one attempt; an earlier attempt's pods went with its restart,
// and an attempt the job has not reached is named as such.
func TestLogsOfAnAttempt(t *testing.T) {
	j := running()
	j.Status.Attempt = 2
	o, out, _ := fixture(j)
	pod := func(rank, attempt string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train-worker-" + rank, Labels: map[string]string{
			batch.LabelJobName: "train", batch.LabelControllerUID: "uid-train", batch.LabelReplicaType: "worker", batch.LabelReplicaIndex: rank,
			batch.LabelAttempt: attempt}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	}
	o.Kube = kubefake.NewClientset(pod("0", "2"), pod("1", "2"))
	if err := o.Logs(context.Background(), "train", LogOptions{Rank: -1, Attempt: 2}); err != nil || out.String() != "worker-0| fake logs\nworker-1| fake logs\n" {
		t.Errorf("--attempt 2: %v, printed %q", err, out.String())
	}
	if err := o.Logs(context.Background(), "train", LogOptions{Rank: -1, Attempt: 1}); err == nil ||
		!strings.Contains(err.Error(), "genericjob/train has no pods of attempt 1 left: a whole-job restart deletes the pods of the attempt it ends") {
		t.Errorf("--attempt 1: %v", err)
	}
	if err := o.Logs(context.Background(), "train", LogOptions{Rank: -1, Attempt: 3}); err == nil ||
		!strings.Contains(err.Error(), "genericjob/train has no attempt 3: its attempts are 1 to 2") {
		t.Errorf("--attempt 3: %v", err)
	}
}

func TestSplitTimestamp(t *testing.T) {
	at, text := splitTimestamp("2026-12-06T12:00:01.5Z step 3 loss 0.2")
	if text != "step 3 loss 0.2" || !at.Equal(time.Date(2026, 12, 6, 12, 0, 1, 5e8, time.UTC)) {
		t.Errorf("got %v %q", at, text)
	}
	if at, text := splitTimestamp("no stamp here"); !at.IsZero() || text != "no stamp here" {
		t.Errorf("got %v %q", at, text)
	}
}

// TestFollowEndsWithTheJob: -f reads every replica's pod and returns once the job has ended
// and the streams are read.
func TestFollowEndsWithTheJob(t *testing.T) {
	j := running()
	j.Status.Phase = batch.JobSucceeded
	o, out, _ := fixture(j)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train-worker-0", Labels: map[string]string{
		batch.LabelJobName: "train", batch.LabelControllerUID: "uid-train", batch.LabelReplicaType: "worker", batch.LabelReplicaIndex: "0"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	o.Kube = kubefake.NewClientset(pod)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.Logs(ctx, "train", LogOptions{Rank: -1, Follow: true}); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("logs -f returned only when the test's context ended")
	}
	if out.String() != "worker-0| fake logs\n" {
		t.Errorf("got %q", out.String())
	}
}

func TestExecFindsTheReplicaOrSaysWhichThereAre(t *testing.T) {
	o, _, _ := fixture(running())
	pod := func(typ, rank string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train-" + typ + "-" + rank, Labels: map[string]string{
			batch.LabelJobName: "train", batch.LabelControllerUID: "uid-train", batch.LabelReplicaType: typ, batch.LabelReplicaIndex: rank}}}
	}
	o.Kube = kubefake.NewClientset(pod("worker", "0"), pod("worker", "1"), pod("ps", "0"))
	ctx := context.Background()
	j, err := find(ctx, o.Jobs, "team", "train")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := o.replicaPod(ctx, j, "worker", 1); err != nil || p.Name != "train-worker-1" {
		t.Errorf("worker 1: %v, %v", p, err)
	}
	for _, c := range []struct {
		typ  string
		rank int
		want string
	}{
		{"", 0, "genericjob/train has replicas of types ps, worker: say which with --type"},
		{"worker", 5, "genericjob/train has no pod of type worker and rank 5 now (ranks there: 0, 1)"},
		{"chief", 0, `genericjob/train has no pod of type "chief" now (its pods' types: ps, worker); ` + "`kubectl t9k why genericjob/train` says why"},
	} {
		if _, err := o.replicaPod(ctx, j, c.typ, c.rank); err == nil || err.Error() != c.want {
			t.Errorf("type %q rank %d: %v, want %q", c.typ, c.rank, err, c.want)
		}
	}
	if err := o.Exec(ctx, "train", ExecOptions{Type: "worker"}, nil); err == nil || !strings.Contains(err.Error(), "no command") {
		t.Errorf("exec without a command: %v", err)
	}
}

func TestDebugCopiesTheJobInDebugMode(t *testing.T) {
	j := running()
	j.Spec.ReplicaSpecs = []batch.GenericReplicaSpec{{Type: "worker", Replicas: ptr.To[int32](2)}}
	j.Spec.RunMode = &batch.RunMode{Pause: &batch.PauseMode{Enabled: true},
		Debug: &batch.DebugMode{ReplicaSpecs: []batch.ReplicaDebugSet{{Type: "worker", SkipInitContainer: true}}}}
	o, out, _ := fixture(j)
	o.NoWait = true
	if err := o.Debug(context.Background(), "train"); err != nil {
		t.Fatal(err)
	}
	cp, err := o.Jobs.BatchV1beta1().GenericJobs("team").Get(context.Background(), "train-debug", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := cp.Spec.RunMode
	if m == nil || m.Pause != nil || m.Debug == nil || !m.Debug.Enabled || len(m.Debug.ReplicaSpecs) != 1 || !m.Debug.ReplicaSpecs[0].SkipInitContainer {
		t.Errorf("the copy's runMode %+v: want debug on, the original's per-type settings kept, no pause", m)
	}
	if *cp.Spec.ReplicaSpecs[0].Replicas != 2 || cp.Labels[queueLabel] != "team-a" {
		t.Errorf("the copy's spec or labels differ from the original's: %+v %v", cp.Spec.ReplicaSpecs, cp.Labels)
	}
	if got, want := out.String(), "genericjob/train-debug made in debug mode; `kubectl t9k get genericjob/train-debug -w` follows it\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}
