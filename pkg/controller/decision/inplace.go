package decision

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Restarting in place (spec.restartStrategy: InPlace; docs/lifecycle.md, "Restarting in
// place"). A whole-job restart keeps every pod it can and restarts its containers on the
// kubelet (container restart rules, RestartAllContainers) instead of deleting it:
//
//   - every pod carries an agent, a native sidecar first among its init containers, that
//     reads the pod's attempt label and the released-attempt annotation from a downward-API
//     volume. It exits with AgentRestartExitCode, which restarts all of the pod's containers,
//     when the label leaves the attempt its pod's containers run; and its startup probe holds
//     the pod's other containers, init containers too, until the annotation releases the
//     attempt the label names. It calls no API.
//   - every regular container restarts all of the pod's containers when it fails, so that a
//     failed pod is held, not ended: the agent does not release an attempt twice.
//   - the controller restarts a pod by writing the next attempt to its label, and releases
//     the attempt on every pod once the earlier attempt is down on all of them: the barrier.
//
// The decision reads these pods through presentInPlace, which turns them into the shapes the
// other policies know: a held pod is a failed one, a pod whose earlier attempt is down is
// gone. keepInPlace then turns the deletions and creations they order into label and
// annotation writes.

// The agent's container, volumes and the contract between the controller and the agent (the
// agent takes the paths and the exit code as flags: cmd/t9k-job-controller, agent).
const (
	AgentContainer       = "t9k-restart-agent"
	AgentRestartExitCode = 88
	agentInfoVolume      = "t9k-restart-agent-info"
	agentStateVolume     = "t9k-restart-agent-state"
	agentInfoDir         = "/run/t9k/pod"
	agentStateDir        = "/run/t9k/agent"
	// agentBinary is the controller's binary in its image (hack/image).
	agentBinary = "/usr/local/bin/t9k-job-controller"
	// restartingAllContainers is the reason the kubelet gives the containers it stopped to
	// restart them all (and their last state's exit code is 137, not the failed one's).
	restartingAllContainers = "RestartingAllContainers"
	// InPlaceStopGrace is how long a pod restarted in place may take to stop its containers
	// (its agent reads the new attempt within seconds, and the kubelet kills them at once):
	// past it, the pod is made again.
	InPlaceStopGrace = time.Minute
)

// InPlacePlan is how the job's pods restart in place.
type InPlacePlan struct {
	// AgentImage is the agent's image: the controller's own.
	AgentImage string
}

// PodRestart asks for a pod's containers to restart for the attempt given: its attempt
// label is written.
type PodRestart struct {
	Pod     *corev1.Pod
	Attempt int32
}

// PodRelease lets a pod's containers run the attempt given: its released-attempt annotation
// is written, with the agent's restart count at that moment.
type PodRelease struct {
	Pod           *corev1.Pod
	Attempt       int32
	AgentRestarts int32
}

// injectAgent adds the agent to a pod of a job that restarts in place, and the rule that
// holds a failed pod to every regular container that has no restart policy of its own.
func injectAgent(pod *corev1.Pod, plan *Plan, attempt int32) {
	if plan.InPlace == nil {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[batch.AnnotationReleasedAttempt] = strconv.Itoa(int(attempt))
	always, never := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyNever
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: agentInfoVolume, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "attempt", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['" + batch.LabelAttempt + "']"}},
			{Path: "released", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + batch.AnnotationReleasedAttempt + "']"}},
		}}}},
		corev1.Volume{Name: agentStateVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	args := []string{"agent", "--info-dir=" + agentInfoDir, "--state-dir=" + agentStateDir}
	agent := corev1.Container{
		Name:          AgentContainer,
		Image:         plan.InPlace.AgentImage,
		Command:       []string{agentBinary},
		Args:          append(args, "--restart-exit-code="+strconv.Itoa(AgentRestartExitCode)),
		RestartPolicy: &always,
		RestartPolicyRules: []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{AgentRestartExitCode}}}},
		StartupProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: append([]string{agentBinary}, append(args, "--probe")...)}},
			PeriodSeconds: 1, FailureThreshold: 1 << 30,
		},
		VolumeMounts: []corev1.VolumeMount{{Name: agentInfoVolume, MountPath: agentInfoDir, ReadOnly: true}, {Name: agentStateVolume, MountPath: agentStateDir}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	pod.Spec.InitContainers = append([]corev1.Container{agent}, pod.Spec.InitContainers...)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.RestartPolicy != nil || len(c.RestartPolicyRules) > 0 {
			continue // the user's own rules: a failure they do not hold ends the pod, which is made again
		}
		c.RestartPolicy = &never
		c.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}}}
	}
}

// inPlacePod reports whether a pod restarts in place: it was made with the agent (its
// released-attempt annotation), and it still runs: an ended pod, or one being deleted, is
// what it is.
func inPlacePod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[batch.AnnotationReleasedAttempt]
	return ok && !PodEnded(pod) && pod.DeletionTimestamp == nil
}

// podAttempt is the attempt a pod's label names, released its released-attempt annotation
// (0 when missing or not a number).
func podAttempt(pod *corev1.Pod) (label, released int32) {
	return atoi32(pod.Labels[batch.LabelAttempt]), atoi32(pod.Annotations[batch.AnnotationReleasedAttempt])
}

func atoi32(s string) int32 {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// agentStatus is the agent's container status (nil: none reported yet).
func agentStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == AgentContainer {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// heldDown reports whether nothing of the pod's own runs: its agent runs and holds the
// others (its startup probe has not passed), and no other container runs.
func heldDown(pod *corev1.Pod) bool {
	a := agentStatus(pod)
	if a == nil || a.State.Running == nil || (a.Started != nil && *a.Started) {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, c := range list {
			if c.Name != AgentContainer && c.State.Running != nil {
				return false
			}
		}
	}
	return true
}

// presentInPlace returns the job's pods as the other policies read them, given the job's
// attempt and the replicas' earlier status by pod name: a pod that restarts in place and
// failed in its current attempt is shown as a failed pod (the kubelet holds it, not ended);
// a pod whose earlier attempt is down, waiting to be released into the current one, is not
// shown (hidden, by name): to the policies it is gone, and the pod they would make for it is
// its release (keepInPlace).
func presentInPlace(plan *Plan, pods []*corev1.Pod, attempt int32, prev map[string]batch.ReplicaStatus, failing map[types.UID]*corev1.Pod) (shown []*corev1.Pod, hidden map[string]*corev1.Pod) {
	if plan.InPlace == nil {
		return pods, nil // a job that no longer restarts in place deletes its pods as it restarts them
	}
	shown = pods[:0:0]
	for _, pod := range pods {
		if !inPlacePod(pod) {
			shown = append(shown, pod)
			continue
		}
		label, released := podAttempt(pod)
		switch {
		case label == attempt && released < attempt && heldDown(pod):
			if hidden == nil {
				hidden = map[string]*corev1.Pod{}
			}
			hidden[pod.Name] = pod
		case label == attempt && released == attempt:
			if failed := heldFailed(pod, prev[pod.Name], failing[pod.UID]); failed != nil {
				pod = failed
			}
			shown = append(shown, pod)
		default:
			shown = append(shown, pod)
		}
	}
	return shown, hidden
}

// FailingInPlace reports whether a pod that restarts in place shows one of its containers
// failed, the moment before the kubelet restarts them all.
func FailingInPlace(pod *corev1.Pod) bool {
	if !inPlacePod(pod) {
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
			return true
		}
	}
	return false
}

// heldFailed is a pod of the current attempt that failed, as a failed pod: one of its
// regular containers ended with a non-zero code (the moment before the kubelet restarts them
// all), or the kubelet restarted them all since the attempt was released and holds them. The
// exit code is the failed container's as the pod showed it failing (failing, remembered by
// the engine: nil when not seen), or as the replica's status recorded it; otherwise the
// kubelet's 137 (reason RestartingAllContainers). nil: it did not fail.
func heldFailed(pod *corev1.Pod, prev batch.ReplicaStatus, failing *corev1.Pod) *corev1.Pod {
	if FailingInPlace(pod) {
		failing = pod
	} else {
		a := agentStatus(pod)
		if a == nil || a.RestartCount <= atoi32(pod.Annotations[batch.AnnotationAgentRestarts]) || !heldDown(pod) {
			return nil
		}
		if failing != nil && !sameLife(failing, pod) {
			failing = nil
		}
	}
	failed := &corev1.Pod{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec, Status: *pod.Status.DeepCopy()}
	failed.Status.Phase = corev1.PodFailed
	known := prev.UID == pod.UID && prev.Phase == batch.ReplicaFailed
	for i := range failed.Status.ContainerStatuses {
		c := &failed.Status.ContainerStatuses[i]
		switch {
		case failing != nil && terminatedIn(failing, c.Name) != nil:
			c.State = corev1.ContainerState{Terminated: terminatedIn(failing, c.Name)}
		case c.State.Terminated != nil:
		case known && prevTerminated(prev, c.Name) != nil:
			c.State = corev1.ContainerState{Terminated: prevTerminated(prev, c.Name)}
		case c.LastTerminationState.Terminated != nil:
			c.State = corev1.ContainerState{Terminated: c.LastTerminationState.Terminated.DeepCopy()}
		default:
			c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: restartingAllContainers}}
		}
	}
	return failed
}

// sameLife reports whether a pod's failing state is of the life it is held after: the same
// attempt, released at the same agent restart count, and the agent restarted since.
func sameLife(failing, held *corev1.Pod) bool {
	fl, fr := podAttempt(failing)
	hl, hr := podAttempt(held)
	fa, ha := agentStatus(failing), agentStatus(held)
	return fl == hl && fr == hr && fa != nil && ha != nil && fa.RestartCount < ha.RestartCount &&
		failing.Annotations[batch.AnnotationAgentRestarts] == held.Annotations[batch.AnnotationAgentRestarts]
}

// terminatedIn is how a container of a pod ended (nil: it did not).
func terminatedIn(pod *corev1.Pod, name string) *corev1.ContainerStateTerminated {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == name && c.State.Terminated != nil {
			return c.State.Terminated.DeepCopy()
		}
	}
	return nil
}

// prevTerminated is how a container ended, as the replica's status recorded it.
func prevTerminated(prev batch.ReplicaStatus, name string) *corev1.ContainerStateTerminated {
	for _, c := range prev.Containers {
		if c.Name == name && c.State == batch.ContainerTerminated && c.ExitCode != nil {
			return &corev1.ContainerStateTerminated{ExitCode: *c.ExitCode, Reason: c.Reason}
		}
	}
	return nil
}

// restartsInPlace reports whether a pod goes on in place when the job restarts: the job
// restarts in place and the pod was made to (the pod itself, not as presentInPlace shows it).
// kube-scheduler places a pod with the agent only on a node whose kubelet declares what its
// restart rules need (its NodeDeclaredFeatures filter); a kubelet that does not restart it
// after all is caught by InPlaceStopGrace.
func (x *decider) restartsInPlace(pod *corev1.Pod) bool {
	if x.plan.InPlace == nil || pod == nil {
		return false
	}
	if real := x.inPlaceReal[pod.Name]; real != nil {
		pod = real
	}
	return inPlacePod(pod)
}

// unfitFeatures is how kube-scheduler says that a node lacks a feature a pod needs (its
// NodeDeclaredFeatures filter): a pod with the agent, on a node whose kubelet does not
// declare RestartAllContainersOnContainerExits.
const unfitFeatures = "didn't match Pod's required features"

// unplacedWithAgent finds the pods with the agent that the scheduler cannot place because
// nodes lack the feature their restart rules need: they are made again without the agent
// (Decide makes the job's pods so from then on, and the InPlaceUnavailable condition says
// it), as their replicas never ran, nothing counted. It returns them and their names.
func (x *decider) unplacedWithAgent(all []*replica) (remade []*corev1.Pod, names []string) {
	if x.plan.InPlace == nil {
		return nil, nil
	}
	for _, r := range all {
		p := r.pod
		if p == nil || !inPlacePod(p) || p.Spec.NodeName != "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, unfitFeatures) {
				r.status.Phase, r.view = batch.ReplicaDeleted, Replica{Phase: batch.ReplicaDeleted}
				remade = append(remade, p)
				names = append(names, p.Name)
				break
			}
		}
	}
	return remade, names
}

// setInPlaceUnavailable says, once, that the job's pods are made without the agent.
func (x *decider) setInPlaceUnavailable(s *batch.JobStatus, unplaced []string, now time.Time) {
	if len(unplaced) == 0 || s.ConditionTrue(batch.JobConditionInPlaceUnavailable) {
		return
	}
	setCondition(&s.Conditions, batch.JobConditionInPlaceUnavailable, true, "NoNodeRestartsInPlace",
		"No node that could take "+Listed(unplaced, 5)+" restarts a pod's containers together (its kubelet does not declare "+
			restartAllFeature+"): the job's pods are made without the restart agent, and its whole-job restarts recreate them.", now)
	sortConditions(s.Conditions)
}

// restartAllFeature is the feature a node declares (status.declaredFeatures) when its
// kubelet restarts all of a pod's containers on a RestartAllContainers rule.
const restartAllFeature = "RestartAllContainersOnContainerExits"

// keepInPlace turns what the decision orders for the pods that restart in place into writes
// of their attempt: a pod of an earlier attempt that the whole job's restart deletes is
// restarted for the current one instead (where its node can), a pod restarted so and not down
// yet is waited for, and the new pod of a replica whose pod is down is that pod released.
// Once the job has ended, a pod held after a failure, or not yet released, is deleted
// whatever the clean-up policy says: it runs nothing, and would hold its node's resources.
//
// It returns why pods were made again though they restart in place ("": none was), and when
// to look again at the pods restarted and not yet down (0: none).
func (x *decider) keepInPlace(d *Decision, hidden map[string]*corev1.Pod) (fallback string, wait time.Duration) {
	if x.plan.InPlace == nil {
		return "", 0
	}
	attempt := d.Status.Attempt
	var keep []*corev1.Pod
	var notKept []string
	for _, p := range d.DeletePods {
		real := p
		if r := x.inPlaceReal[p.Name]; r != nil {
			real = r
		}
		label, released := podAttempt(real)
		switch {
		case !inPlacePod(real) || x.finished || x.paused:
		case label < attempt && real.Spec.NodeName != "":
			d.RestartPods = append(d.RestartPods, PodRestart{Pod: real, Attempt: attempt})
			continue
		case label == attempt && released < attempt:
			at, err := time.Parse(time.RFC3339, real.Annotations[batch.AnnotationRestartedAt])
			if left := at.Add(InPlaceStopGrace).Sub(x.now); err != nil || left > 0 {
				wait = MinPositive(wait, left)
				continue // restarted already: released once it is down
			}
			notKept = append(notKept, fmt.Sprintf("%s (its containers did not stop within %s)", real.Name, InPlaceStopGrace))
		}
		keep = append(keep, real)
	}
	d.DeletePods = keep
	create := d.CreatePods[:0:0]
	for _, p := range d.CreatePods {
		if h := hidden[p.Name]; h != nil {
			var restarts int32
			if a := agentStatus(h); a != nil {
				restarts = a.RestartCount
			}
			d.ReleasePods = append(d.ReleasePods, PodRelease{Pod: h, Attempt: attempt, AgentRestarts: restarts})
			continue
		}
		create = append(create, p)
	}
	d.CreatePods = create
	if x.finished {
		for _, real := range x.inPlaceOrder {
			if !inPlacePod(real) || len(Unlisted([]*corev1.Pod{real}, d.DeletePods)) == 0 {
				continue
			}
			label, released := podAttempt(real)
			if released < label || hidden[real.Name] != nil || heldFailed(real, batch.ReplicaStatus{}, nil) != nil {
				d.DeletePods = append(d.DeletePods, real)
			}
		}
	}
	if len(d.InPlaceUnplaced) > 0 {
		fallback = "No node that could take " + Listed(d.InPlaceUnplaced, 5) + " declares " + restartAllFeature +
			": they are made again without the restart agent (condition InPlaceUnavailable)."
	}
	if len(notKept) > 0 {
		fallback = "Pods that did not restart in place were made again instead: " + strings.Join(notKept, ", ") + "."
	}
	return fallback, wait
}
