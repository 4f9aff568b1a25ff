package engine

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// Where replicas report their progress (docs/progress.md): when the controller serves the
// progress endpoint (Options.Progress), every pod of every kind is told, as Kubeflow
// Trainer's pods are, with the same variables and paths, so that a script written for one
// reports to the other. The decision gives each pod the variables and the volume of its token
// and CA (the decision package's progress.go); the controller says where the endpoint is,
// for which audience, and makes the CA's ConfigMap, <job>-progress-ca, one of the job's
// children.

// ProgressEndpoint is the controller's progress endpoint as pods reach it.
type ProgressEndpoint struct {
	// URL is its base URL, e.g. https://t9k-job-controller.t9k-system.svc:10443.
	URL string
	// CA returns the PEM of the CA pods trust it by; it may change while the controller runs.
	CA func() []byte
	// WriteInterval is the least time between two writes of a job's progress: a report
	// shows in status.progress up to this long after it was taken (decision/stall.go).
	WriteInterval time.Duration
}

// clockSlack is how far apart the clocks of the controller's replicas may be: a report is
// stamped by whichever replica took it, and the leader reads the stamp by its own clock.
const clockSlack = time.Second

// reportLag is how late a report may show in a job's status: the progress writer's interval
// (a report waits for it after the last write), and the replicas' clocks apart.
func (c *Controller) reportLag() time.Duration {
	if p := c.options.Progress; p != nil {
		return p.WriteInterval + clockSlack
	}
	return clockSlack
}

// progressConfigMap names a job's ConfigMap of the progress endpoint's CA.
func progressConfigMap(job string) string { return job + "-progress-ca" }

// planProgress tells the plan where the job's pods report, and adds the CA's ConfigMap to the
// job's children; nothing without a progress endpoint.
func (c *Controller) planProgress(job Job, plan *Plan) {
	p := c.options.Progress
	if p == nil {
		return
	}
	// The job's status subresource, as the API server names it: pkg/progress serves the same
	// path and checks the same audience.
	resource := strings.ToLower(c.adapter.GroupVersionKind().Kind) + "s"
	plan.Progress = &decision.ProgressPlan{URL: strings.TrimSuffix(p.URL, "/") + batch.StatusPath(resource, job.GetNamespace(), job.GetName()),
		Audience:  batch.ProgressAudience(resource, job.GetNamespace(), job.GetName()),
		ConfigMap: progressConfigMap(job.GetName())}
	plan.ProgressLag = c.reportLag()
	plan.Objects = append(plan.Objects, PlannedChild{Kind: ConfigMapKind, Name: plan.Progress.ConfigMap,
		Build: func(metav1.Object) (metav1.Object, error) {
			return &corev1.ConfigMap{Data: map[string]string{decision.ProgressCAKey: string(p.CA())}}, nil
		}})
}

// IndexChildrenByJob gives a child informer the engine's index by job (IndexByJob) before a
// controller does: the progress endpoint reads a job's pods by it on every replica, those
// that do not lead too. A controller keeps the index it finds.
func IndexChildrenByJob(informer cache.SharedIndexInformer) error {
	if _, ok := informer.GetIndexer().GetIndexers()[IndexByJob]; ok {
		return nil
	}
	return informer.AddIndexers(cache.Indexers{IndexByJob: jobUIDOf})
}
