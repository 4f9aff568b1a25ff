package decision

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Where replicas report their progress (docs/progress.md): when the controller serves the
// progress endpoint, every pod of every kind is told, as Kubeflow Trainer's pods are, with the
// same variables and paths (the engine's progress.go says where the endpoint is, and adds the
// CA's ConfigMap to the job's children):
//
//	KUBEFLOW_TRAINER_SERVER_URL      https://<endpoint>/apis/batch.tensorstack.dev/v1beta1/namespaces/<ns>/<resource>/<job>/status
//	KUBEFLOW_TRAINER_SERVER_CA_CERT  /var/run/secrets/kubeflow/trainer/ca.crt
//	KUBEFLOW_TRAINER_SERVER_TOKEN    /var/run/secrets/kubeflow/trainer/token
//
// The directory is a projected volume of a ServiceAccount token bound to the pod, for the
// job's own audience (an hour, renewed by the kubelet), and the CA of the endpoint's
// certificate, from the job's ConfigMap <job>-progress-ca, one of the job's children.

// The variables, files and names that pods are given.
const (
	EnvProgressURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvProgressCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvProgressToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"
	ProgressDir       = "/var/run/secrets/kubeflow/trainer"
	// ProgressCAKey is the key of the CA in the job's ConfigMap, and its file in ProgressDir.
	ProgressCAKey     = "ca.crt"
	progressVolume    = "t9k-progress"
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
				Items: []corev1.KeyToPath{{Key: ProgressCAKey, Path: ProgressCAKey}}}},
		}}}})
	env := []corev1.EnvVar{
		{Name: EnvProgressURL, Value: p.URL},
		{Name: EnvProgressCACert, Value: ProgressDir + "/" + ProgressCAKey},
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
