package progress

import (
	"strings"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Where a job's replicas report (docs/progress.md, "The endpoint"):
//
//	POST /apis/batch.tensorstack.dev/v1beta1/namespaces/{namespace}/{resource}/{name}/status
//
// shaped as the job's status subresource in the API server, as Kubeflow Trainer's is (its
// /apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status). The token a
// pod presents is bound to the same path, less its /apis/ prefix: a token minted for one job
// is refused by every other job's endpoint.

// Resources are the job kinds' resources, which the path names.
var Resources = []string{"genericjobs", "mpijobs", "colossalaijobs", "tensorflowtrainingjobs", "xgboosttrainingjobs"}

// JobRef names a job by its resource, namespace and name.
type JobRef struct {
	Resource, Namespace, Name string
}

func (j JobRef) String() string { return j.Resource + "/" + j.Namespace + "/" + j.Name }

// Path is the URL path of the job's endpoint.
func Path(j JobRef) string { return batch.StatusPath(j.Resource, j.Namespace, j.Name) }

// Audience is the audience of the tokens the job's pods present.
func Audience(j JobRef) string { return batch.ProgressAudience(j.Resource, j.Namespace, j.Name) }

// parsePath reads a job from its endpoint's path; ok is false for any other path.
func parsePath(path string) (j JobRef, ok bool) {
	rest, found := strings.CutPrefix(path, "/apis/"+batch.GroupName+"/"+batch.SchemeGroupVersion.Version+"/namespaces/")
	if !found {
		return j, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[3] != "status" || parts[0] == "" || parts[2] == "" {
		return j, false
	}
	j = JobRef{Resource: parts[1], Namespace: parts[0], Name: parts[2]}
	for _, r := range Resources {
		if r == j.Resource {
			return j, true
		}
	}
	return j, false
}
