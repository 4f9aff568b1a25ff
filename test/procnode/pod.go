package procnode

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// podRunner runs one pod: its sandbox (network namespace, hosts and resolv.conf), volumes,
// init containers in order, then its containers, readiness probes, and status; and stops it
// when it is deleted.
type podRunner struct {
	n                                   *Node
	key, namespace, hostname, subdomain string
	uid                                 types.UID
	labels                              map[string]string
	pod                                 *corev1.Pod
	dir                                 string
	fs                                  *podFS // its tmpfs and /tmp (rootfs.go)

	mu         sync.Mutex
	ip         netip.Addr
	serving    bool // the pod has its address and has not ended
	ready      bool
	containers map[string]*container   // those started, init containers too, by name
	waiting    map[string]waitingState // those that cannot be made, and why (waiting.go)
	netns      string                  // the pod's network namespace

	deleteOnce sync.Once
	deleting   chan time.Duration // the grace period
	done       chan struct{}
}

func newPodRunner(n *Node, pod *corev1.Pod) *podRunner {
	return &podRunner{n: n, key: pod.Namespace + "/" + pod.Name, namespace: pod.Namespace, uid: pod.UID,
		hostname: hostnameOf(pod), subdomain: pod.Spec.Subdomain, labels: pod.Labels, pod: pod.DeepCopy(),
		dir:      filepath.Join(n.opts.StateDir, "pods", pod.Namespace+"_"+pod.Name),
		deleting: make(chan time.Duration, 1), done: make(chan struct{})}
}

func hostnameOf(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

// address is the pod's address while it serves, and whether it is Ready.
func (r *podRunner) address() (netip.Addr, bool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ip, r.ready, r.serving
}

// delete asks the runner to stop the pod within grace, and remove it.
func (r *podRunner) delete(grace time.Duration) {
	r.deleteOnce.Do(func() { r.deleting <- grace })
}

// container is one running container.
type container struct {
	spec      *corev1.Container
	cmd       *exec.Cmd
	env       []string // its command's environment
	dir       string   // its command's working directory ("": the root)
	image     *image   // nil: the machine's programs
	security  processSecurity
	netns     string  // the pod's network namespace
	out       *output // its log (logs.go)
	stdin     io.WriteCloser
	stdinOnce sync.Once
	tty       *os.File // its terminal, with spec.tty
	started   time.Time
	exited    chan struct{}
	code      int32
	ended     time.Time

	mu     sync.Mutex
	probes probeResult // probes.go
}

func (r *podRunner) run(ctx context.Context) {
	defer close(r.done)
	defer r.n.forget(r)
	// What runs beside the pod (token renewals) ends with it, before its files go.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var background sync.WaitGroup
	log := func(format string, args ...any) { r.n.log("pod %s: %s", r.key, fmt.Sprintf(format, args...)) }
	status := corev1.PodStatus{Phase: corev1.PodPending, HostIP: r.n.net.gateway.String(), StartTime: ptr.To(metav1.Now()),
		Conditions: []corev1.PodCondition{condition(corev1.PodScheduled, true, "")}}

	holder, err := r.sandbox()
	if holder != nil {
		defer func() {
			_ = holder.Kill()
			r.mu.Lock()
			r.serving = false
			r.mu.Unlock()
			r.n.net.release(r.ip)
		}()
	}
	if err != nil {
		log("sandbox: %v", err)
		r.finish(ctx, status, "SandboxFailed", err.Error())
		return
	}
	status.PodIP, status.PodIPs = r.ip.String(), []corev1.PodIP{{IP: r.ip.String()}}
	r.writeStatus(ctx, status)
	defer r.removeScratch()
	defer func() {
		cancel()
		background.Wait()
	}()
	volumes, err := r.volumes(ctx, &background)
	if err != nil {
		log("volumes: %v", err)
		r.finish(ctx, status, "VolumesFailed", err.Error())
		return
	}
	// A container the node cannot make as its pod says (runAsNonRoot, say) leaves the pod
	// Pending with nothing run, as a kubelet leaves it; the node does not try again.
	if waiting := r.checkContainers(); waiting {
		status.InitContainerStatuses, status.ContainerStatuses = r.waitingStatuses()
		status.Conditions = setCondition(status.Conditions, condition(corev1.ContainersReady, false, "ContainersNotReady"))
		status.Conditions = setCondition(status.Conditions, condition(corev1.PodReady, false, "ContainersNotReady"))
		log("not started: %s", r.configErrorText())
		r.writeStatus(ctx, status)
		r.waitDeletion(ctx)
		return
	}

	// Init containers, in order; one that fails fails the pod.
	for i := range r.pod.Spec.InitContainers {
		c, err := r.start(ctx, &r.pod.Spec.InitContainers[i], holder, volumes)
		if err != nil {
			log("init container %s: %v", r.pod.Spec.InitContainers[i].Name, err)
			r.finish(ctx, status, "InitContainerFailed", err.Error())
			return
		}
		select {
		case <-c.exited:
		case grace := <-r.deleting:
			r.stop([]*container{c}, grace)
			r.removeUnlessStopping(ctx)
			return
		}
		status.InitContainerStatuses = append(status.InitContainerStatuses, c.status())
		if c.code != 0 {
			r.finish(ctx, status, "InitContainerFailed", fmt.Sprintf("init container %s exited with code %d", c.spec.Name, c.code))
			return
		}
	}
	status.Conditions = append(status.Conditions, condition(corev1.PodInitialized, true, ""))

	var containers []*container
	for i := range r.pod.Spec.Containers {
		c, err := r.start(ctx, &r.pod.Spec.Containers[i], holder, volumes)
		if err != nil {
			log("container %s: %v", r.pod.Spec.Containers[i].Name, err)
			r.stop(containers, 0)
			r.finish(ctx, status, "ContainerFailed", err.Error())
			return
		}
		containers = append(containers, c)
		go r.watchProbes(ctx, c)
	}
	status.Phase = corev1.PodRunning
	log("running at %s", r.ip)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	written := ""
	for {
		ended := 0
		for _, c := range containers {
			select {
			case <-c.exited:
				ended++
			default:
			}
		}
		r.updateReady(containers)
		status = r.podStatus(status, containers, ended == len(containers))
		if text := statusKey(status); text != written {
			r.writeStatus(ctx, status)
			written = text
		}
		if ended == len(containers) {
			log("ended: %s", status.Phase)
			break
		}
		select {
		case <-tick.C:
		case grace := <-r.deleting:
			r.stop(containers, grace)
			r.removeUnlessStopping(ctx)
			return
		case <-ctx.Done():
			r.stop(containers, 0)
			return
		}
	}
	// Ended: the sandbox goes (deferred); the pod object stays until it is deleted.
	r.waitDeletion(ctx)
}

// removeUnlessStopping removes the pod object once its processes are gone, as a kubelet
// does for a pod that was deleted; not when the node itself stops (its context is done, and
// stopAll asked every runner to stop): a kubelet going down leaves its pods' objects.
func (r *podRunner) removeUnlessStopping(ctx context.Context) {
	if ctx.Err() == nil {
		r.n.remove(r.pod)
	}
}

// waitDeletion waits for the pod's deletion, and removes it then.
func (r *podRunner) waitDeletion(ctx context.Context) {
	select {
	case <-r.deleting:
		r.removeUnlessStopping(ctx)
	case <-ctx.Done():
	}
}

// sandbox makes the pod's network namespace and its hosts and resolv.conf files.
func (r *podRunner) sandbox() (*os.Process, error) {
	_ = os.RemoveAll(r.dir)
	if err := os.MkdirAll(filepath.Join(r.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	holder, err := holdNamespace()
	if err != nil {
		return nil, err
	}
	h := fnv.New32a()
	h.Write([]byte(r.uid))
	ip, err := r.n.net.attach(holder, fmt.Sprintf("%08x", h.Sum32()))
	if err != nil {
		return holder, err
	}
	r.mu.Lock()
	r.ip, r.serving, r.netns = ip, true, nsPath(holder)
	r.mu.Unlock()
	names := r.hostname
	if r.subdomain != "" {
		names = fmt.Sprintf("%s.%s.%s.svc.%s %s", r.hostname, r.subdomain, r.namespace, clusterDomain, r.hostname)
	}
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", ip, names)
	resolv := fmt.Sprintf("nameserver %s\nsearch %s.svc.%s svc.%s %s\noptions ndots:5\n", r.n.net.gateway, r.namespace, clusterDomain, clusterDomain, clusterDomain)
	if err := os.WriteFile(filepath.Join(r.dir, "hosts"), []byte(hosts), 0o644); err != nil {
		return holder, err
	}
	return holder, os.WriteFile(filepath.Join(r.dir, "resolv.conf"), []byte(resolv), 0o644)
}

// start starts a container: its init in new mount, UTS and PID namespaces, joined to the
// pod's network, makes its root (its image's or the machine's), mounts and security context,
// and starts its command.
func (r *podRunner) start(ctx context.Context, c *corev1.Container, holder *os.Process, volumes map[string]string) (*container, error) {
	img, err := r.n.images.find(c.Image)
	if err != nil {
		return nil, err
	}
	var cfg *v1.Config
	root, imageRoot, fallbackHome := "/", "", "/root"
	if img != nil {
		if imageRoot, err = r.n.images.rootFS(img); err != nil {
			return nil, fmt.Errorf("image %s: %w", c.Image, err)
		}
		cfg, root, fallbackHome = &img.config, imageRoot, "/"
	}
	sec, err := securityFor(r.pod, c, imageUser(cfg), root, img != nil)
	if err != nil {
		return nil, err
	}
	env, err := containerEnv(ctx, envInputs{kube: r.n.opts.Kube, podIP: r.ip.String(), services: r.n.serviceEnv(r.pod)}, r.pod, c)
	if err != nil {
		return nil, err
	}
	argv, err := command(c, env, cfg)
	if err != nil {
		return nil, err
	}
	var imageEnv []string
	if cfg != nil {
		imageEnv = cfg.Env
	}
	env = processEnv(env, imageEnv, sec.Home, fallbackHome, r.hostname)
	spec := containerSpec{Hostname: r.hostname, NetNS: nsPath(holder), Dir: workingDir(c, cfg), Env: env, Command: argv, TTY: c.TTY,
		Image: imageRoot, Security: sec,
		Mounts: []mount{
			{Source: filepath.Join(r.dir, "hosts"), Target: "/etc/hosts", File: true},
			{Source: filepath.Join(r.dir, "resolv.conf"), Target: "/etc/resolv.conf", File: true},
		}}
	for _, vm := range c.VolumeMounts {
		src, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s names no volume", vm.Name)
		}
		if vm.SubPath != "" {
			src = filepath.Join(src, vm.SubPath)
			if _, err := os.Stat(r.fs.nodeView(src)); os.IsNotExist(err) {
				if err := os.MkdirAll(r.fs.nodeView(src), 0o755); err != nil {
					return nil, err
				}
			}
		}
		fi, err := os.Stat(r.fs.nodeView(src))
		if err != nil {
			return nil, err
		}
		spec.Mounts = append(spec.Mounts, mount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly, File: !fi.IsDir()})
	}
	r.fs.container(&spec, c.Name, img != nil)
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	specPath := filepath.Join(r.dir, "container-"+c.Name+".json")
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, containerArg, specPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = r.n.opts.Log
	ct := &container{spec: c, cmd: cmd, env: env, dir: spec.Dir, image: img, security: sec, netns: spec.NetNS, exited: make(chan struct{})}
	stdio, err := ct.openStdio(LogPath(r.n.opts.StateDir, r.namespace, r.pod.Name, c.Name))
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = stdio // the init's fds 3, 4 and 5: the command's stdin, stdout and stderr
	err = cmd.Start()
	for _, f := range stdio {
		_ = f.Close() // the command's now
	}
	if err != nil {
		ct.closeStdin()
		return nil, err
	}
	ct.started = time.Now()
	r.mu.Lock()
	if r.containers == nil {
		r.containers = map[string]*container{}
	}
	r.containers[c.Name] = ct
	r.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		ct.code = exitCode(cmd.ProcessState)
		ct.ended = time.Now()
		ct.closeStdin()
		close(ct.exited)
	}()
	return ct, nil
}

// imageUser is an image's User ("" without an image).
func imageUser(cfg *v1.Config) string {
	if cfg == nil {
		return ""
	}
	return cfg.User
}

// userArgs are nsenter's arguments that run a command as the container's user (exec and exec
// probes).
func (c *container) userArgs() []string {
	if c.security.UID == 0 && c.security.GID == 0 {
		return nil
	}
	return []string{"-S", strconv.Itoa(int(c.security.UID)), "-G", strconv.Itoa(int(c.security.GID))}
}

func exitCode(s *os.ProcessState) int32 {
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(s.ExitCode())
}

// stop sends SIGTERM to the containers, and SIGKILL to those still there after grace.
func (r *podRunner) stop(containers []*container, grace time.Duration) {
	for _, c := range containers {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, c := range containers {
		select {
		case <-c.exited:
		case <-deadline:
			for _, c := range containers {
				_ = c.cmd.Process.Kill()
			}
			<-c.exited
		}
	}
	r.n.log("pod %s: stopped", r.key)
}

// updateReady records whether every container is ready (the DNS answers for Ready pods).
func (r *podRunner) updateReady(containers []*container) {
	ready := len(containers) > 0
	for _, c := range containers {
		select {
		case <-c.exited:
			ready = false
		default:
			ready = ready && c.probeResults().ready
		}
	}
	r.mu.Lock()
	r.ready = ready
	r.mu.Unlock()
}

// podStatus is the pod's status with its containers as they are.
func (r *podRunner) podStatus(s corev1.PodStatus, containers []*container, ended bool) corev1.PodStatus {
	s.ContainerStatuses = nil
	ready, failed := true, false
	for _, c := range containers {
		cs := c.status()
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
		ready = ready && cs.Ready
		failed = failed || (cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0)
		// Stopped by a probe, it would be restarted, but for restartPolicy Never: the node
		// does not restart it, so the pod fails (probes.go).
		failed = failed || (c.probeResults().killedBy != "" && r.pod.Spec.RestartPolicy != corev1.RestartPolicyNever)
	}
	if ended {
		s.Phase = corev1.PodSucceeded
		if failed {
			s.Phase = corev1.PodFailed
		}
		ready = false
	}
	s.Conditions = setCondition(s.Conditions, condition(corev1.ContainersReady, ready, ""))
	s.Conditions = setCondition(s.Conditions, condition(corev1.PodReady, ready, ""))
	return s
}

func (c *container) status() corev1.ContainerStatus {
	probes := c.probeResults()
	cs := corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, ImageID: "procnode://" + c.spec.Image,
		ContainerID: fmt.Sprintf("procnode://%d", c.cmd.Process.Pid), Ready: probes.ready, Started: ptr.To(probes.started)}
	if c.image != nil {
		cs.ImageID = c.image.id
	}
	// Before its probes' watcher has said so: started without a startup probe, and ready
	// without a readiness probe too.
	if c.spec.StartupProbe == nil {
		cs.Started = ptr.To(true)
		cs.Ready = cs.Ready || c.spec.ReadinessProbe == nil && probes.killedBy == ""
	}
	select {
	case <-c.exited:
		reason, message := "Completed", ""
		if c.code != 0 {
			reason = "Error"
		}
		if probes.killedBy != "" {
			reason, message = probes.killedBy, probes.killMessage
		}
		cs.Ready, cs.Started = false, ptr.To(false)
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: c.code, Reason: reason, Message: message,
			StartedAt: metav1.NewTime(c.started), FinishedAt: metav1.NewTime(c.ended), ContainerID: cs.ContainerID}
	default:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.started)}
	}
	return cs
}

// finish ends a pod that could not run: Failed, with the reason and message.
func (r *podRunner) finish(ctx context.Context, s corev1.PodStatus, reason, message string) {
	s.Phase, s.Reason, s.Message = corev1.PodFailed, reason, message
	r.writeStatus(ctx, s)
	r.waitDeletion(ctx)
}

// writeStatus writes the pod's status, retrying on conflicts; a pod that is gone, or was
// replaced, is left alone.
func (r *podRunner) writeStatus(ctx context.Context, s corev1.PodStatus) {
	pods := r.n.opts.Kube.CoreV1().Pods(r.namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, r.pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.UID != r.uid {
			return nil
		}
		pod.Status = s
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		r.n.log("pod %s: status: %v", r.key, err)
	}
}

// statusKey is what of a status is worth a write when it changes (timestamps aside).
func statusKey(s corev1.PodStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s|", s.Phase, s.PodIP)
	for _, c := range s.Conditions {
		fmt.Fprintf(&b, "%s=%s|", c.Type, c.Status)
	}
	for _, c := range s.ContainerStatuses {
		fmt.Fprintf(&b, "%s %v %v %v|", c.Name, c.Ready, ptr.Deref(c.Started, false), c.State.Terminated != nil)
	}
	return b.String()
}

func condition(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	return corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}
}

// setCondition sets a condition, keeping its transition time while its status holds.
func setCondition(conds []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status == c.Status {
				c.LastTransitionTime = conds[i].LastTransitionTime
			}
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}
