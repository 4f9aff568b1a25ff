// Command cluster starts and stops the local control plane (test/cluster) for `make
// cluster-up`, `make cluster-down` and `make run`.
//
//	cluster up   [--dir DIR] [--nodes N] [--kueue] [--workers N] --bin-dir BIN   starts it detached; prints the kubeconfig paths
//	cluster down [--dir DIR]                                                   stops it, and its workers, and leaves no process
//
// --kueue also starts Kueue, with a ClusterQueue and a LocalQueue "default" in namespace
// default (test/cluster StartKueue). --workers N (with --kueue) makes it a MultiKueue
// manager of N more clusters, DIR/worker-1 ... DIR/worker-N, each with Kueue and the CRDs:
// jobs in LocalQueue "multikueue" of namespace default run on a worker (docs/queueing.md,
// "Across clusters with MultiKueue"); run a controller against each cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: cluster up|down [--dir DIR] [--nodes N] [--kueue] [--workers N] [--real-node] [--image ARCHIVE]... [--bin-dir BIN]")
		os.Exit(2)
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := flags.String("dir", "_output/cluster", "the cluster's directory: data, certificates, kubeconfig, logs")
	nodes := flags.Int("nodes", 4, "fake nodes")
	kueue := flags.Bool("kueue", false, "also start Kueue, with a default ClusterQueue and LocalQueue")
	workers := flags.Int("workers", 0, "with --kueue: MultiKueue worker clusters to start and connect")
	realNode := flags.Bool("real-node", false, "also start the real node: a kubelet with containerd (needs root; docs/testing.md)")
	var images archives
	flags.Var(&images, "image", "with --real-node: an image archive to import into the node (repeatable)")
	binDir := flags.String("bin-dir", os.Getenv("T9K_TOOLS_BIN"), "directory of the cluster's binaries (hack/lib/tools.sh prints it)")
	_ = flags.Parse(os.Args[2:])

	opts := cluster.Options{BinDir: *binDir, Dir: *dir, Nodes: *nodes, Kueue: *kueue, Detach: true, Progress: os.Stderr,
		RealNode: *realNode, RealNodeImages: images}
	if err := run(os.Args[1], opts, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(command string, opts cluster.Options, workers int) error {
	dir := opts.Dir
	if command == "down" {
		// A component that had to be killed is gone all the same: say so, but do not fail.
		workerDirs, _ := filepath.Glob(filepath.Join(dir, "worker-*"))
		for _, d := range append(workerDirs, dir) {
			if err := cluster.StopDir(d); err != nil {
				fmt.Fprintln(os.Stderr, "cluster:", err)
			}
		}
		// A real node must leave the machine as it was.
		if left := cluster.RealNodeLeftovers(dir); len(left) > 0 && cluster.RanRealNode(dir) {
			return fmt.Errorf("the real node left: %s", strings.Join(left, "; "))
		}
		fmt.Println("cluster: stopped")
		return nil
	}
	if workers > 0 && !opts.Kueue {
		return fmt.Errorf("--workers needs --kueue: MultiKueue is Kueue's")
	}
	if opts.BinDir == "" {
		return fmt.Errorf("--bin-dir (or T9K_TOOLS_BIN) is required: run hack/lib/tools.sh to build the binaries")
	}
	workerDirs, _ := filepath.Glob(filepath.Join(dir, "worker-*"))
	for _, d := range append(workerDirs, dir) {
		if running, _ := filepath.Glob(filepath.Join(d, "pids")); len(running) > 0 {
			// Stop what an earlier run left, then start afresh: its ports and data may be stale.
			if err := cluster.StopDir(d); err != nil {
				return err
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if workers > 0 {
		opts.BeforeControllers = cluster.InstallCRDs
	}
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Println(c.Kubeconfig)
	if workers == 0 {
		return nil
	}
	clusters := map[string]*cluster.Cluster{}
	for i := range workers {
		name := fmt.Sprintf("worker-%d", i+1)
		w := opts
		w.Dir = filepath.Join(dir, name)
		w.Progress = cluster.WorkerProgress(name)
		wc, err := cluster.Start(ctx, w)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		clusters[name] = wc
		fmt.Println(wc.Kubeconfig)
	}
	return c.SetUpMultiKueue(ctx, clusters)
}

// archives collects the repeated --image flag.
type archives []string

func (a *archives) String() string     { return strings.Join(*a, ",") }
func (a *archives) Set(v string) error { *a = append(*a, v); return nil }
