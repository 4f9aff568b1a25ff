// Command kubectl-t9k is the kubectl plugin of t9k-jobs: on the PATH, kubectl runs it as
// `kubectl t9k` (docs/kubectl-plugin.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/t9k-jobs/t9k-jobs/pkg/kubectlt9k"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := kubectlt9k.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		// A command run by exec that failed: its exit code is ours, as with kubectl exec.
		var exited interface{ ExitStatus() int }
		if errors.As(err, &exited) {
			os.Exit(exited.ExitStatus())
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
