// Command procnode runs a process node (test/procnode) against a cluster until SIGTERM: a
// small kubelet that runs the pods bound to it as real processes on this machine. It needs
// root.
//
//	go run ./hack/procnode --kubeconfig FILE [--name procnode] [--pod-cidr 10.250.0.0/24]
//	    [--service-cidr 10.96.0.0/16] [--image-archive FILE|DIR ...]
//	    [--port 10250 --client-ca-file CA --tls-cert-file CERT --tls-private-key-file KEY]
//
// With --client-ca-file it serves the kubelet API (kubectl logs, exec, attach, port-forward)
// on 127.0.0.1:--port to clients with a certificate of that CA, as a kubelet does; the local
// control plane (make cluster-up) writes the three files under <cluster dir>/pki.
//
// --image-archive gives it an image (a tar of an OCI image layout), or a directory of them
// (*.tar, read again when a pod names an image the node does not know); pods that name one of
// them run from its root file system, the others run the machine's programs.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/t9k-jobs/t9k-jobs/test/procnode"
)

func main() {
	procnode.Init() // the node's own helper processes start here
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	name := flag.String("name", "procnode", "name of the Node")
	cidr := flag.String("pod-cidr", "10.250.0.0/24", "range of pod addresses (inside the node's own network namespace)")
	state := flag.String("state-dir", "", "pods' volumes and logs (default: a directory under the temp dir, kept)")
	var api procnode.Options
	flag.IntVar(&api.Port, "port", 10250, "port of the kubelet API, on 127.0.0.1 (0: a free one; the Node's status says which)")
	flag.StringVar(&api.ClientCAFile, "client-ca-file", "", "serve the kubelet API to clients with a certificate of this CA (the API server's kubelet client certificate); without it the API is not served")
	flag.StringVar(&api.TLSCertFile, "tls-cert-file", "", "the kubelet API's serving certificate (default: a self-signed one)")
	flag.StringVar(&api.TLSKeyFile, "tls-private-key-file", "", "the serving certificate's key")
	flag.StringVar(&api.ServiceCIDR, "service-cidr", "10.96.0.0/16", "the cluster's Service range (kube-apiserver's --service-cluster-ip-range)")
	flag.Func("image-archive", "an image archive (a tar of an OCI image layout), or a directory of them (*.tar); repeatable", func(s string) error {
		api.ImageArchives = append(api.ImageArchives, s)
		return nil
	})
	flag.Parse()
	if err := run(*kubeconfig, *name, *cidr, *state, api); err != nil {
		fmt.Fprintln(os.Stderr, "procnode:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, name, cidr, state string, opts procnode.Options) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (it makes network and mount namespaces); run it as root")
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	if state == "" {
		state = filepath.Join(os.TempDir(), "t9k-procnode-"+name)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Fprintf(os.Stderr, "procnode: node %s, pod logs under %s\n", name, filepath.Join(state, "pods"))
	opts.Kube, opts.Name, opts.PodCIDR, opts.StateDir, opts.Log = kube, name, cidr, state, os.Stderr
	// The kubernetes Service takes pods to the API server this node talks to.
	server, err := url.Parse(config.Host)
	if err != nil {
		return fmt.Errorf("the API server's address %q: %w", config.Host, err)
	}
	opts.APIServerAddress = server.Host
	if server.Port() == "" {
		opts.APIServerAddress = net.JoinHostPort(server.Hostname(), "443")
	}
	return procnode.Run(ctx, opts)
}
