// Package e2e tests the project against a real control plane: the local one of test/cluster,
// started here, or the cluster of $T9K_E2E_KUBECONFIG.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/manifests"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/test/cluster"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// repoRoot is the project's top directory, relative to this package.
const repoRoot = "../.."

// env is what every test shares: clients of the cluster under test and its kubectl.
var env struct {
	config     *rest.Config
	kubeconfig string
	kubectl    string
	// kubectlCache is kubectl's discovery cache, dropped once the CRDs are served: a cache
	// made before would not know the t9k category for hours.
	kubectlCache string
	kube         kubernetes.Interface
	jobs         versioned.Interface
	dynamic      dynamic.Interface
	// kubelet is the local control plane's CA of kubelets and the API server's client
	// certificate towards them (empty on another cluster).
	kubelet cluster.KubeletTLS
	// cluster is the local control plane (nil on another cluster): tests start Kueue on it.
	cluster *cluster.Cluster
}

func TestMain(m *testing.M) {
	// Parsed before the suite's set-up, which reads -run (prefetch); m.Run would
	// parse them only after.
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	ctx := context.Background()
	env.kubeconfig = os.Getenv("T9K_E2E_KUBECONFIG")
	env.kubectl = "kubectl"
	if env.kubeconfig == "" {
		binDir, err := toolsBinDir()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		dir, err := os.MkdirTemp("", "t9k-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		// As root, the cluster has a real node too (realnode_test.go).
		// The CRDs go in before the controller manager starts, so that its garbage collector
		// knows them from its first discovery instead of its next, up to 30 s later
		// (waitGarbageCollector).
		c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, Dir: dir, Progress: os.Stderr, RealNode: os.Geteuid() == 0,
			BeforeControllers: cluster.InstallCRDs})
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: starting the local cluster:", err)
			return 1
		}
		code = 1
		defer func() {
			if err := c.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e:", err)
			}
			// The real node must leave the machine as it was: the run fails otherwise.
			if left := realNodeLeftovers(c, dir); len(left) > 0 {
				fmt.Fprintln(os.Stderr, "e2e: the real node left:", strings.Join(left, "; "))
				code = 1
			}
			if code == 0 {
				os.RemoveAll(dir)
			} else {
				fmt.Fprintln(os.Stderr, "e2e: cluster logs kept in", filepath.Join(dir, "logs"))
			}
		}()
		env.kubeconfig = c.Kubeconfig
		env.kubectl = filepath.Join(binDir, "kubectl")
		env.kubelet = c.Kubelet()
		env.cluster = c
		code = setUpAndRun(ctx, m)
		return code
	}
	return setUpAndRun(ctx, m)
}

func setUpAndRun(ctx context.Context, m *testing.M) (code int) {
	defer func() { removeScratch(code != 0) }()
	if err := connect(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := installCRDs(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: installing the CRDs:", err)
		return 1
	}
	if err := controllerCredentials(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the controller's credentials:", err)
		return 1
	}
	if err := startController(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the controller:", err)
		return 1
	}
	defer prefetch()()
	if err := waitGarbageCollector(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code = m.Run()
	stopMultiKueue(code != 0)
	_ = os.RemoveAll(env.kubectlCache)
	if !stopController() {
		fmt.Fprintln(os.Stderr, "e2e: the controller did not stop on SIGTERM")
		code = 1
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "e2e: controller log in", controller.log)
	}
	return code
}

// controllerCredentials installs manifests/rbac.yaml and writes a kubeconfig with a token of
// its service account: the controller under test runs with the permissions it ships with.
func controllerCredentials(ctx context.Context) error {
	if out, err := kubectl("apply", "-f", filepath.Join(repoRoot, "manifests", "rbac.yaml")); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	token, err := env.kube.CoreV1().ServiceAccounts("t9k-system").CreateToken(ctx, "t9k-job-controller",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: env.config.Host, CertificateAuthority: env.config.CAFile,
		CertificateAuthorityData: env.config.CAData, InsecureSkipTLSVerify: env.config.Insecure}
	cfg.AuthInfos["controller"] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "controller"}
	cfg.CurrentContext = "e2e"
	dir, err := scratchDir("t9k-controller-kubeconfig-")
	if err != nil {
		return err
	}
	controller.kubeconfig = filepath.Join(dir, "kubeconfig")
	return clientcmd.WriteToFile(*cfg, controller.kubeconfig)
}

// toolsBinDir builds (once) and returns the directory of the control-plane binaries.
func toolsBinDir() (string, error) {
	if dir := os.Getenv("T9K_TOOLS_BIN"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "lib", "tools.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the control-plane binaries: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func connect() error {
	config, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = 100, 200
	env.config = config
	if env.kube, err = kubernetes.NewForConfig(config); err != nil {
		return err
	}
	if env.jobs, err = versioned.NewForConfig(config); err != nil {
		return err
	}
	env.dynamic, err = dynamic.NewForConfig(config)
	return err
}

// installCRDs installs the CRDs the way docs/install.md ("From source") tells users to, with client-side
// `kubectl apply`, and waits until they are served.
func installCRDs(ctx context.Context) error {
	if out, err := kubectl("apply", "-f", filepath.Join(repoRoot, "manifests", "crds")); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	crds, err := manifests.CRDs()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(env.config)
	if err != nil {
		return err
	}
	names := make([]string, len(crds))
	for i, crd := range crds {
		names[i] = crd.Name
	}
	err = cluster.WaitEstablished(ctx, client, names, 30*time.Second)
	_ = os.RemoveAll(env.kubectlCache)
	return err
}

// waitGarbageCollector waits until the cluster's garbage collector watches the project's
// kinds. It learns of new resources only at its periodic discovery (every 30 s in
// kube-controller-manager), and until then deletes nothing a job owns: on a cluster started
// moments before the CRDs, a job deleted in the foreground (ttlSecondsAfterFinished) would
// stay for up to 30 s. A GenericJob deleted in the foreground is gone once it does.
func waitGarbageCollector(ctx context.Context) error {
	jobs := env.jobs.BatchV1beta1().GenericJobs(metav1.NamespaceDefault)
	probe := &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: "e2e-gc-probe"}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{{
		Type: "probe", Replicas: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}}}}}
	if _, err := jobs.Create(ctx, probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := jobs.Delete(ctx, probe.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return harness.WaitFor(ctx, "the garbage collector to watch the CRDs", 200*time.Millisecond, 90*time.Second, func(ctx context.Context) (bool, error) {
		_, err := jobs.Get(ctx, probe.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// kubectl runs kubectl against the cluster under test and returns its combined output.
func kubectl(args ...string) (string, error) {
	cmd := kubectlCommand(args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// kubectlCommand is a kubectl command against the cluster under test, not started.
func kubectlCommand(args ...string) *exec.Cmd {
	if env.kubectlCache == "" {
		env.kubectlCache = filepath.Join(os.TempDir(), fmt.Sprintf("t9k-e2e-kubectl-cache-%d", os.Getpid()))
	}
	return exec.Command(env.kubectl, append([]string{"--kubeconfig", env.kubeconfig, "--cache-dir", env.kubectlCache}, args...)...)
}

// namespace creates a namespace for one test and deletes it when the test ends.
func namespace(t *testing.T) string {
	t.Helper()
	ns, err := env.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			reportNamespace(t, ns.Name)
		}
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	// Pods are admitted once the namespace's default service account exists.
	waitFor(t, "the default service account", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := env.kube.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return ns.Name
}

// waitFor polls cond until it holds, and fails the test when it does not within timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	waitForOrReport(t, what, timeout, cond, nil)
}

// waitForOrReport is waitFor that, on a timeout, adds what report (when not nil) says of the
// last poll.
func waitForOrReport(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error), report func() string) {
	t.Helper()
	err := harness.WaitFor(context.Background(), what, 100*time.Millisecond, timeout, cond)
	switch {
	case err != nil && report != nil:
		t.Fatalf("%v; last seen:\n%s", err, report())
	case err != nil:
		t.Fatal(err)
	}
}

// reportNamespace logs, for a failed test, what a reader of CI's output needs to find why:
// the events of its namespace and the last lines of the controller's log that name it. CI
// keeps only the output; the files the run leaves behind go with its machine.
func reportNamespace(t *testing.T, ns string) {
	const lastLines = 80
	if events, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s/%s %s: %s (x%d)", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind,
				e.InvolvedObject.Name, e.Reason, e.Message, e.Count)
		}
	}
	if controller.log == "" {
		return
	}
	data, err := os.ReadFile(controller.log)
	if err != nil {
		return
	}
	var lines []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, ns) {
			lines = append(lines, strings.TrimSuffix(line, "\n"))
		}
	}
	if len(lines) == 0 {
		return // at -v=2 the controller names a namespace only when something went wrong
	}
	if len(lines) > lastLines {
		lines = lines[len(lines)-lastLines:]
	}
	t.Logf("the controller's last %d lines naming %s:\n%s", len(lines), ns, strings.Join(lines, "\n"))
}
