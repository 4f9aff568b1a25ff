package decision

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// ChildName is the name of the pod and Service of a replica: <job>-<type>-<rank>.
func ChildName(job, replicaType string, rank int32) string {
	return fmt.Sprintf("%s-%s-%d", job, replicaType, rank)
}

// podName is the name of the pod of a group's replica of a rank.
func (g *Group) podName(job string, rank int32) string {
	if g.PodName != nil {
		return g.PodName(rank)
	}
	return ChildName(job, g.Type, rank)
}

// childLabels are the labels of a replica's pod and Service; the Service selects by them.
func childLabels(job Job, replicaType string, rank int32) map[string]string {
	return map[string]string{
		batch.LabelJobName:       job.GetName(),
		batch.LabelReplicaType:   replicaType,
		batch.LabelReplicaIndex:  strconv.Itoa(int(rank)),
		batch.LabelControllerUID: string(job.GetUID()),
	}
}

func controllerRef(job Job) []metav1.OwnerReference {
	gvk := job.GetObjectKind().GroupVersionKind()
	return []metav1.OwnerReference{*metav1.NewControllerRef(job, gvk)}
}

// newPod builds the pod of one replica from its group's template: the controller, not the
// kubelet, restarts replicas (so that it can count restarts), hence restartPolicy Never. The
// admitters then add what they assigned (admission, nil when none applies).
func newPod(job Job, plan *Plan, admission *Verdict, g Group, rank int32, resumed bool, attempt int32) *corev1.Pod {
	tmpl := g.Template(rank)
	pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	pod.Name = g.podName(job.GetName(), rank)
	pod.GenerateName = ""
	pod.Namespace = job.GetNamespace()
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	for k, v := range childLabels(job, g.Type, rank) {
		pod.Labels[k] = v
	}
	pod.Labels[batch.LabelAttempt] = strconv.Itoa(int(attempt))
	pod.OwnerReferences = controllerRef(job)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Hostname = pod.Name
	if len(plan.ServicePorts) > 0 && pod.Spec.Subdomain == "" {
		pod.Spec.Subdomain = pod.Name // the replica's headless service gives it a DNS name
	}
	if s := plan.Scheduler; s != nil {
		pod.Spec.SchedulerName = batch.T9kSchedulerName
		pod.Labels[batch.LabelQueue] = s.Queue
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[batch.AnnotationPriority] = strconv.Itoa(int(s.Priority))
	}
	if admission != nil && admission.Admitted && admission.Pod != nil {
		admission.Pod(g.Type, pod)
	}
	if plan.Debug {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[batch.AnnotationRunMode] = batch.RunModeDebug
	}
	switch {
	case plan.Debug && g.Debug != nil:
		applyRunSetting(pod, g.MainContainer, g.Debug.SkipInitContainer, g.Debug.Command, nil, true)
	case resumed && g.Resume != nil:
		applyRunSetting(pod, g.MainContainer, g.Resume.SkipInitContainer, g.Resume.Command, g.Resume.Args, false)
	}
	injectProgress(pod, plan.Progress)
	injectElastic(pod, job, plan, &g)
	injectAgent(pod, plan, attempt)
	injectAttempt(pod)
	return pod
}

// EnvAttempt is the variable that tells every container of a pod its job's attempt.
const EnvAttempt = "T9K_ATTEMPT"

// injectAttempt gives every container, init containers too, the pod's attempt label as
// T9K_ATTEMPT, unless it sets the variable itself. The kubelet reads the label when the
// container starts, so a pod whose label changes gets the new value at its next start.
func injectAttempt(pod *corev1.Pod) {
	v := corev1.EnvVar{Name: EnvAttempt, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['" + batch.LabelAttempt + "']"}}}
	for _, containers := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			if !hasEnv(&containers[i], EnvAttempt) {
				containers[i].Env = append(containers[i].Env, v)
			}
		}
	}
}

// applyRunSetting applies a debug or resume setting to a pod: init containers dropped when
// asked, and the main container's command (and args) replaced where given. A debug command
// replaces the args too, which belong to the training command.
func applyRunSetting(pod *corev1.Pod, mainContainer string, skipInit bool, command, args []string, clearArgs bool) {
	if skipInit {
		pod.Spec.InitContainers = nil
	}
	i := 0
	for j, c := range pod.Spec.Containers {
		if c.Name == mainContainer {
			i = j
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return
	}
	c := &pod.Spec.Containers[i]
	if len(command) > 0 {
		c.Command = append([]string(nil), command...)
		if clearArgs {
			c.Args = nil
		}
	}
	if len(args) > 0 {
		c.Args = append([]string(nil), args...)
	}
}

// replicaService is the headless Service of one replica, named like its pod. It publishes
// the pod's address before the pod is ready, so that replicas find each other while they
// start. It lives with the replicas: a pause and the clean-up delete it.
func replicaService(job Job, plan *Plan, g *Group, rank int32) PlannedChild {
	name := g.podName(job.GetName(), rank)
	return PlannedChild{Kind: ServiceKind, Name: name, Build: func(metav1.Object) (metav1.Object, error) {
		l := childLabels(job, g.Type, rank)
		ports := make([]corev1.ServicePort, len(plan.ServicePorts))
		copy(ports, plan.ServicePorts)
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Labels: l},
			Spec: corev1.ServiceSpec{
				ClusterIP:                corev1.ClusterIPNone,
				Selector:                 l,
				Ports:                    ports,
				PublishNotReadyAddresses: true,
			},
		}, nil
	}}
}
