// Command procnode runs a process node (test/procnode) against a cluster until SIGTERM: a
// small kubelet that runs the pods bound to it as real processes on this machine. It needs
// root.
//
//	go run ./hack/procnode --kubeconfig FILE [--name procnode] [--pod-cidr 10.250.0.0/24]
package main

import (
	"context"
	"flag"
	"fmt"
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
	flag.Parse()
	if err := run(*kubeconfig, *name, *cidr, *state); err != nil {
		fmt.Fprintln(os.Stderr, "procnode:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, name, cidr, state string) error {
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
	return procnode.Run(ctx, procnode.Options{Kube: kube, Name: name, PodCIDR: cidr, StateDir: state, Log: os.Stderr})
}
