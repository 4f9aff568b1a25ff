// Command cluster starts and stops the local control plane (test/cluster) for `make
// cluster-up`, `make cluster-down` and `make run`.
//
//	cluster up   [--dir DIR] [--nodes N] --bin-dir BIN   starts it detached; prints the kubeconfig path
//	cluster down [--dir DIR]                             stops it and leaves no process
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
		fmt.Fprintln(os.Stderr, "usage: cluster up|down [--dir DIR] [--nodes N] [--bin-dir BIN]")
		os.Exit(2)
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := flags.String("dir", "_output/cluster", "the cluster's directory: data, certificates, kubeconfig, logs")
	nodes := flags.Int("nodes", 4, "fake nodes")
	binDir := flags.String("bin-dir", os.Getenv("T9K_TOOLS_BIN"), "directory of the control-plane binaries (hack/lib/tools.sh prints it)")
	_ = flags.Parse(os.Args[2:])

	if err := run(os.Args[1], *dir, *binDir, *nodes); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(command, dir, binDir string, nodes int) error {
	if command == "down" {
		// A component that had to be killed is gone all the same: say so, but do not fail.
		if err := cluster.StopDir(dir); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
		}
		fmt.Println("cluster: stopped")
		return nil
	}
	if binDir == "" {
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
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, Dir: dir, Nodes: nodes, Detach: true, Progress: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Println(c.Kubeconfig)
	return nil
}
