package engine

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Where replicas report their progress (docs/progress.md): when the controller serves the
// progress endpoint (Options.Progress), every pod of every kind is told, as Kubeflow
// Trainer's pods are, with the same variables and paths, so that a script written for one
// reports to the other:
//
//	KUBEFLOW_TRAINER_SERVER_URL      https://<endpoint>/apis/batch.tensorstack.dev/v1beta1/namespaces/<ns>/<resource>/<job>/status
//	KUBEFLOW_TRAINER_SERVER_CA_CERT  /var/run/secrets/kubeflow/trainer/ca.crt
//	KUBEFLOW_TRAINER_SERVER_TOKEN    /var/run/secrets/kubeflow/trainer/token
//
// The directory is a projected volume of a ServiceAccount token bound to the pod, for the
// job's own audience (an hour, renewed by the kubelet), and the CA of the endpoint's
// certificate, from the job's ConfigMap <job>-progress-ca, one of the job's children.

// ProgressEndpoint is the controller's progress endpoint as pods reach it.
type ProgressEndpoint struct {
	// URL is its base URL, e.g. https://t9k-job-controller.t9k-system.svc:10443.
	URL string
	// CA returns the PEM of the CA pods trust it by; it may change while the controller runs.
	CA func() []byte
	// WriteInterval is the least time between two writes of a job's progress: a report
	// shows in status.progress up to this long after it was taken (stall.go).
	WriteInterval time.Duration
}

// The variables, files and names that pods are given.
const (
	EnvProgressURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvProgressCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvProgressToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"
	ProgressDir       = "/var/run/secrets/kubeflow/trainer"
	progressVolume    = "t9k-progress"
	progressCAKey     = "ca.crt"
	progressTokenFile = "token"
	// progressTokenSeconds is the token's lifetime; the kubelet renews it at 80%.
	progressTokenSeconds = 3600
)

// ProgressPlan is where a job's pods report.
type ProgressPlan struct {
	// URL is the job's endpoint; Audience its tokens' audience.
	URL, Audience string
	// ConfigMap holds the CA (ca.crt).
	ConfigMap string
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
	plan.Progress = &ProgressPlan{URL: strings.TrimSuffix(p.URL, "/") + batch.StatusPath(resource, job.GetNamespace(), job.GetName()),
		Audience:  batch.ProgressAudience(resource, job.GetNamespace(), job.GetName()),
		ConfigMap: progressConfigMap(job.GetName())}
	plan.ProgressLag = c.reportLag()
	plan.Objects = append(plan.Objects, PlannedChild{Kind: ConfigMapKind, Name: plan.Progress.ConfigMap,
		Build: func(metav1.Object) (metav1.Object, error) {
			return &corev1.ConfigMap{Data: map[string]string{progressCAKey: string(p.CA())}}, nil
		}})
}

// injectProgress gives every container and init container of a pod the variables and the
// directory; nil p gives nothing. What the pod's template already has is kept: a variable it
// sets, a volume of the same name or a mount at the same path (then that container goes
// without).
func injectProgress(pod *corev1.Pod, p *ProgressPlan) {
	if p == nil {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == progressVolume {
			return
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: progressVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: p.Audience,
				ExpirationSeconds: ptr.To[int64](progressTokenSeconds), Path: progressTokenFile}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: p.ConfigMap},
				Items: []corev1.KeyToPath{{Key: progressCAKey, Path: progressCAKey}}}},
		}}}})
	env := []corev1.EnvVar{
		{Name: EnvProgressURL, Value: p.URL},
		{Name: EnvProgressCACert, Value: ProgressDir + "/" + progressCAKey},
		{Name: EnvProgressToken, Value: ProgressDir + "/" + progressTokenFile},
	}
	for _, containers := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			c := &containers[i]
			mounted := false
			for _, m := range c.VolumeMounts {
				mounted = mounted || m.MountPath == ProgressDir
			}
			if mounted {
				continue
			}
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: progressVolume, MountPath: ProgressDir, ReadOnly: true})
			for _, e := range env {
				if !hasEnv(c, e.Name) {
					c.Env = append(c.Env, e)
				}
			}
		}
	}
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
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
