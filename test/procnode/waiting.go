package procnode

import (
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
)

// waitingState is why a container of a pod was not started: a kubelet's reasons.
type waitingState struct{ reason, message string }

// checkContainers checks, before anything runs, that every container of the pod can be
// made: its image, if the node was given it, is one it can run (else ErrImagePull), and its
// security context holds with its image's user (else CreateContainerConfigError, which is
// what a kubelet says of runAsNonRoot with a root user). It records why not, and says whether
// any cannot.
func (r *podRunner) checkContainers() bool {
	r.waiting = map[string]waitingState{}
	for _, list := range [][]corev1.Container{r.pod.Spec.InitContainers, r.pod.Spec.Containers} {
		for i := range list {
			if w, ok := r.checkContainer(&list[i]); !ok {
				r.waiting[list[i].Name] = w
			}
		}
	}
	return len(r.waiting) > 0
}

func (r *podRunner) checkContainer(c *corev1.Container) (waitingState, bool) {
	img, err := r.n.images.find(c.Image)
	if err != nil {
		return waitingState{"ErrImagePull", fmt.Sprintf("image %s: %v", c.Image, err)}, false
	}
	var cfg *v1.Config
	root := "/"
	if img != nil {
		if root, err = r.n.images.rootFS(img); err != nil {
			return waitingState{"CreateContainerError", fmt.Sprintf("image %s: %v", c.Image, err)}, false
		}
		cfg = &img.config
	}
	if _, err := securityFor(r.pod, c, imageUser(cfg), root, img != nil); err != nil {
		var ce configError
		if errors.As(err, &ce) {
			return waitingState{"CreateContainerConfigError", err.Error()}, false
		}
		return waitingState{"CreateContainerError", err.Error()}, false
	}
	return waitingState{}, true
}

// waitingStatuses are the statuses of the containers of a pod that did not start: those
// that cannot be made say why, the others are waiting for them.
func (r *podRunner) waitingStatuses() (initStatuses, statuses []corev1.ContainerStatus) {
	status := func(c *corev1.Container, otherwise string) corev1.ContainerStatus {
		w, ok := r.waiting[c.Name]
		if !ok {
			w = waitingState{reason: otherwise}
		}
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.reason, Message: w.message}}}
	}
	for i := range r.pod.Spec.InitContainers {
		initStatuses = append(initStatuses, status(&r.pod.Spec.InitContainers[i], "PodInitializing"))
	}
	other := "ContainerCreating"
	if len(r.pod.Spec.InitContainers) > 0 {
		other = "PodInitializing"
	}
	for i := range r.pod.Spec.Containers {
		statuses = append(statuses, status(&r.pod.Spec.Containers[i], other))
	}
	return initStatuses, statuses
}

// configErrorText says, for the node's log, why containers did not start.
func (r *podRunner) configErrorText() string {
	var parts []string
	for name, w := range r.waiting {
		parts = append(parts, fmt.Sprintf("%s: %s: %s", name, w.reason, w.message))
	}
	return strings.Join(parts, "; ")
}
