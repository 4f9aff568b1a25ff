// Package agent is the restart agent of jobs that restart in place (spec.restartStrategy:
// InPlace; docs/lifecycle.md, "Restarting in place"): the controller's binary run as a native
// sidecar, first among a pod's init containers. It calls no API. It reads two files of a
// downward-API volume, the pod's attempt label and its released-attempt annotation, and:
//
//   - holds the pod's other containers, init containers too, until the controller releases
//     the attempt the label names: its startup probe (Probe) passes only then;
//   - never releases one attempt twice in one pod: after a container failed and the kubelet
//     restarted them all, the pod waits for the next attempt;
//   - exits with the restart exit code, on which the kubelet restarts every container of the
//     pod, when the label leaves the attempt the pod's containers run.
//
// A small file in an emptyDir volume (the state directory) remembers the attempt last
// released in the pod across those restarts.
package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The files of the state directory.
const (
	startedFile = "started" // the attempt last released in the pod
	readyFile   = "ready"   // present while the attempt it runs was released in this start
)

// Config is where the agent reads and keeps its state, and how it asks for a restart.
type Config struct {
	InfoDir, StateDir string
	RestartExitCode   int
	Poll              time.Duration
	// Linger is how long the agent stays after it is told to stop. The kubelet stops it
	// first when a container of the pod failed and it restarts them all: until it is gone,
	// the pod's status shows the failed container's exit code, which the controller reads;
	// after, only the kubelet's own (137, RestartingAllContainers).
	Linger time.Duration
}

// Main runs the agent with the command line's arguments (after "agent") and returns its exit
// code: the restart exit code when the pod's containers are to restart, 0 when it is told to
// stop, 2 on a bad command line. With --probe it is the startup probe instead: 0 once the
// attempt is released.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := Config{}
	fs.StringVar(&c.InfoDir, "info-dir", "", "the downward-API volume: files attempt (the pod's attempt label) and released (its released-attempt annotation)")
	fs.StringVar(&c.StateDir, "state-dir", "", "a directory that outlives the pod's container restarts (an emptyDir)")
	fs.IntVar(&c.RestartExitCode, "restart-exit-code", 88, "the exit code on which the kubelet restarts every container of the pod")
	fs.DurationVar(&c.Poll, "poll", 200*time.Millisecond, "how often the files are read")
	fs.DurationVar(&c.Linger, "linger", time.Second, "how long to stay once told to stop (SIGTERM), so that the pod's status shows a failed container's exit code before the kubelet restarts them all")
	probe := fs.Bool("probe", false, "be the startup probe: exit 0 once the pod's attempt is released")
	if err := fs.Parse(args); err != nil || c.StateDir == "" || (!*probe && c.InfoDir == "") {
		fmt.Fprintln(stderr, "agent: --state-dir, and --info-dir unless --probe, are required")
		return 2
	}
	if *probe {
		if _, err := os.Stat(filepath.Join(c.StateDir, readyFile)); err != nil {
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	code, err := Run(ctx, c)
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
	}
	return code
}

// Run holds and releases the pod's attempts until the label moves on (the restart exit code)
// or ctx ends (0).
func Run(ctx context.Context, c Config) (int, error) {
	a, err := start(c.StateDir)
	if err != nil {
		return 1, err
	}
	tick := time.NewTicker(c.Poll)
	defer tick.Stop()
	for {
		restart, err := a.step(read(filepath.Join(c.InfoDir, "attempt")), read(filepath.Join(c.InfoDir, "released")))
		switch {
		case err != nil:
			return 1, err
		case restart:
			return c.RestartExitCode, nil
		}
		select {
		case <-ctx.Done():
			time.Sleep(c.Linger)
			return 0, nil
		case <-tick.C:
		}
	}
}

// agent is one start of the agent in a pod.
type agent struct {
	stateDir string
	// started is the attempt last released in the pod, before this start; running the one
	// released in this start ("": none yet).
	started, running string
}

// start begins an agent in a pod: what the last start released is read, and its ready file
// removed, so that the probe passes only once this start releases an attempt.
func start(stateDir string) (*agent, error) {
	if err := os.Remove(filepath.Join(stateDir, readyFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &agent{stateDir: stateDir, started: read(filepath.Join(stateDir, startedFile))}, nil
}

// step looks at the pod's attempt label and released annotation once: it releases the pod's
// containers when the attempt is released and was not released in the pod before, and
// reports restart when the label has left the attempt they run.
func (a *agent) step(attempt, released string) (restart bool, err error) {
	switch {
	case attempt == "":
		// Not read (the kubelet's rename of the directory fell between): nothing is known.
	case a.running != "" && attempt != a.running:
		fmt.Printf("%s attempt %s: restarting every container of the pod for attempt %s\n", now(), a.running, attempt)
		return true, nil
	case a.running == "" && attempt != a.started && attempt == released:
		if err := write(a.stateDir, startedFile, attempt); err != nil {
			return false, err
		}
		if err := write(a.stateDir, readyFile, attempt); err != nil {
			return false, err
		}
		a.running = attempt
		fmt.Printf("%s attempt %s released: the pod's containers start\n", now(), attempt)
	}
	return false, nil
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// read is a file's content, trimmed ("" when it cannot be read: the kubelet replaces the
// downward API's files by renaming a directory, and a read may fall between).
func read(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// write replaces a file of dir by renaming a new one over it, so that a probe or a restart
// never reads half of it.
func write(dir, name, content string) error {
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
