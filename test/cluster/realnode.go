package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/t9k-jobs/t9k-jobs/test/testimage"
)

// The real node (docs/testing.md, "The real node"): a kubelet with containerd, runc and the
// CNI bridge, on this machine, beside kwok's fake nodes, with kube-proxy for Services and
// CoreDNS for the cluster's names. Pods run there in real containers from images imported
// into containerd (nothing can be pulled). It is tainted and labelled, so only pods that ask
// for it land there (RealNodeSelector, RealNodeToleration).
//
// One machine runs at most one real node: its bridge, its address and the kubelet's paths
// (/var/lib/kubelet and others the kubelet and containerd hard-code) are fixed. It runs as
// root. Stopping it leaves the machine as it was (realnode_teardown.go); RealNodeLeftovers
// says what is left otherwise.
const (
	// RealNodeName is the real node's Node name.
	RealNodeName = "t9k-realnode"
	// RealNodeLabel, with the value "real", labels and taints (NoSchedule) the real node.
	RealNodeLabel = "node.t9k.dev/runtime"
	// RealNodeIP is the node's address: its bridge's, and the pods' gateway. The API server
	// is reached there by the pods (through the kubernetes Service) and CoreDNS serves there.
	RealNodeIP = "10.245.0.1"
	// realPodSubnet holds the real node's pods (kwok's fake pods use 10.244.0.0/16).
	realPodSubnet = "10.245.0.0/24"
	realBridge    = "t9k0"
	// realStateDir holds everything the node makes outside the kubelet's fixed paths:
	// containerd's root and state, runc's root, network namespaces, CNI configuration and
	// addresses, the node's certificate and configuration files.
	realStateDir = "/var/lib/t9k-realnode"
	// pauseImage is the image of every pod's sandbox, built here from the pause program.
	pauseImage = "localhost/t9k/pause:local"
	// clusterDomain is the cluster's DNS domain.
	clusterDomain = "cluster.local"
)

// RealNodeSelector and RealNodeToleration are what a pod needs to run on the real node.
var (
	RealNodeSelector   = map[string]string{RealNodeLabel: "real"}
	RealNodeToleration = corev1.Toleration{Key: RealNodeLabel, Operator: corev1.TolerationOpEqual, Value: "real", Effect: corev1.TaintEffectNoSchedule}
)

// realNodePaths are where the node's parts keep their state.
type realNodePaths struct {
	state, containerdSocket, kubeletConfig, proxyConfig, corefile, cniConf, pki string
}

func realPaths() realNodePaths {
	s := realStateDir
	return realNodePaths{state: s, containerdSocket: filepath.Join(s, "containerd", "containerd.sock"),
		kubeletConfig: filepath.Join(s, "kubelet.yaml"), proxyConfig: filepath.Join(s, "kube-proxy.yaml"),
		corefile: filepath.Join(s, "Corefile"), cniConf: filepath.Join(s, "cni", "net.d"), pki: filepath.Join(s, "pki")}
}

// startRealNode starts the real node on a cluster whose API server is ready, imports the
// pause image and images, and returns once the node is Ready and its DNS answers.
func (c *Cluster) startRealNode(ctx context.Context, images []string) error {
	p := realPaths()
	// A node a crashed run left behind goes first: everything is fixed, nothing could share.
	if _, err := os.Stat(p.state); err == nil {
		c.step("removing the real node an earlier run left")
		if err := tearDownRealNode("", c.opts.Progress); err != nil {
			return fmt.Errorf("removing an earlier real node: %w", err)
		}
	}
	c.step("starting the real node %s (containerd, kubelet, kube-proxy, CoreDNS) on %s", RealNodeName, RealNodeIP)
	if err := saveHostState(c.Dir); err != nil {
		return err
	}
	for _, dir := range []string{p.state, p.cniConf, p.pki, filepath.Join(p.state, "cni", "ipam")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	// The teardown finds crictl and kube-proxy here, whichever process runs it.
	if err := os.WriteFile(filepath.Join(p.state, "bin-dir"), []byte(c.opts.BinDir), 0o600); err != nil {
		return err
	}
	// The bridge first: the kubelet refuses a node address that is not on an interface.
	if err := run("ip", "link", "add", realBridge, "type", "bridge"); err != nil {
		return err
	}
	if err := run("ip", "addr", "add", RealNodeIP+"/24", "dev", realBridge); err != nil {
		return err
	}
	if err := run("ip", "link", "set", realBridge, "up"); err != nil {
		return err
	}
	if err := c.writeRealNodeCert(p); err != nil {
		return err
	}
	bin := func(name string) string { return filepath.Join(c.opts.BinDir, name) }
	if err := writeRealNodeConfigs(p, c.opts.BinDir, c.Dir, c.Kubeconfig); err != nil {
		return err
	}

	// containerd finds its runc shim on PATH.
	env := append(os.Environ(), "PATH="+c.opts.BinDir+":"+os.Getenv("PATH"))
	if err := c.runEnv("containerd", bin("containerd"), env, "--config", filepath.Join(p.state, "containerd.toml")); err != nil {
		return err
	}
	ctr := func(args ...string) error {
		return run(bin("ctr"), append([]string{"--address", p.containerdSocket, "--namespace", "k8s.io"}, args...)...)
	}
	if err := c.waitFor(ctx, "containerd", 30*time.Second, func(context.Context) error { return ctr("version") }); err != nil {
		return err
	}
	pauseProgram, err := os.ReadFile(bin("pause"))
	if err != nil {
		return err
	}
	pause := filepath.Join(p.state, "pause.tar")
	if err := testimage.Write(pause, pauseImage, testimage.Image{
		Layers: [][]testimage.File{{{Path: "/pause", Mode: 0o755, Data: pauseProgram}}},
		Config: v1.Config{Entrypoint: []string{"/pause"}},
	}); err != nil {
		return err
	}
	if err := c.ImportImages(append([]string{pause}, images...)...); err != nil {
		return err
	}

	if err := c.run("kubelet", bin("kubelet"), "--config="+p.kubeletConfig, "--kubeconfig="+c.Kubeconfig,
		"--hostname-override="+RealNodeName, "--node-ip="+RealNodeIP, "--node-labels="+RealNodeLabel+"=real", "--v=2"); err != nil {
		return err
	}
	if err := c.run("kube-proxy", bin("kube-proxy"), "--config="+p.proxyConfig, "--v=2"); err != nil {
		return err
	}
	if err := c.run("coredns", bin("coredns"), "-conf", p.corefile); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the real node to be Ready", 120*time.Second, func(ctx context.Context) error {
		return nodeReady(ctx, client, RealNodeName)
	}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "CoreDNS", 30*time.Second, func(ctx context.Context) error {
		_, err := (&net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(RealNodeIP, "53"))
		}}).LookupHost(ctx, "kubernetes.default.svc."+clusterDomain)
		return err
	}); err != nil {
		return err
	}
	c.step("real node %s Ready", RealNodeName)
	return nil
}

// ImportImages imports image archives (OCI image layouts in a tar, named by annotation, as
// `make image` and test/testimage write them) into the real node's containerd, where its
// pods find them by name: nothing is ever pulled. Each image is also named by its digest
// (<repository>@sha256:...), as a pull would name it: a pod that pins an image by digest
// (install.yaml does) finds it.
func (c *Cluster) ImportImages(archives ...string) error {
	if !c.opts.RealNode {
		return errors.New("the cluster runs no real node")
	}
	ctr := func(args ...string) ([]byte, error) {
		cmd := exec.Command(filepath.Join(c.opts.BinDir, "ctr"), append([]string{"--address", realPaths().containerdSocket, "--namespace", "k8s.io"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return out, nil
	}
	for _, archive := range archives {
		start := time.Now()
		if _, err := ctr("images", "import", archive); err != nil {
			return fmt.Errorf("importing %s: %w", archive, err)
		}
		c.step("imported %s in %.1fs", filepath.Base(archive), time.Since(start).Seconds())
	}
	list, err := ctr("images", "ls")
	if err != nil {
		return err
	}
	// REF TYPE DIGEST SIZE PLATFORMS LABELS, a line per name.
	names := map[string]bool{}
	var tagged [][2]string
	for _, line := range strings.Split(string(list), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		names[f[0]] = true
		if !strings.Contains(f[0], "@") && strings.HasPrefix(f[2], "sha256:") {
			tagged = append(tagged, [2]string{f[0], f[2]})
		}
	}
	for _, t := range tagged {
		repo := t[0][:strings.LastIndexByte(t[0], ':')]
		if byDigest := repo + "@" + t[1]; !names[byDigest] {
			if _, err := ctr("images", "tag", t[0], byDigest); err != nil {
				return err
			}
		}
	}
	return nil
}

// HasRealNode reports whether the cluster runs the real node.
func (c *Cluster) HasRealNode() bool { return c.opts.RealNode }

// writeRealNodeCert issues the kubelet's serving certificate, for the node's address, from
// the cluster's CA: the API server verifies it with that CA when it calls the kubelet (logs,
// exec, port-forward).
func (c *Cluster) writeRealNodeCert(p realNodePaths) error {
	ca, caKey, err := readCA(filepath.Join(c.Dir, pkiDir))
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	_, err = issue(p.pki, "kubelet", &x509.Certificate{
		Subject:   pkix.Name{CommonName: "system:node:" + RealNodeName, Organization: []string{"system:nodes"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 7),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP(RealNodeIP)}, DNSNames: []string{RealNodeName},
	}, key, ca, caKey)
	return err
}

// nodeReady reports whether the named node is Ready.
func nodeReady(ctx context.Context, client kubernetes.Interface, name string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s is not Ready", name)
}

// run runs a command to its end, its output in the error when it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// errNotRoot is why a real node cannot start.
var errNotRoot = errors.New("the real node needs root (it makes a bridge, cgroups and mounts)")
