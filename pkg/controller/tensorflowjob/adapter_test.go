package tensorflowjob

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

func spec(t string, n int32, ports ...corev1.ContainerPort) batch.TrainingReplicaSpec {
	return batch.TrainingReplicaSpec{Type: t, Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "tensorflow", Image: "tf", Ports: ports}}}}}
}

func TestTFConfig(t *testing.T) {
	all := []batch.TrainingReplicaSpec{spec("chief", 1), spec("worker", 2, corev1.ContainerPort{Name: "tfjob-port", ContainerPort: 3333}), spec("ps", 1), spec("evaluator", 1)}
	configs, err := TFConfigs("mnist", "demo", all)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"worker/1":    `{"cluster":{"chief":["mnist-chief-0.demo.svc:2222"],"ps":["mnist-ps-0.demo.svc:2222"],"worker":["mnist-worker-0.demo.svc:3333","mnist-worker-1.demo.svc:3333"]},"task":{"type":"worker","index":1},"environment":"cloud"}`,
		"evaluator/0": `{"cluster":{"chief":["mnist-chief-0.demo.svc:2222"],"ps":["mnist-ps-0.demo.svc:2222"],"worker":["mnist-worker-0.demo.svc:3333","mnist-worker-1.demo.svc:3333"]},"task":{"type":"evaluator","index":0},"environment":"cloud"}`,
	}
	for key, want := range cases {
		typ, rank := key[:len(key)-2], int32(key[len(key)-1]-'0')
		if got := configs(typ, rank); got != want {
			t.Errorf("TF_CONFIG of %s:\n got %s\nwant %s", key, got, want)
		}
	}
	only, _ := TFConfigs("w", "ns", []batch.TrainingReplicaSpec{spec("worker", 2)})
	if got, want := only("worker", 0), `{"cluster":{"worker":["w-worker-0.ns.svc:2222","w-worker-1.ns.svc:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}`; got != want {
		t.Errorf("worker-only TF_CONFIG:\n got %s\nwant %s", got, want)
	}
}

func plan(t *testing.T, specs ...batch.TrainingReplicaSpec) *engine.Plan {
	t.Helper()
	p, err := engine.PlanDefaulted(Plan, &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "tf", Namespace: "ns"},
		Spec: batch.TensorFlowTrainingJobSpec{ReplicaSpecs: specs}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func final(phase batch.ReplicaPhase, code int32) engine.Replica {
	return engine.Replica{Phase: phase, ExitCode: code, Final: true}
}

var running = engine.Replica{Phase: batch.ReplicaRunning}

// The chief decides (worker 0 without one); a worker or ps failing for good fails the job;
// an evaluator failing does not.
func TestOutcome(t *testing.T) {
	withChief := plan(t, spec("chief", 1), spec("worker", 2), spec("ps", 1), spec("evaluator", 1))
	workersOnly := plan(t, spec("worker", 2))
	cases := []struct {
		name      string
		plan      *engine.Plan
		rs        engine.Replicas
		succeeded *bool
	}{
		{"chief succeeded", withChief, engine.Replicas{"chief": {final(batch.ReplicaSucceeded, 0)}, "worker": {running, running}, "ps": {running}}, ptr.To(true)},
		{"worker 0 succeeded, chief running", withChief, engine.Replicas{"chief": {running}, "worker": {final(batch.ReplicaSucceeded, 0), running}}, nil},
		{"worker 0 succeeded without chief", workersOnly, engine.Replicas{"worker": {final(batch.ReplicaSucceeded, 0), running}}, ptr.To(true)},
		{"ps failed for good", withChief, engine.Replicas{"chief": {running}, "ps": {final(batch.ReplicaFailed, 1)}}, ptr.To(false)},
		{"worker 1 failed for good", withChief, engine.Replicas{"chief": {running}, "worker": {running, final(batch.ReplicaFailed, 2)}}, ptr.To(false)},
		{"evaluator failed", withChief, engine.Replicas{"chief": {running}, "evaluator": {final(batch.ReplicaFailed, 1)}}, nil},
	}
	for _, tc := range cases {
		o := tc.plan.Judge(tc.rs)
		switch {
		case tc.succeeded == nil && o != nil:
			t.Errorf("%s: outcome %+v, want none", tc.name, o)
		case tc.succeeded != nil && (o == nil || o.Succeeded != *tc.succeeded):
			t.Errorf("%s: outcome %+v, want succeeded=%v", tc.name, o, *tc.succeeded)
		}
	}
}

// Restart policies per type, and one backoff limit for all replicas together.
func TestRestartsAndRunPolicy(t *testing.T) {
	w := spec("worker", 2)
	w.RestartPolicy = batch.RestartExitCode
	job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "tf", Namespace: "ns"},
		Spec: batch.TensorFlowTrainingJobSpec{ReplicaSpecs: []batch.TrainingReplicaSpec{w},
			RunPolicy: batch.TrainingRunPolicy{BackoffLimit: ptr.To[int32](3), ActiveDeadlineSeconds: ptr.To[int64](600), CleanUpPolicy: batch.CleanUpAll}}}
	p, err := engine.PlanDefaulted(Plan, job)
	if err != nil {
		t.Fatal(err)
	}
	g := p.Groups[0]
	if g.Restart != batch.RestartExitCode || *p.BackoffLimit != 3 || p.Deadline.Seconds() != 600 || p.CleanUp != batch.CleanUpAll || g.MainContainer != "tensorflow" {
		t.Errorf("group %+v, plan backoff %v deadline %s clean-up %s", g, p.BackoffLimit, p.Deadline, p.CleanUp)
	}
	if env := g.Template(1).Spec.Containers[0].Env; len(env) != 1 || env[0].Name != "TF_CONFIG" {
		t.Errorf("env %+v", env)
	}
	if len(p.ServicePorts) != 1 || p.ServicePorts[0].Port != DefaultPort {
		t.Errorf("service ports %+v", p.ServicePorts)
	}
}

// Debug, pause with resume settings, and the scheduler reach the plan, per type.
func TestRunModeAndScheduler(t *testing.T) {
	job := &batch.TensorFlowTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "tf", Namespace: "ns"},
		Spec: batch.TensorFlowTrainingJobSpec{ReplicaSpecs: []batch.TrainingReplicaSpec{spec("chief", 1), spec("worker", 2)},
			RunMode: &batch.RunMode{Debug: &batch.DebugMode{Enabled: true}, Pause: &batch.PauseMode{Enabled: true,
				ResumeSpecs: []batch.ResumeSpec{{Type: "worker", Command: []string{"python", "resume.py"}}}}},
			Scheduler: &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "default", Priority: 50}}}}
	p, err := engine.PlanDefaulted(Plan, job)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Debug || !p.Paused || p.Scheduler == nil || p.Scheduler.Queue != "default" {
		t.Errorf("plan debug %v paused %v scheduler %+v", p.Debug, p.Paused, p.Scheduler)
	}
	chief, worker := p.Groups[0], p.Groups[1]
	if chief.Type != "chief" || chief.Debug == nil || len(chief.Debug.Command) != 2 || chief.Debug.Command[0] != "sleep" {
		t.Errorf("chief's debug setting %+v", chief.Debug)
	}
	if worker.Resume == nil || worker.Resume.Command[1] != "resume.py" {
		t.Errorf("worker's resume setting %+v", worker.Resume)
	}
}
