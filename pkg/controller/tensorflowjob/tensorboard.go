package tensorflowjob

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// TensorBoard (spec.tensorboardSpec) is a Deployment and a Service named <job>-tensorboard,
// owned by the job: they live until the job is deleted, past its replicas' clean-up, and
// never decide its outcome.
const (
	tensorboardPort  = 6006
	tensorboardLabel = batch.GroupName + "/tensorboard"
	claimRoot        = "/t9k/pvc"
)

// TensorBoardName names a job's TensorBoard Deployment and Service.
func TensorBoardName(job string) string { return job + "-tensorboard" }

// tensorboardObjects are the TensorBoard's Deployment and Service.
func tensorboardObjects(job string, spec *batch.TensorBoardSpec) []engine.PlannedChild {
	name := TensorBoardName(job)
	labels := map[string]string{tensorboardLabel: job}
	return []engine.PlannedChild{
		{Kind: engine.DeploymentKind, Name: name, Build: func(metav1.Object) (metav1.Object, error) {
			pod, err := tensorboardPod(spec)
			if err != nil {
				return nil, err
			}
			pod.Labels = labels
			return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod}}, nil
		}},
		{Kind: engine.ServiceKind, Name: name, Build: func(metav1.Object) (metav1.Object, error) {
			return &corev1.Service{Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
				{Name: "http", Port: tensorboardPort, TargetPort: intstr.FromInt32(tensorboardPort)}}}}, nil
		}},
	}
}

// tensorboardPod runs the image's tensorboard over the filesets, each claim mounted
// read-only at /t9k/pvc/<claim>.
func tensorboardPod(spec *batch.TensorBoardSpec) (corev1.PodTemplateSpec, error) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	var dirs []string
	claims := map[string]bool{}
	for i, fs := range spec.TrainingLogFilesets {
		rest, ok := strings.CutPrefix(fs, "t9k://pvc/")
		if !ok || rest == "" {
			return corev1.PodTemplateSpec{}, fmt.Errorf("spec.tensorboardSpec.trainingLogFilesets[%d]: %q is not of the form t9k://pvc/<claim>/<path>", i, fs)
		}
		claim, path, _ := strings.Cut(rest, "/")
		if !claims[claim] {
			claims[claim] = true
			vol := fmt.Sprintf("fileset-%d", len(volumes))
			volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true}}})
			mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: claimRoot + "/" + claim, ReadOnly: true})
		}
		dirs = append(dirs, strings.TrimSuffix(claimRoot+"/"+claim+"/"+path, "/"))
	}
	args := []string{"--logdir", dirs[0]}
	if len(dirs) > 1 {
		specs := make([]string, len(dirs))
		for i, d := range dirs {
			specs[i] = fmt.Sprintf("fileset%d:%s", i, d)
		}
		args = []string{"--logdir_spec", strings.Join(specs, ",")}
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "tensorboard", Image: spec.Image,
			Command:        append(append([]string{"tensorboard"}, args...), "--bind_all", fmt.Sprintf("--port=%d", tensorboardPort)),
			Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: tensorboardPort}},
			VolumeMounts:   mounts,
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(tensorboardPort)}}, PeriodSeconds: 5},
		}},
		Volumes: volumes,
	}}, nil
}

// tensorboardState is status.tensorboard as a decision found it.
type tensorboardState struct{ status *batch.DependentStatus }

// SetOn sets status.tensorboard, and says whether it changed.
func (s tensorboardState) SetOn(obj engine.Job) bool {
	job := obj.(*batch.TensorFlowTrainingJob)
	changed := !equalDependent(job.Status.Tensorboard, s.status)
	job.Status.Tensorboard = s.status
	return changed
}

// tensorboardStatus reports the TensorBoard (spec.tensorboardSpec; nil: none) from its
// Deployment among the job's children.
func tensorboardStatus(job string, spec *batch.TensorBoardSpec, children engine.Children) engine.KindStatus {
	if spec == nil {
		return tensorboardState{}
	}
	name := TensorBoardName(job)
	s := &batch.DependentStatus{Action: "Create", Ready: false, Reason: "DependentCreating", Type: corev1.EventTypeNormal,
		Note: fmt.Sprintf("TensorBoard [%s] is being created", name)}
	for _, o := range children.Objects {
		d, ok := o.(*appsv1.Deployment)
		if !ok || d.Name != name {
			continue
		}
		s.Action = "NOP"
		s.Dependent = &batch.DependentReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, Namespace: d.Namespace, UID: d.UID}
		s.Ready = d.Status.ReadyReplicas > 0
		s.Reason, s.Note = "DependentNotReady", fmt.Sprintf("TensorBoard [%s] is not ready yet", name)
		if s.Ready {
			s.Reason, s.Note = "DependentReady", fmt.Sprintf("TensorBoard [%s] is ready", name)
		}
	}
	return tensorboardState{status: s}
}

func equalDependent(a, b *batch.DependentStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	same := a.Action == b.Action && a.Note == b.Note && a.Ready == b.Ready && a.Reason == b.Reason && a.Type == b.Type
	if a.Dependent == nil || b.Dependent == nil {
		return same && a.Dependent == b.Dependent
	}
	return same && *a.Dependent == *b.Dependent
}
