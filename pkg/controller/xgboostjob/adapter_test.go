package xgboostjob

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

func TestEnv(t *testing.T) {
	env := Env("iris", "ns", 2, 9999)
	want := map[string]string{
		"MASTER_ADDR": "iris-master-0.ns.svc", "MASTER_PORT": "9999", "WORLD_SIZE": "3", "RANK": "2",
		"WORKER_ADDRS": "iris-worker-0.ns.svc,iris-worker-1.ns.svc", "WORKER_PORT": "9999",
		"DMLC_TRACKER_URI": "iris-master-0.ns.svc", "DMLC_TRACKER_PORT": "9999", "DMLC_TASK_ID": "2", "DMLC_NUM_WORKER": "3",
	}
	got := map[string]string{}
	for _, e := range env("worker", 1) {
		got[e.Name] = e.Value
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("worker 1's env\n got %v\nwant %v", got, want)
	}
	for _, e := range env("master", 0) {
		if e.Name == "RANK" && e.Value != "0" {
			t.Errorf("the master's RANK is %s", e.Value)
		}
	}
}

// The corrected example: master then workers, every container with the env, the master
// deciding the outcome, a worker failing for good failing the job.
func TestExample(t *testing.T) {
	job := &batch.XGBoostTrainingJob{}
	if err := examples.Decode("xgboost-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	job.ObjectMeta = metav1.ObjectMeta{Name: job.Name, Namespace: "ns"}
	p, err := engine.PlanDefaulted(Plan, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Groups) != 2 || p.Groups[0].Type != "master" || p.Groups[1].Type != "worker" || p.Groups[1].Replicas != 2 {
		t.Fatalf("groups %+v", p.Groups)
	}
	var names []string
	for _, e := range p.Groups[1].Template(0).Spec.Containers[0].Env {
		names = append(names, e.Name)
	}
	if len(names) != 10 {
		t.Errorf("worker env %v", names)
	}
	final := func(phase batch.ReplicaPhase) engine.Replica { return engine.Replica{Phase: phase, Final: true} }
	running := engine.Replica{Phase: batch.ReplicaRunning}
	if o := p.Judge(engine.Replicas{"master": {final(batch.ReplicaSucceeded)}, "worker": {running, running}}); o == nil || !o.Succeeded {
		t.Errorf("master succeeded: %+v", o)
	}
	if o := p.Judge(engine.Replicas{"master": {running}, "worker": {running, final(batch.ReplicaFailed)}}); o == nil || o.Succeeded {
		t.Errorf("worker failed for good: %+v", o)
	}
	if o := p.Judge(engine.Replicas{"master": {running}, "worker": {final(batch.ReplicaSucceeded), running}}); o != nil {
		t.Errorf("a worker succeeded: %+v", o)
	}
	if p.ServicePorts[0].Port != DefaultPort || p.ServicePorts[0].Name != "xgboostjob-port" {
		t.Errorf("service ports %+v", p.ServicePorts)
	}
}
