package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
)

// takeoverBound is the longest a standby may take to lead after a killed leader's last
// renewal (docs/install.md, "Leader election"): client-go tries every retry period jittered up
// to 2.2 times (2 s: at most 4.4 s), so a candidate sees the last renewal up to one such
// period late, waits the lease duration (15 s) from then, and tries once per period after it.
const takeoverBound = 15*time.Second + 2*4400*time.Millisecond

// TestInstalledController installs the controller as users do, from its image, on the real
// node, and runs jobs under it: `kubectl apply -k manifests/` (two replicas, one leading), a
// GenericJob on kwok and a real MPIJob, the leader's pod deleted and the leader's process
// killed while a job runs, the pod's security as the Deployment asks for it; an upgrade to
// the release's install.yaml, applied server-side; `kubectl delete -k manifests/` leaving
// nothing behind; a fresh install from install.yaml.
func TestInstalledController(t *testing.T) {
	needInstall(t)
	handOverToInstalled(t)
	const devImage = "ghcr.io/t9k-jobs/t9k-job-controller:dev" // manifests/kustomization.yaml

	start := time.Now()
	if out, err := kubectl("apply", "-k", filepath.Join(repoRoot, "manifests")); err != nil {
		t.Fatalf("kubectl apply -k manifests/: %v\n%s", err, out)
	}
	_ = os.RemoveAll(env.kubectlCache) // the CRDs are new
	pods := waitControllerPods(t, devImage)
	leader := waitLeader(t, pods)
	t.Logf("installed: 2 replicas ready %.1fs after kubectl apply -k; %s leads", time.Since(start).Seconds(), leader)
	for _, p := range pods {
		log, err := kubectl("logs", "-n", controllerNamespace, p.Name)
		if err != nil {
			t.Fatalf("kubectl logs %s: %v\n%s", p.Name, err, log)
		}
		leads := strings.Contains(log, `"Leading"`)
		if leads != (p.Name == leader) || !strings.Contains(log, "Attempting to acquire leader lease") {
			t.Errorf("%s's log (leader %s) does not say whether it leads:\n%s", p.Name, leader, log)
		}
	}

	t.Run("security", func(t *testing.T) { checkControllerSecurity(t, podNamed(pods, leader)) })
	t.Run("jobs", func(t *testing.T) {
		ns := namespace(t)
		job := quickJob("on-kwok", "0s")
		createJob(t, ns, job)
		waitJob(t, ns, job.Name, "Succeeded", inPhase(batch.JobSucceeded))
		realMPIJob(t)
	})
	t.Run("failover", func(t *testing.T) { checkFailover(t, pods, leader, devImage) })
	t.Run("monitoring", checkReleaseMonitoring)
	t.Run("plugin", checkReleasePlugin)
	t.Run("chart", checkReleaseChart)
	t.Run("killed", func(t *testing.T) { checkKilledLeader(t, devImage) })

	// An upgrade is `kubectl apply --server-side` of the newer install.yaml (here: the release
	// over the install from source, which kubectl applied client-side): no conflict, the
	// Deployment rolls, one of the new replicas leads, and a job running across it ends right.
	manifest := filepath.Join(install.release, "install.yaml")
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	released := imageIn(t, string(data))
	if !strings.Contains(released, ":"+install.version+"@sha256:") {
		t.Fatalf("install.yaml's image %q is not pinned by digest", released)
	}
	ns := namespace(t)
	createJob(t, ns, quickJob("across-upgrade", "15s"))
	waitJob(t, ns, "across-upgrade", "Running", inPhase(batch.JobRunning))
	if out, err := kubectl("apply", "--server-side", "-f", manifest); err != nil {
		t.Fatalf("upgrading: kubectl apply --server-side -f install.yaml: %v\n%s", err, out)
	}
	pods = waitControllerPods(t, released)
	waitLeader(t, pods)
	job := waitJob(t, ns, "across-upgrade", "Succeeded", inPhase(batch.JobSucceeded))
	if n := job.Status.Tasks[0].RestartCount; n != 0 {
		t.Errorf("the job restarted %d times across the upgrade", n)
	}

	// Uninstall: nothing of it stays.
	if out, err := kubectl("delete", "-k", filepath.Join(repoRoot, "manifests")); err != nil {
		t.Fatalf("kubectl delete -k manifests/: %v\n%s", err, out)
	}
	checkNothingLeft(t)

	// A fresh install from the release, and its uninstall.
	if out, err := kubectl("apply", "--server-side", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply --server-side -f install.yaml: %v\n%s", err, out)
	}
	_ = os.RemoveAll(env.kubectlCache)
	pods = waitControllerPods(t, released)
	waitLeader(t, pods)
	ns = namespace(t)
	createJob(t, ns, quickJob("from-release", "0s"))
	waitJob(t, ns, "from-release", "Succeeded", inPhase(batch.JobSucceeded))
	if out, err := kubectl("delete", "-f", manifest); err != nil {
		t.Fatalf("kubectl delete -f install.yaml: %v\n%s", err, out)
	}
	checkNothingLeft(t)
}

// quickJob is a GenericJob of two replicas on the kwok nodes that run for runTime and succeed.
func quickJob(name, runTime string) *batch.GenericJob {
	r := replica("worker", "busybox")
	r.Replicas = ptr.To[int32](2)
	exits(&r, 0, runTime)
	onKwokDuringInstall(&r.Template.Spec)
	return &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}}
}

func podNamed(pods []corev1.Pod, name string) *corev1.Pod {
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i]
		}
	}
	return nil
}

// imageIn is the image the controller's Deployment in a manifest names.
func imageIn(t *testing.T, manifest string) string {
	t.Helper()
	for _, line := range strings.Split(manifest, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok && strings.Contains(v, "t9k-job-controller") {
			return v
		}
	}
	t.Fatal("the manifest names no controller image")
	return ""
}

// checkControllerSecurity: the controller runs as 65532 with a read-only root, no
// capabilities, no privilege escalation and the runtime's default seccomp filter; its
// container's memory cgroup is limited to limits.memory and its Go memory limit follows it;
// its credentials are its service account's token, bound to its pod, allowed what
// manifests/rbac.yaml allows and nothing more, its admission policy included.
func checkControllerSecurity(t *testing.T, pod *corev1.Pod) {
	pid := controllerProcess(t, pod)
	// Seccomp 2: a filter (RuntimeDefault, containerd's profile), not 0 (none).
	for field, want := range map[string]string{"Uid": "65532 65532 65532 65532", "Gid": "65532 65532 65532 65532",
		"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"} {
		if got := procStatusField(pid, field); got != want {
			t.Errorf("the controller's %s is %q, want %q", field, got, want)
		}
	}
	err := os.WriteFile(fmt.Sprintf("/proc/%d/root/written-by-e2e", pid), []byte("x"), 0o644)
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("writing to the controller's root: %v, want EROFS (read-only root file system)", err)
	}
	// The kubelet enforces limits.memory in the container's cgroup; the controller sizes its
	// Go memory limit from the same figure, given in T9K_MEMORY_LIMIT.
	if limit, err := cgroupFile(pid, "memory", "memory.limit_in_bytes"); err != nil || limit != "268435456" {
		t.Errorf("the controller's memory cgroup limit: %q (%v), want 268435456 (limits.memory 256Mi)", limit, err)
	}
	environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if !strings.Contains(string(environ), "\x00T9K_MEMORY_LIMIT=268435456\x00") {
		t.Errorf("T9K_MEMORY_LIMIT is not the container's 256Mi limit in bytes: %q", environ)
	}
	log, _ := kubectl("logs", "-n", controllerNamespace, pod.Name)
	// 90% of 256Mi, as cmd/t9k-job-controller/memory.go computes it.
	if want := fmt.Sprintf(`"Go memory limit set" bytes=%d containerLimit="268435456"`, 268435456/10*9); !strings.Contains(log, want) {
		t.Errorf("the controller's log does not set the Go memory limit to 90%% of 256Mi:\n%s", log)
	}

	tokenPath := fmt.Sprintf("/proc/%d/root/var/run/secrets/kubernetes.io/serviceaccount/token", pid)
	token, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatalf("the service account token: %v", err)
	}
	review, err := env.kube.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(token)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := review.Status.User
	if !review.Status.Authenticated || u.Username != "system:serviceaccount:t9k-system:t9k-job-controller" ||
		strings.Join(u.Extra["authentication.kubernetes.io/pod-name"], ",") != pod.Name {
		t.Errorf("the controller's token is %+v, want the service account t9k-system/t9k-job-controller bound to pod %s", review.Status, pod.Name)
	}
	cfg := rest.AnonymousClientConfig(env.config)
	cfg.BearerToken = string(token)
	kube, jobs := kubernetes.NewForConfigOrDie(cfg), versioned.NewForConfigOrDie(cfg)
	if _, err := jobs.BatchV1beta1().GenericJobs("").List(context.Background(), metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("the token may not list GenericJobs, which manifests/rbac.yaml allows: %v", err)
	}
	if _, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
		t.Errorf("listing nodes with the controller's token: %v, want Forbidden (manifests/rbac.yaml allows no nodes)", err)
	}
	if err := kube.CoreV1().Namespaces().Delete(context.Background(), "default", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a namespace with the controller's token: %v, want Forbidden", err)
	}
	checkLeastPrivilege(t, kube)
}

// checkFailover deletes the leader's pod while a job runs: another replica takes the Lease
// within the lease duration and a retry period (15 s + 2 s, the defaults), the job ends
// Succeeded with the pods it had and no restart, and the Deployment is back to one leader and
// one standby. The leader gives the Lease up as it stops, so the standby, or the Deployment's
// new pod if it starts first, takes it.
func checkFailover(t *testing.T, pods []corev1.Pod, leader, image string) {
	ctx := context.Background()
	ns := namespace(t)
	createJob(t, ns, quickJob("across-failover", "20s"))
	waitJob(t, ns, "across-failover", "Running", inPhase(batch.JobRunning))
	before := podUIDs(t, ns)

	deleted := time.Now()
	if err := env.kube.CoreV1().Pods(controllerNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var next string
	waitReal(t, "another replica to take the Lease", func(ctx context.Context) (bool, error) {
		next = controllerLeader(ctx)
		return next != "" && next != leader, nil
	})
	took := time.Since(deleted)
	who := "the standby"
	if podNamed(pods, next) == nil {
		who = "the Deployment's new pod"
	}
	t.Logf("the Lease passed from %s to %s (%s) %.1fs after the leader's pod was deleted", leader, next, who, took.Seconds())
	if limit := 17*time.Second + time.Second; took > limit { // + the poll's own second at most
		t.Errorf("the Lease passed after %s, want within the lease duration and a retry period (17s)", took)
	}

	job := waitJob(t, ns, "across-failover", "Succeeded", inPhase(batch.JobSucceeded))
	if n := job.Status.Tasks[0].RestartCount; n != 0 {
		t.Errorf("the job restarted %d times across the failover", n)
	}
	if after := podUIDs(t, ns); !sameMap(before, after) {
		t.Errorf("the job's pods changed across the failover: %v, then %v", before, after)
	}
	now := waitControllerPods(t, image)
	if podNamed(now, next) == nil {
		t.Fatalf("the new leader %s is not among the ready replicas", next)
	}
	if l := controllerLeader(ctx); l != next {
		t.Errorf("%s leads once both replicas are ready, want %s still", l, next)
	}
	for _, p := range now {
		if p.Name == next {
			continue
		}
		if log, _ := kubectl("logs", "-n", controllerNamespace, p.Name); strings.Contains(log, `"Leading"`) || !strings.Contains(log, "Attempting to acquire leader lease") {
			t.Errorf("%s does not stand by:\n%s", p.Name, log)
		}
	}
}

// checkKilledLeader kills the leader's process (SIGKILL: it gives nothing up) while a job
// runs: the kubelet starts the container again in the same pod, a controller leads again
// within the lease duration and a retry period, one only, and the job ends Succeeded with
// the pods it had and no restart. Which one leads: the standby or the container started
// again, once the Lease has expired: the restarted process has an identity of its own
// (<pod>_<pid>_<random>), though its pod and pid (1) are the killed one's.
func checkKilledLeader(t *testing.T, image string) {
	ctx := context.Background()
	pods := waitControllerPods(t, image)
	leader := waitLeader(t, pods)
	ns := namespace(t)
	createJob(t, ns, quickJob("across-kill", "25s"))
	waitJob(t, ns, "across-kill", "Running", inPhase(batch.JobRunning))
	before := podUIDs(t, ns)
	pid := controllerProcess(t, podNamed(pods, leader))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	waitReal(t, "the killed container to run again", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(controllerNamespace).Get(ctx, leader, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		s := p.Status.ContainerStatuses[0]
		if s.RestartCount == 0 || s.State.Running == nil {
			return false, nil
		}
		if last := s.LastTerminationState.Terminated; s.RestartCount != 1 || last == nil || last.ExitCode != 128+int32(syscall.SIGKILL) {
			return false, fmt.Errorf("%s's container: %d restarts, last ended %+v; want 1, after exit code 137 (SIGKILL)", leader, s.RestartCount, last)
		}
		return true, nil
	})
	restarted := time.Since(killed)
	var holder string
	waitReal(t, "a controller to lead again", func(ctx context.Context) (bool, error) {
		l, err := env.kube.CoordinationV1().Leases(controllerNamespace).Get(ctx, "t9k-job-controller", metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil || l.Spec.HolderIdentity == nil || !l.Spec.RenewTime.After(killed) {
			return false, nil
		}
		holder = *l.Spec.HolderIdentity
		return true, nil
	})
	took := time.Since(killed)
	t.Logf("%s's controller killed: its container ran again %.1fs later, and %s renewed the Lease %.1fs after the kill", leader, restarted.Seconds(), holder, took.Seconds())
	if limit := takeoverBound + time.Second; took > limit { // + the poll's own second at most
		t.Errorf("a controller led again %s after the leader was killed, want within %s", took, takeoverBound)
	}
	now := waitControllerPods(t, image)
	var leading []string
	for _, p := range now {
		if log, _ := kubectl("logs", "-n", controllerNamespace, p.Name); strings.Contains(log, `"Leading"`) {
			leading = append(leading, p.Name)
		}
	}
	if l := controllerLeader(ctx); len(leading) != 1 || leading[0] != l {
		t.Errorf("the replicas whose log says they lead: %v; the Lease's holder: %s; want that one alone", leading, l)
	}

	job := waitJob(t, ns, "across-kill", "Succeeded", inPhase(batch.JobSucceeded))
	if n := job.Status.Tasks[0].RestartCount; n != 0 {
		t.Errorf("the job restarted %d times across the kill", n)
	}
	if after := podUIDs(t, ns); !sameMap(before, after) {
		t.Errorf("the job's pods changed across the kill: %v, then %v", before, after)
	}
}

func podUIDs(t *testing.T, ns string) map[string]string {
	t.Helper()
	list, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkNothingLeft: after an uninstall, no namespace, CRD, RBAC object or process of the
// controller is left.
func checkNothingLeft(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	waitGone(t, "namespace "+controllerNamespace, func(ctx context.Context) error {
		_, err := env.kube.CoreV1().Namespaces().Get(ctx, controllerNamespace, metav1.GetOptions{})
		return err
	})
	waitGone(t, "ClusterRole t9k-job-controller", func(ctx context.Context) error {
		_, err := env.kube.RbacV1().ClusterRoles().Get(ctx, "t9k-job-controller", metav1.GetOptions{})
		return err
	})
	waitGone(t, "ClusterRoleBinding t9k-job-controller", func(ctx context.Context) error {
		_, err := env.kube.RbacV1().ClusterRoleBindings().Get(ctx, "t9k-job-controller", metav1.GetOptions{})
		return err
	})
	crds, err := apiextensionsclient.NewForConfigOrDie(env.config).ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds.Items {
		if strings.HasSuffix(c.GetName(), "."+batch.GroupName) {
			t.Errorf("CRD %s is left", c.GetName())
		}
	}
	waitReal(t, "the controller's processes to end", func(context.Context) (bool, error) {
		return len(processesWith(controllerBinary)) == 0, nil
	})
}
