package genericjob

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// ruleTypes are the replica types, and their replicas, of the job FuzzRules judges.
var ruleTypes = map[string]int{"master": 3, "worker": 4}

// validRules is what the CRD's schema and CEL rules accept (genericjob_types.go): at most 16
// rules, each naming 1 to 16 types of spec.replicaSpecs, each with 1 to 64 ranks that exist.
func validRules(rules []batch.ReplicaRule) bool {
	if len(rules) > 16 {
		return false
	}
	for _, rule := range rules {
		if len(rule) < 1 || len(rule) > 16 {
			return false
		}
		for t, ranks := range rule {
			n, ok := ruleTypes[t]
			if !ok || len(ranks) < 1 || len(ranks) > 64 {
				return false
			}
			for _, r := range ranks {
				if r < 0 || int(r) >= n {
					return false
				}
			}
		}
	}
	return true
}

// fuzzReplicas makes a status of every replica of ruleTypes from bytes, cycled: phase, final,
// exit code, ready, lost and held all vary.
func fuzzReplicas(states []byte) engine.Replicas {
	phases := []batch.ReplicaPhase{batch.ReplicaSucceeded, batch.ReplicaFailed, batch.ReplicaRunning, batch.ReplicaPending,
		batch.ReplicaCreating, batch.ReplicaUnknown, batch.ReplicaDeleted, ""}
	rs := engine.Replicas{}
	i := 0
	for _, t := range []string{"master", "worker"} {
		for range ruleTypes[t] {
			var b byte
			if len(states) > 0 {
				b = states[i%len(states)]
			}
			i++
			rs[t] = append(rs[t], engine.Replica{Phase: phases[b%8], Final: b&8 != 0, ExitCode: int32(b >> 4),
				Ready: b&16 != 0, Lost: b&32 != 0, Held: b&64 != 0})
		}
	}
	return rs
}

// ruleHolds is the docs' meaning of a rule: every replica it names has ended for good in the
// phase.
func ruleHolds(rule batch.ReplicaRule, rs engine.Replicas, phase batch.ReplicaPhase) bool {
	for t, ranks := range rule {
		for _, r := range ranks {
			if r < 0 || int(r) >= len(rs[t]) || !rs[t][r].Final || rs[t][r].Phase != phase {
				return false
			}
		}
	}
	return true
}

// ruleSeeds are the rules of the documented examples and of the docs' rule example.
func ruleSeeds(f *testing.F) [][2]string {
	var seeds [][2]string
	for _, name := range examples.Names() {
		job := &batch.GenericJob{}
		if err := examples.Decode(name, job); err != nil || job.Kind != "GenericJob" {
			continue
		}
		s, _ := json.Marshal(job.Spec.SuccessRules)
		fl, _ := json.Marshal(job.Spec.FailureRules)
		seeds = append(seeds, [2]string{string(s), string(fl)})
	}
	if len(seeds) == 0 {
		f.Fatal("no GenericJob examples")
	}
	return append(seeds,
		[2]string{`[{"master": [0]}, {"worker": [0, 1, 2]}, {"master": [2], "worker": [0, 1]}]`, `[{"master": [0]}]`},
		[2]string{`null`, `null`},
		[2]string{`[{"worker": [3, 3]}]`, `[{"master": [1], "worker": [2]}]`},
		[2]string{`[{"worker": [-1]}]`, `[{"ps": [0]}, {"master": [7]}]`}) // refused by the API server
}

// FuzzRules judges any success and failure rules on any replica status.
// What the code promises (adapter.go, judge, and the CRD's validation):
//   - no panic, for any rules that decode, even those the API server refuses: the judge runs
//     in the controller's decision, and a panic there would stop every job;
//   - the outcome depends on the replicas only: judging the same status again gives the
//     same outcome, message included;
//   - for rules that validate: failure rules are read first, and the job fails with the
//     first failure rule that holds, the message naming it so that it parses back to that
//     rule; without failure rules, it fails when a replica failed for good, and the message
//     names that replica; else it succeeds with the first success rule that holds (or, with
//     none, when every replica succeeded); else the job goes on.
func FuzzRules(f *testing.F) {
	for _, s := range ruleSeeds(f) {
		f.Add(s[0], s[1], []byte{0x08, 0x09, 0x02, 0x18, 0x19})
		f.Add(s[0], s[1], []byte{0x08})
	}
	f.Fuzz(func(t *testing.T, successJSON, failureJSON string, states []byte) {
		var success, failure []batch.ReplicaRule
		if json.Unmarshal([]byte(successJSON), &success) != nil || json.Unmarshal([]byte(failureJSON), &failure) != nil {
			return
		}
		rs := fuzzReplicas(states)
		judgeOf := judge(success, failure, "gj")
		got := judgeOf(rs)
		for range 5 {
			if again := judgeOf(rs); !reflect.DeepEqual(again, got) {
				t.Fatalf("rules %s / %s on %+v: judged %+v, then %+v", successJSON, failureJSON, rs, got, again)
			}
		}
		if !validRules(success) || !validRules(failure) {
			return
		}
		firstHolding := func(rules []batch.ReplicaRule, phase batch.ReplicaPhase) batch.ReplicaRule {
			for _, r := range rules {
				if ruleHolds(r, rs, phase) {
					return r
				}
			}
			return nil
		}
		anyFailed, allSucceeded := "", true
		for _, t := range []string{"master", "worker"} {
			for rank, r := range rs[t] {
				if r.Final && r.Phase == batch.ReplicaFailed && anyFailed == "" {
					anyFailed = engine.ChildName("gj", t, int32(rank))
				}
				allSucceeded = allSucceeded && r.Final && r.Phase == batch.ReplicaSucceeded
			}
		}
		parseRule := func(message, prefix string) batch.ReplicaRule {
			var rule batch.ReplicaRule
			if !strings.HasPrefix(message, prefix) || json.Unmarshal([]byte(strings.TrimPrefix(message, prefix)), &rule) != nil {
				t.Fatalf("message %q does not name a rule after %q", message, prefix)
			}
			return rule
		}
		switch fr, sr := firstHolding(failure, batch.ReplicaFailed), firstHolding(success, batch.ReplicaSucceeded); {
		case fr != nil:
			if got == nil || got.Succeeded || !reflect.DeepEqual(parseRule(got.Message, "The job is failed with rule: "), fr) {
				t.Fatalf("failure rule %v holds on %+v, but the outcome is %+v", fr, rs, got)
			}
		case len(failure) == 0 && anyFailed != "":
			if got == nil || got.Succeeded || !strings.Contains(got.Message, "replica gj-") {
				t.Fatalf("%s failed for good with no failure rules, but the outcome is %+v", anyFailed, got)
			}
			name := strings.Fields(strings.TrimPrefix(got.Message, "The job is failed: replica "))[0]
			typ, rank, ok := strings.Cut(strings.TrimPrefix(name, "gj-"), "-")
			if !ok || len(rs[typ]) == 0 || rank == "" {
				t.Fatalf("outcome %+v names no replica", got)
			}
			var r int
			if err := json.Unmarshal([]byte(rank), &r); err != nil || r >= len(rs[typ]) || !rs[typ][r].Final || rs[typ][r].Phase != batch.ReplicaFailed {
				t.Fatalf("outcome %+v names a replica that did not fail for good", got)
			}
		case sr != nil:
			if got == nil || !got.Succeeded || !reflect.DeepEqual(parseRule(got.Message, "The job has finished successfully with rule: "), sr) {
				t.Fatalf("success rule %v holds on %+v, but the outcome is %+v", sr, rs, got)
			}
		case len(success) == 0 && allSucceeded:
			if got == nil || !got.Succeeded {
				t.Fatalf("every replica succeeded and there are no success rules, but the outcome is %+v", got)
			}
		default:
			if got != nil {
				t.Fatalf("no rule holds on %+v, but the outcome is %+v", rs, got)
			}
		}
	})
}

// TestJudgeCrashers keeps what FuzzRules found (testdata/fuzz/FuzzRules).
//   - default-rules-two-types-failed: without failure rules, with master 1 and worker 1
//     both failed for good, the message named whichever type a map gave first, so two
//     decisions on the same status could disagree; it now names the first by type name.
//   - negative-rank: a rule naming rank -1 indexed the replicas with it and panicked, which
//     stops the controller; a rank that does not exist now never holds.
func TestJudgeCrashers(t *testing.T) {
	rs := fuzzReplicas([]byte{0x08, 0x09, 0x02, 0x18, 0x19})
	want := "The job is failed: replica gj-master-1 failed and has no restart left."
	for range 20 {
		if got := judge(nil, nil, "gj")(rs); got == nil || got.Message != want {
			t.Fatalf("judge = %+v, want %q", got, want)
		}
	}
	negative := []batch.ReplicaRule{{"worker": {-1}}}
	if got := judge(negative, negative, "gj")(fuzzReplicas([]byte{0x08})); got != nil {
		t.Errorf("a rule naming rank -1 held: %+v", got)
	}
}
