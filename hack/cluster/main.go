// Command cluster starts and stops the local control plane (test/cluster) for `make
// cluster-up`, `make cluster-down` and `make run`.
//
//	cluster up   [--dir DIR] [--nodes N] [--kueue] --bin-dir BIN   starts it detached; prints the kubeconfig path
//	cluster down [--dir DIR]                                       stops it and leaves no process
//
// --kueue also starts Kueue, with a ClusterQueue and a LocalQueue "default" in namespace
// default (test/cluster StartKueue).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/t9k-jobs/t9k-jobs/test/cluster"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: cluster up|down [--dir DIR] [--nodes N] [--kueue] [--bin-dir BIN]")
		os.Exit(2)
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := flags.String("dir", "_output/cluster", "the cluster's directory: data, certificates, kubeconfig, logs")
	nodes := flags.Int("nodes", 4, "fake nodes")
	kueue := flags.Bool("kueue", false, "also start Kueue, with a default ClusterQueue and LocalQueue")
	binDir := flags.String("bin-dir", os.Getenv("T9K_TOOLS_BIN"), "directory of the control-plane binaries (hack/lib/tools.sh prints it)")
	_ = flags.Parse(os.Args[2:])

	opts := cluster.Options{BinDir: *binDir, Dir: *dir, Nodes: *nodes, Kueue: *kueue, Detach: true, Progress: os.Stderr}
	if err := run(os.Args[1], opts); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(command string, opts cluster.Options) error {
	dir := opts.Dir
	if command == "down" {
		// A component that had to be killed is gone all the same: say so, but do not fail.
		if err := cluster.StopDir(dir); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
		}
		fmt.Println("cluster: stopped")
		return nil
	}
	if opts.BinDir == "" {
		return fmt.Errorf("--bin-dir (or T9K_TOOLS_BIN) is required: run hack/lib/tools.sh to build the binaries")
	}
	if running, _ := filepath.Glob(filepath.Join(dir, "pids")); len(running) > 0 {
		// Stop what an earlier run left, then start afresh: its ports and data may be stale.
		if err := cluster.StopDir(dir); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Println(c.Kubeconfig)
	return nil
}
