package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/test/harness"
	"github.com/t9k-jobs/t9k-jobs/test/testimage"
)

// Images on the process node (README, "The process node"): pods whose image the node was
// given as an archive run from the image's root file system, with its entrypoint, env and
// user, under their security context, probes, service account and Services, as a kubelet runs
// them. The test images hold one static program, test/imageprobe, which reports what it sees.

const (
	// probeImage runs as 1234:1234 (probe in its /etc/passwd, also in group extra, 2345), in
	// /work, with PROBE_IMAGE_ENV and PROBE_OVERRIDDEN set.
	probeImage = "t9k.test/imageprobe:v1"
	// rootImage is the same program with no user: root.
	rootImage = "t9k.test/imageprobe-root:v1"
)

var testImages struct {
	once  sync.Once
	err   error
	probe testimage.Digests
}

// needTestImages builds the test images, once, into the process node's image directory.
func needTestImages(t *testing.T) {
	t.Helper()
	testImages.once.Do(func() {
		dir, err := os.MkdirTemp("", "t9k-e2e-imageprobe-")
		if err != nil {
			testImages.err = err
			return
		}
		defer os.RemoveAll(dir)
		binary := filepath.Join(dir, "imageprobe")
		if err := harness.Build(repoRoot, "./test/imageprobe", binary, "CGO_ENABLED=0"); err != nil {
			testImages.err = err
			return
		}
		program, err := os.ReadFile(binary)
		if err != nil {
			testImages.err = err
			return
		}
		files := []testimage.File{
			{Path: "imageprobe", Mode: 0o755, Data: program},
			{Path: "image-only.txt", Mode: 0o644, Data: []byte("from the image\n")},
			{Path: "data", Dir: true, Mode: 0o1777},
			{Path: "etc", Dir: true, Mode: 0o755},
			{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nprobe:x:1234:1234:probe:/home/probe:/sbin/nologin\n")},
			{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nprobe:x:1234:\nextra:x:2345:probe\n")},
		}
		config := v1.Config{Entrypoint: []string{"/imageprobe"}, Cmd: []string{"serve"}, WorkingDir: "/work", User: "1234:1234",
			Env: []string{"PATH=/", "PROBE_IMAGE_ENV=from-image", "PROBE_OVERRIDDEN=from-image"}}
		if testImages.probe, err = testimage.Write(filepath.Join(procNode.images, "imageprobe.tar"), probeImage,
			testimage.Image{Layers: [][]testimage.File{files}, Config: config, Index: true}); err != nil {
			testImages.err = err
			return
		}
		config.User = ""
		_, testImages.err = testimage.Write(filepath.Join(procNode.images, "imageprobe-root.tar"), rootImage,
			testimage.Image{Layers: [][]testimage.File{files}, Config: config})
	})
	if testImages.err != nil {
		t.Fatal(testImages.err)
	}
}

// imagePod is a pod of the process node with one container of image.
func imagePod(name, image string, args ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		Containers: []corev1.Container{{Name: "probe", Image: image, Args: args,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
	}}
	onProcNode(&pod.Spec)
	return pod
}

func createPod(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	if _, err := env.kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// reportOf waits for a container's report (test/imageprobe) and returns its checks by name.
func reportOf(t *testing.T, ns, pod, container string) map[string]string {
	t.Helper()
	waitReal(t, pod+"'s report", func(context.Context) (bool, error) {
		return strings.Contains(containerLog(ns, pod, container), "check api:"), nil
	})
	out := map[string]string{}
	for _, line := range strings.Split(containerLog(ns, pod, container), "\n") {
		if rest, ok := strings.CutPrefix(line, "check "); ok {
			if k, v, ok := strings.Cut(rest, ": "); ok {
				out[k] = v
			}
		}
	}
	return out
}

func wantChecks(t *testing.T, who string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s is %q, want %q", who, k, got[k], v)
		}
	}
}

// TestProcNodeImage: a pod of the test image runs from the image's root (its file is there,
// the machine's python3 is not), as the image's user with its groups, or as runAsUser, with
// the image's entrypoint, working directory and env combined with the container's as
// Kubernetes defines it; a restricted security context (runAsNonRoot, a read-only root,
// capabilities dropped, no privilege escalation) holds while an emptyDir stays writable;
// resourceFieldRef gives the memory limit in bytes and, without a limit, the node's CPUs; the
// service account's token, mounted by admission, and its CA reach the API server through the
// kubernetes Service; an explicit projected token is bound to the pod; the httpGet readiness
// probe turns the pod Ready once the startup probe has passed; `kubectl exec` runs as the
// container's user.
func TestProcNodeImage(t *testing.T) {
	ns := namespace(t)
	needKubeletAPI(t, ns)
	needTestImages(t)
	pod := imagePod("probe", probeImage)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SupplementalGroups: []int64{3456},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "SCRATCH", Value: "/scratch"}, {Name: "PROBE_OVERRIDDEN", Value: "from-pod"}, {Name: "READY_AFTER", Value: "3s"},
		{Name: "T9K_MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "probe", Resource: "limits.memory"}}},
		{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}}}
	c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}
	c.StartupProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080),
		HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "startup"}}}}}
	c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}}}
	c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "bound", MountPath: "/var/run/secrets/t9k", ReadOnly: true}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "bound", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "t9k-test", ExpirationSeconds: ptr.To[int64](600), Path: "token"}}}}}},
	}
	// A second container: runAsUser instead of the image's user, args instead of its Cmd (its
	// Entrypoint stays), the runtime's default capabilities, a writable root.
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "other", Image: probeImage, Args: []string{"report"},
		SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](4321)}})
	allowReadingPods(t, ns)
	createPod(t, ns, pod)

	// Ready only once /readyz answers, 3 s after the start.
	sawUnready := false
	waitReal(t, "the pod Ready", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			if err == nil && p.Status.Phase != corev1.PodPending {
				return false, fmt.Errorf("the pod is %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			return false, nil
		}
		if !podIsReady(p) {
			sawUnready = true
			return false, nil
		}
		return true, nil
	})
	if !sawUnready {
		t.Error("the pod was Ready before its readiness probe could pass")
	}

	wantChecks(t, "probe", reportOf(t, ns, "probe", "probe"), map[string]string{
		"id": "uid=1234 gid=1234 groups=[2345 3456]", "args": "/imageprobe serve", "cwd": "/work",
		"env PROBE_IMAGE_ENV": "from-image", "env PROBE_OVERRIDDEN": "from-pod", "env HOME": "/home/probe", "env PATH": "/", "env HOSTNAME": "probe",
		"env T9K_MEMORY_LIMIT": "268435456", "env CPU_LIMIT": "32000",
		"env KUBERNETES_SERVICE_HOST": "10.96.0.1", "env KUBERNETES_SERVICE_PORT": "443", "env KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"env KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
		"image file":                  "from the image", "python3": "no such file or directory",
		"root write": "read-only file system", "scratch write": "ok",
		"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1",
		"api": "200",
	})
	wantChecks(t, "other", reportOf(t, ns, "probe", "other"), map[string]string{
		"id": "uid=4321 gid=0 groups=[3456]", "args": "/imageprobe report", "env HOME": "/",
		"root write": "ok", "CapEff": "0000000000000000", "CapBnd": "00000000a80425fb", "NoNewPrivs": "0", "api": "200",
	})

	p, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Status.ContainerStatuses {
		if want := "t9k.test/imageprobe@" + testImages.probe.Manifest; s.ImageID != want {
			t.Errorf("%s's imageID is %q, want %q", s.Name, s.ImageID, want)
		}
		if !ptr.Deref(s.Started, false) {
			t.Errorf("%s has not started (its startup probe)", s.Name)
		}
	}
	if log := containerLog(ns, "probe", "probe"); !strings.Contains(log, "healthz: header X-Probe=startup") {
		t.Errorf("the startup probe did not come with its header:\n%s", log)
	}
	// The explicit token is the pod's: bound to it, for its audience.
	token, err := os.ReadFile(filepath.Join(procNode.stateDir, "pods", ns+"_probe", "volumes", "bound", "token"))
	if err != nil {
		t.Fatal(err)
	}
	review, err := env.kube.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: string(token), Audiences: []string{"t9k-test"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := review.Status; !s.Authenticated || s.User.Username != "system:serviceaccount:"+ns+":default" ||
		fmt.Sprint(s.User.Extra["authentication.kubernetes.io/pod-uid"]) != fmt.Sprintf("[%s]", p.UID) {
		t.Errorf("the projected token's review: %+v", s)
	}
	out, err := kubectl("exec", "-n", ns, "probe", "-c", "probe", "--", "/imageprobe", "id")
	if err != nil || !strings.HasPrefix(out, "uid=1234 gid=1234 ") {
		t.Errorf("kubectl exec /imageprobe id: %v: %q", err, out)
	}
}

// allowReadingPods lets the namespace's default service account read its pods, as the test
// program does with its token (test/imageprobe).
func allowReadingPods(t *testing.T, ns string) {
	t.Helper()
	rbac := env.kube.RbacV1()
	if _, err := rbac.Roles(ns).Create(context.Background(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-pods"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestProcNodeImageRunAsNonRoot: runAsNonRoot refuses an image that runs as root, and a
// runAsUser of 0, as a kubelet does: the container waits with CreateContainerConfigError and
// the kubelet's message, the pod stays Pending, and nothing runs.
func TestProcNodeImageRunAsNonRoot(t *testing.T) {
	ns := namespace(t)
	needProcNode(t, ns)
	needTestImages(t)
	rootByImage := imagePod("root-image", rootImage)
	rootByUser := imagePod("root-user", probeImage)
	rootByUser.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}
	for _, p := range []*corev1.Pod{rootByImage, rootByUser} {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
		createPod(t, ns, p)
	}
	for name, message := range map[string]string{
		"root-image": "container has runAsNonRoot and image will run as root (pod: \"root-image_" + ns,
		"root-user":  "container's runAsUser breaks non-root policy (pod: \"root-user_" + ns,
	} {
		var p *corev1.Pod
		waitReal(t, name+" refused", func(ctx context.Context) (bool, error) {
			var err error
			p, err = env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil, nil
		})
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w.Reason != "CreateContainerConfigError" || !strings.HasPrefix(w.Message, message) {
			t.Errorf("%s waits with %s: %s; want CreateContainerConfigError: %s...", name, w.Reason, w.Message, message)
		}
		if p.Status.Phase != corev1.PodPending {
			t.Errorf("%s is %s, want Pending", name, p.Status.Phase)
		}
		if _, err := os.Stat(filepath.Join(procNode.stateDir, "pods", ns+"_"+name, "logs", "probe.log")); err == nil {
			t.Errorf("%s's container was started", name)
		}
	}
}

// TestProcNodeImageLiveness: a container that fails its httpGet liveness probe is stopped, its
// status says why, and, as the node restarts no container, its pod fails, so its ReplicaSet
// replaces it.
func TestProcNodeImageLiveness(t *testing.T) {
	ns := namespace(t)
	needProcNode(t, ns)
	needTestImages(t)
	template := imagePod("tired", probeImage)
	template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	c := &template.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "LIVE_FOR", Value: "2s"}}
	c.LivenessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 2,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "tired"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: template.Labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta, Spec: template.Spec}}}
	rs.Spec.Template.Name = ""
	if _, err := env.kube.AppsV1().ReplicaSets(ns).Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var failed *corev1.Pod
	waitReal(t, "a pod failed by its liveness probe", func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i, p := range pods.Items {
			if p.Status.Phase == corev1.PodFailed {
				failed = &pods.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	s := failed.Status.ContainerStatuses[0].State.Terminated
	if s == nil || s.Reason != "LivenessProbeFailed" || !strings.Contains(s.Message, "failed liveness probe 2 times") {
		t.Errorf("the failed pod's container: %+v", failed.Status.ContainerStatuses[0].State)
	}
	if log := containerLog(ns, failed.Name, "probe"); !strings.Contains(log, "healthz: failing (user agent kube-probe/") {
		t.Errorf("the container's log does not show the failing probes:\n%s", log)
	}
	waitReal(t, "a replacement", func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.UID != failed.UID && p.Status.Phase == corev1.PodRunning {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestProcNodeClusterIPService: a ClusterIP Service in front of a pod of the process node
// answers another pod at its cluster IP, by its short name and by its full name.
func TestProcNodeClusterIPService(t *testing.T) {
	ns := namespace(t)
	needProcNode(t, ns)
	needTestImages(t)
	web := imagePod("web", probeImage)
	web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}}}
	createPod(t, ns, web)
	svc, err := env.kube.CoreV1().Services(ns).Create(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: web.Labels, Ports: []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromString("http")}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	urls := []string{"http://" + svc.Spec.ClusterIP + "/whoami", "http://web/whoami", "http://web." + ns + ".svc.cluster.local/whoami"}
	createPod(t, ns, imagePod("client", probeImage, append([]string{"get"}, urls...)...))
	waitReal(t, "the client's answers", func(context.Context) (bool, error) {
		return strings.Count(containerLog(ns, "client", "probe"), "get ") == len(urls), nil
	})
	log := containerLog(ns, "client", "probe")
	for _, u := range urls {
		if !strings.Contains(log, "get "+u+": web\n") {
			t.Errorf("%s did not answer from web; the client's log:\n%s", u, log)
		}
	}
}
