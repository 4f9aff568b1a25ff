package engine

import (
	"testing"
	"time"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// What the tests decide on: the jobs, pods and statuses of decisiontest, which the decision's
// tests use too, and a plan's workers and judge.

// now is the tests' time.
var now = decisiontest.Now

func workers(n int32, policy batch.RestartPolicy, limit *int32) Group {
	return Group{Type: "worker", Replicas: n, Restart: policy, Limit: limit, Template: decisiontest.Template("train")}
}

// whenAllSucceed is the tests' Judge: the job succeeds once every replica has. (No test here
// needs a job that a replica's failure ends: the decision's tests judge that.)
func whenAllSucceed(rs Replicas) *Outcome {
	for _, list := range rs {
		for _, r := range list {
			if !r.Final || r.Phase != batch.ReplicaSucceeded {
				return nil
			}
		}
	}
	return &Outcome{Succeeded: true, Message: "succeeded"}
}

// mustDecide is decision.Decide for a test whose plan builds every child.
func mustDecide(t testing.TB, job Job, plan *Plan, children Children, admission *Verdict, at time.Time) *Decision {
	t.Helper()
	d, err := decision.Decide(job, plan, children, admission, at)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return d
}
