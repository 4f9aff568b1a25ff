package launcher

import (
	"strings"
	"testing"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// The verdict names the cause, whichever of the pods' events the controller saw first.
func TestJudge(t *testing.T) {
	running := engine.Replica{Phase: batch.ReplicaRunning, Ready: true}
	killed := engine.Replica{Phase: batch.ReplicaFailed, ExitCode: 137, Final: true}
	launcherFailed := engine.Replica{Phase: batch.ReplicaFailed, ExitCode: 205, Final: true}
	cases := []struct {
		name     string
		replicas engine.Replicas
		want     string // "" for no outcome; "+" prefix for success
	}{
		{"launcher succeeded", engine.Replicas{"launcher": {{Phase: batch.ReplicaSucceeded, Final: true}}, "worker": {running, running}},
			"+The job has ended"},
		{"launcher failed alone", engine.Replicas{"launcher": {launcherFailed}, "worker": {running, running}},
			"The job exited with an error code: job-launcher failed with exit code 205."},
		// A worker killed while mpirun ran makes mpirun exit a second later: when one sync sees
		// both ends, the worker is still the cause.
		{"worker killed, launcher failed in the same sync", engine.Replicas{"launcher": {launcherFailed}, "worker": {running, killed}},
			"The job failed: worker job-worker-1 failed with exit code 137; workers must run until the launcher ends."},
		{"worker killed, launcher still running", engine.Replicas{"launcher": {running}, "worker": {running, killed}},
			"The job failed: worker job-worker-1 failed with exit code 137; workers must run until the launcher ends."},
		{"worker lost, launcher failed in the same sync", engine.Replicas{"launcher": {launcherFailed}, "worker": {{Phase: batch.ReplicaDeleted, Lost: true}, running}},
			"The job failed: worker job-worker-0 was deleted after the launcher started."},
		{"worker lost before the launcher started", engine.Replicas{"launcher": {{Held: true}}, "worker": {{Phase: batch.ReplicaCreating, Lost: true}, running}},
			""},
		{"launcher lost", engine.Replicas{"launcher": {{Phase: batch.ReplicaDeleted, Lost: true}}, "worker": {running}},
			"The job failed: job-launcher was deleted while it ran."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Judge("job", "The job has ended.")(tc.replicas)
			got := ""
			if o != nil {
				got = o.Message
				if o.Succeeded {
					got = "+" + got
				}
			}
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Errorf("outcome %q, want %q", got, tc.want)
			}
		})
	}
}
