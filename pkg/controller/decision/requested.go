package decision

import (
	"fmt"
	"strconv"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A restart asked for (docs/lifecycle.md, "Restarting on request"): the job's annotation
// batch.tensorstack.dev/restart-attempt names the attempt to end. While it names the job's
// current attempt, the job restarts whole, as restartjob.go restarts it, behind the same
// barrier, and begins the next attempt; once the attempt has moved on it names a past one
// and does nothing, so that asking twice, or late, restarts once. A paused or ended job is
// not restarted. Nothing is counted: not status.restarts (backoffLimit bounds the program's
// failures, not a person's choices), not a replica's restartCount or disruptions; each
// replica's lastTermination tells it (RestartedWithJob, "asked to restart attempt N").

// restartRequest says why the job restarts on request ("" when it does not): its annotation
// names attempt, the job's current one.
func restartRequest(job Job, attempt int32) string {
	v, ok := job.GetAnnotations()[batch.AnnotationRestartAttempt]
	if !ok {
		return ""
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || int32(n) != attempt {
		return ""
	}
	return fmt.Sprintf("asked to restart attempt %d", attempt)
}

// requestedRestart is the whole job's restart a request asks for: its replicas go with it,
// counted as nothing (restartjob.go's takeAlong).
func requestedRestart(why string) *jobRestart {
	return &jobRestart{why: why, by: "annotation " + batch.AnnotationRestartAttempt, cause: RestartCauseRequest}
}
