package genericjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

func example(t *testing.T, name string) *batch.GenericJob {
	t.Helper()
	job := &batch.GenericJob{}
	if err := examples.Decode(name, job); err != nil {
		t.Fatal(err)
	}
	return job
}

func TestVariables(t *testing.T) {
	job := &batch.GenericJob{Spec: batch.GenericJobSpec{
		ReplicaSpecs: []batch.GenericReplicaSpec{{Type: "master", Replicas: ptr.To[int32](1)}, {Type: "worker", Replicas: ptr.To[int32](3)}},
		Service:      &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 2222}}},
	}}
	job.Name = "gj"
	noService := job.DeepCopy()
	noService.Spec.Service = nil
	cases := []struct {
		name, in, want, err string
		job                 *batch.GenericJob
	}{
		{name: "type and rank", in: "$(type)-$(rank)", want: "worker-2"},
		{name: "replicas of a type", in: "n=$(replicas[master]),$(replicas[worker])", want: "n=1,3"},
		{name: "host and port", in: "$(service.master[0].host):$(service.port[http])", want: "gj-master-0:2222"},
		{name: "Kubernetes env reference untouched", in: "$(HOME)/$(type)", want: "$(HOME)/worker"},
		{name: "unknown type", in: "$(replicas[ps])", err: `$(replicas[ps]) names replica type "ps", which spec.replicaSpecs does not have`},
		{name: "rank out of range", in: "$(service.worker[3].host)", err: `names rank 3 of type "worker", which has ranks 0 to 2`},
		{name: "unknown port", in: "$(service.port[grpc])", err: `names port "grpc", which spec.service.ports does not have`},
		{name: "malformed service variable", in: "$(service.worker.host)", err: "is malformed"},
		{name: "service variable without spec.service", in: "$(service.port[http])", err: "needs spec.service", job: noService},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := job
			if tc.job != nil {
				j = tc.job
			}
			got, err := newVariables(j).resolve(tc.in, "worker", 2)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTFConfigExample: the TF_CONFIG example as published uses $(service...) without
// spec.service, so the job fails, with a message naming the field and the fix; with
// spec.service each replica gets its own TF_CONFIG.
func TestTFConfigExample(t *testing.T) {
	job := example(t, "generic-tf-config.yaml")
	_, err := engine.PlanDefaulted(Plan, job)
	if err == nil || !strings.Contains(err.Error(), "spec.replicaSpecs[0].template.spec.containers[0].env[TF_CONFIG].value") || !strings.Contains(err.Error(), "add spec.service.ports") {
		t.Fatalf("want the field and the fix named, got %v", err)
	}

	job.Spec.Service = &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 2222}}}
	plan, err := engine.PlanDefaulted(Plan, job)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := plan.Groups[0].Template(1)
	want := `{"task":{"type":"worker","index":1},"cluster":{"worker":["generic-example-worker-0:2222","generic-example-worker-1:2222","generic-example-worker-2:2222","generic-example-worker-3:2222"]}}`
	if got := tmpl.Spec.Containers[0].Env[0].Value; got != want {
		t.Fatalf("TF_CONFIG of worker 1:\n got %s\nwant %s", got, want)
	}
	if len(plan.ServicePorts) != 1 || plan.ServicePorts[0].TargetPort.IntVal != 2222 || plan.ServicePorts[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("service ports %+v", plan.ServicePorts)
	}
}

func TestPlanOfTheExample(t *testing.T) {
	plan, err := engine.PlanDefaulted(Plan, example(t, "generic-example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := plan.Groups[0]
	if g.Type != "worker" || g.Replicas != 4 || g.Restart != batch.RestartNever || plan.CleanUp != batch.CleanUpUnfinished || plan.Debug || plan.Paused {
		t.Errorf("plan %+v, group %+v", plan, g)
	}
}

func replicas(phases ...batch.ReplicaPhase) []engine.Replica {
	out := make([]engine.Replica, len(phases))
	for i, p := range phases {
		out[i] = engine.Replica{Phase: p, Final: p == batch.ReplicaSucceeded || p == batch.ReplicaFailed}
	}
	return out
}

func TestOutcome(t *testing.T) {
	const (
		run  = batch.ReplicaRunning
		ok   = batch.ReplicaSucceeded
		fail = batch.ReplicaFailed
	)
	documented := []batch.ReplicaRule{{"master": {0}}, {"worker": {0, 1, 2}}, {"master": {2}, "worker": {0, 1}}}
	cases := []struct {
		name             string
		success, failure []batch.ReplicaRule
		replicas         engine.Replicas
		want             string // "" means the job goes on
	}{
		{"example: worker 0 succeeded", []batch.ReplicaRule{{"worker": {0}}}, []batch.ReplicaRule{{"worker": {0}}, {"worker": {1}}},
			engine.Replicas{"worker": replicas(ok, run, run, run)}, `succeeded: The job has finished successfully with rule: {"worker": [0]}`},
		{"example: worker 1 failed", []batch.ReplicaRule{{"worker": {0}}}, []batch.ReplicaRule{{"worker": {0}}, {"worker": {1}}},
			engine.Replicas{"worker": replicas(run, fail, run, run)}, `failed: The job is failed with rule: {"worker": [1]}`},
		{"example: worker 2 failed is no rule", []batch.ReplicaRule{{"worker": {0}}}, []batch.ReplicaRule{{"worker": {0}}, {"worker": {1}}},
			engine.Replicas{"worker": replicas(run, run, fail, run)}, ""},
		{"documented success rules: third rule", documented, nil,
			engine.Replicas{"master": replicas(run, run, ok), "worker": replicas(ok, ok, run)}, `succeeded: The job has finished successfully with rule: {"master": [2], "worker": [0, 1]}`},
		{"documented success rules: none holds", documented, nil,
			engine.Replicas{"master": replicas(run, run, ok), "worker": replicas(ok, run, run)}, ""},
		{"failure rule needs all its replicas", nil, []batch.ReplicaRule{{"worker": {0, 1}}},
			engine.Replicas{"worker": replicas(fail, run)}, ""},
		{"no rules: all succeeded", nil, nil, engine.Replicas{"worker": replicas(ok, ok)}, "succeeded: The job has finished successfully: every replica has succeeded."},
		{"no rules: one still running", nil, nil, engine.Replicas{"worker": replicas(ok, run)}, ""},
		{"no failure rules: any final failure fails", []batch.ReplicaRule{{"worker": {0}}}, nil,
			engine.Replicas{"worker": replicas(run, fail)}, "failed: The job is failed: replica gj-worker-1 failed and has no restart left."},
		{"a failure that may restart is not final", nil, nil,
			engine.Replicas{"worker": {{Phase: fail, Final: false}}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := judge(tc.success, tc.failure, "gj")(tc.replicas)
			got := ""
			if o != nil {
				got = map[bool]string{true: "succeeded: ", false: "failed: "}[o.Succeeded] + o.Message
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormatRule(t *testing.T) {
	got := formatRule(batch.ReplicaRule{"worker": {0, 1}, "master": {2}})
	if want := `{"master": [2], "worker": [0, 1]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
