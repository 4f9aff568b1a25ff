// Package cluster runs a real Kubernetes control plane on loopback for the end-to-end tests and
// `make run`: etcd, kube-apiserver, kube-scheduler, kube-controller-manager, and kwok standing
// in for the kubelet on a few fake nodes. Every port is chosen free at start, so several
// clusters can run side by side; Stop (or StopDir, from another process) leaves no process.
//
// The binaries come from hack/lib/tools.sh, which builds and caches them.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	_ "embed"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

//go:embed kwok.yaml
var kwokConfig []byte

// FakeNodeAnnotation marks the nodes kwok manages.
const FakeNodeAnnotation = "kwok.x-k8s.io/node"

// ServiceCIDR is the range of the cluster's Service addresses (kube-apiserver's
// --service-cluster-ip-range): the kubernetes Service has its first address, which the API
// server's serving certificate names.
const (
	ServiceCIDR         = "10.96.0.0/16"
	kubernetesServiceIP = "10.96.0.1"
)

// The local control plane schedules pod groups all or nothing, as a cluster that turns on
// Kubernetes' gang scheduling (beta in 1.37, off by default) does: the feature gate on the API
// server, scheduler and controller manager, and the API on the API server. With the gate the
// scheduler enables its GangScheduling plugin by default, and preempts a PodGroup whole when
// its disruption mode says all. It also keeps a pod group in one topology domain
// (TopologyAwareWorkloadScheduling, alpha) and lets a group's pods share a device claim
// (DRAWorkloadResourceClaims, beta and off by default): without them the API server drops a
// PodGroup's schedulingConstraints and resourceClaims.
const (
	gangFeatureGates  = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,DRAWorkloadResourceClaims=true"
	gangRuntimeConfig = "scheduling.k8s.io/v1beta1=true"
)

// Options configure a cluster.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok.
	BinDir string
	// Dir keeps the cluster's data, certificates, kubeconfig and logs; it is created.
	Dir string
	// Nodes is the number of fake nodes; 4 when zero.
	Nodes int
	// Detach lets the processes outlive this one (make cluster-up); otherwise they are
	// killed when it dies.
	Detach bool
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// BeforeControllers, when set, runs once the API server is ready and before the
	// scheduler, controller manager and kwok start: CRDs installed there are known to the
	// garbage collector from its first discovery, as on a cluster where they were installed
	// long ago.
	BeforeControllers func(context.Context, *rest.Config) error
	// Kueue starts Kueue once the cluster is ready (StartKueue, with default KueueOptions).
	Kueue bool
	// RealNode starts the real node (realnode.go) beside the fake ones, with the images of
	// RealNodeImages (OCI archives) imported. Then the API server also serves on the node's
	// address, where its pods reach it through the kubernetes Service.
	RealNode       bool
	RealNodeImages []string
}

// Cluster is a running control plane.
type Cluster struct {
	// Dir is the cluster's directory; Kubeconfig is the admin kubeconfig inside it.
	Dir, Kubeconfig string
	// Config is the admin client configuration.
	Config *rest.Config

	opts  Options // as Start was given them, defaulted
	begin time.Time
	procs []*process
	// stopped are components stopped alone (StopAPIServer), to be started again.
	stopped []*process
}

// Start starts a cluster and returns once pods can be scheduled and run on its nodes.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Nodes == 0 {
		opts.Nodes = 4
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), opts: opts, begin: time.Now()}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (component logs in %s)", err, filepath.Join(dir, "logs"))
			_ = c.Stop()
		}
	}()

	token, err := c.writeSecrets()
	if err != nil {
		return nil, err
	}
	if err := c.writePKI(); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	bin := func(name string) string { return filepath.Join(opts.BinDir, name) }

	c.step("starting etcd on 127.0.0.1:%d", etcdPort)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := c.run("etcd", bin("etcd"),
		"--name=t9k", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=t9k="+peerURL,
		"--unsafe-no-fsync", // a test cluster trades durability for speed
		"--log-level=warn",
	); err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, "etcd", 30*time.Second, func(ctx context.Context) error {
		return httpOK(ctx, etcdURL+"/health")
	}); err != nil {
		return nil, err
	}

	c.step("starting kube-apiserver on https://127.0.0.1:%d", apiPort)
	// Without a real node, the API server serves on loopback alone, and the kubernetes Service
	// has no endpoints: nothing in a pod could reach it. With one, it serves on every address,
	// and the Service's endpoint is the node's, where its pods reach it.
	serving := []string{"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none"}
	if opts.RealNode {
		if os.Geteuid() != 0 {
			return nil, errNotRoot
		}
		serving = []string{"--bind-address=0.0.0.0", "--advertise-address=" + RealNodeIP}
	}
	if err := c.run("kube-apiserver", bin("kube-apiserver"), append(serving,
		"--etcd-servers="+etcdURL,
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file="+filepath.Join(dir, pkiDir, apiServerName+".crt"),
		"--tls-private-key-file="+filepath.Join(dir, pkiDir, apiServerName+".key"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--allow-privileged=true",
		// Kubernetes' own gang scheduling: the scheduling.k8s.io/v1beta1 API (PodGroup,
		// Workload) and, in the scheduler, the GangScheduling plugin (docs/testing.md, "The
		// local control plane").
		"--feature-gates="+gangFeatureGates, "--runtime-config="+gangRuntimeConfig,
		// Kubelets (the real node's): the API server reaches them at their InternalIP (the
		// real node registers 10.245.0.1), presents its client certificate, and verifies
		// theirs with the cluster's CA (pki.go).
		"--kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP",
		"--kubelet-client-certificate="+c.Kubelet().APIServerCertFile,
		"--kubelet-client-key="+c.Kubelet().APIServerKeyFile,
		"--kubelet-certificate-authority="+c.Kubelet().ClientCAFile,
	)...); err != nil {
		return nil, err
	}
	if err := c.writeKubeconfig(apiPort, token); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, "kube-apiserver", 90*time.Second, func(ctx context.Context) error {
		return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}); err != nil {
		return nil, err
	}

	if opts.BeforeControllers != nil {
		if err := opts.BeforeControllers(ctx, c.Config); err != nil {
			return nil, err
		}
	}

	c.step("starting kube-scheduler, kube-controller-manager and kwok")
	schedulerConfig := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(schedulerConfig, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, c.Kubeconfig), 0o644); err != nil {
		return nil, err
	}
	if err := c.run("kube-scheduler", bin("kube-scheduler"),
		"--config="+schedulerConfig, "--secure-port=0", "--feature-gates="+gangFeatureGates); err != nil {
		return nil, err
	}
	if err := c.run("kube-controller-manager", bin("kube-controller-manager"),
		"--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--secure-port=0", "--feature-gates="+gangFeatureGates,
		"--service-account-private-key-file="+filepath.Join(dir, "sa.key"),
		"--root-ca-file="+filepath.Join(dir, pkiDir, caName+".crt"),
		"--use-service-account-credentials=false",
		"--kube-api-qps=500", "--kube-api-burst=1000",
		// Past 12,500 ended pods (the default) the pod garbage collector deletes the oldest,
		// those a job's clean-up policy keeps too: the benchmark keeps 40,000.
		"--terminated-pod-gc-threshold=100000",
	); err != nil {
		return nil, err
	}
	kwokConfigPath := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfigPath, kwokConfig, 0o644); err != nil {
		return nil, err
	}
	if err := c.run("kwok", bin("kwok"),
		"--kubeconfig="+c.Kubeconfig, "--config="+kwokConfigPath, "--cidr=10.244.0.0/16"); err != nil {
		return nil, err
	}

	c.step("adding %d fake nodes", opts.Nodes)
	if err := addNodes(ctx, client, opts.Nodes); err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, "ready nodes and the default service account", 60*time.Second, func(ctx context.Context) error {
		return ready(ctx, client, opts.Nodes)
	}); err != nil {
		return nil, err
	}
	if opts.RealNode {
		if err := c.startRealNode(ctx, opts.RealNodeImages); err != nil {
			return nil, err
		}
	}
	if opts.Kueue {
		if err := c.StartKueue(ctx, KueueOptions{}); err != nil {
			return nil, err
		}
	}
	c.step("ready; kubeconfig %s", c.Kubeconfig)
	return c, nil
}

// step prints one progress line, timed from the cluster's start.
func (c *Cluster) step(format string, args ...any) {
	fmt.Fprintf(c.opts.Progress, "cluster: %5.1fs %s\n", time.Since(c.begin).Seconds(), fmt.Sprintf(format, args...))
}

// writeSecrets writes the admin token file and the service-account signing key, and returns
// the admin token.
func (c *Cluster) writeSecrets() (string, error) {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := hex.EncodeToString(raw)
	if err := os.WriteFile(filepath.Join(c.Dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return "", err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return token, os.WriteFile(filepath.Join(c.Dir, "sa.key"), keyPEM, 0o600)
}

// writeKubeconfig writes the admin kubeconfig, which trusts the cluster's CA: it issued the
// API server's serving certificate (pki.go).
func (c *Cluster) writeKubeconfig(port int, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["t9k-local"] = &clientcmdapi.Cluster{
		Server:               fmt.Sprintf("https://127.0.0.1:%d", port),
		CertificateAuthority: filepath.Join(c.Dir, pkiDir, caName+".crt"),
	}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["t9k-local"] = &clientcmdapi.Context{Cluster: "t9k-local", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "t9k-local"
	if err := clientcmd.WriteToFile(*cfg, c.Kubeconfig); err != nil {
		return err
	}
	restConfig, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return err
	}
	restConfig.QPS, restConfig.Burst = 200, 400
	c.Config = restConfig
	return nil
}

func addNodes(ctx context.Context, client kubernetes.Interface, n int) error {
	for i := range n {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{FakeNodeAnnotation: "fake"},
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
		}}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// ready reports whether n nodes are Ready and new pods can be admitted in the default
// namespace (its service account exists).
func ready(ctx context.Context, client kubernetes.Interface, n int) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	readyNodes := 0
	for _, node := range nodes.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				readyNodes++
			}
		}
	}
	if readyNodes < n {
		return fmt.Errorf("%d of %d nodes ready", readyNodes, n)
	}
	_, err = client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
	return err
}

// waitFor polls check until it passes, a component exits, or the timeout passes.
func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.procs {
			if exited, err := p.Exited(); exited {
				return false, fmt.Errorf("%s exited: %v", p.name, err)
			}
		}
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		if last != nil && !errors.Is(err, last) {
			err = fmt.Errorf("%w; last check: %v", err, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// freePorts are n ports free at the moment (harness.FreePorts). They are released before use,
// so another process could take one in between; the component then fails to start and Start
// reports it.
func freePorts(n int) ([]int, error) { return harness.FreePorts(n) }
