package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// pidFile lists "name pid" per started component, so that StopDir can stop a detached
// cluster from another process.
const pidFile = "pids"

// stopGrace is how long a component has to exit after SIGTERM before it is killed.
const stopGrace = 10 * time.Second

// process is a started component.
type process struct {
	name string
	path string
	args []string
	*harness.Process
}

// run starts one component with its output in logs/<name>.log. Each component leads its own
// process group, so that stopping it stops anything it started. Unless detached, the kernel
// kills it when this process dies, so a crashed test leaves nothing behind.
func (c *Cluster) run(name, path string, args ...string) error {
	return c.runEnv(name, path, nil, args...)
}

// runEnv is run with the environment env (nil: this process's).
func (c *Cluster) runEnv(name, path string, env []string, args ...string) error {
	started, err := harness.Start(path, args, harness.Options{Log: filepath.Join(c.Dir, "logs", name+".log"),
		Group: true, Detach: c.opts.Detach, Env: env})
	if err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, path: path, args: args, Process: started}
	c.procs = append(c.procs, p)

	f, err := os.OpenFile(filepath.Join(c.Dir, pidFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %d\n", name, p.Pid())
	return err
}

// Stop stops every component, newest first, and waits until each has exited. A real node
// goes first, and leaves the machine as it was (realnode_teardown.go).
func (c *Cluster) Stop() error {
	var errs []error
	if c.opts.RealNode {
		errs = append(errs, tearDownRealNode(c.Dir, c.opts.Progress))
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].stop())
	}
	c.procs = nil
	_ = os.Remove(filepath.Join(c.Dir, pidFile))
	return errors.Join(errs...)
}

// stop stops one component and waits until it has exited.
func (p *process) stop() error {
	if err := p.Stop(stopGrace); err != nil {
		return fmt.Errorf("%s: %w after %s", p.name, err, stopGrace)
	}
	return nil
}

// StopDir stops the cluster whose directory is dir, started by another process (a detached
// cluster). A recorded pid that no longer runs the recorded component is left alone.
func StopDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, pidFile)); errors.Is(err, os.ErrNotExist) {
		return nil // nothing running
	}
	entries := pidEntries(dir)
	var errs []error
	if slices.ContainsFunc(entries, func(e pidEntry) bool { return e.name == "kubelet" }) {
		errs = append(errs, tearDownRealNode(dir, io.Discard))
	}
	for i := len(entries) - 1; i >= 0; i-- {
		errs = append(errs, entries[i].stop())
	}
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// pidEntry is a line of the pid file: a component's name and pid.
type pidEntry struct {
	name string
	pid  int
}

// stop stops the component, if it still runs: SIGTERM to its process group, SIGKILL after
// stopGrace (an error then says so).
func (e pidEntry) stop() error {
	if !runs(e.pid, e.name) {
		return nil
	}
	_ = syscall.Kill(-e.pid, syscall.SIGTERM)
	deadline := time.Now().Add(stopGrace)
	for runs(e.pid, e.name) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if runs(e.pid, e.name) {
		_ = syscall.Kill(-e.pid, syscall.SIGKILL)
		return fmt.Errorf("%s (pid %d) did not stop in %s and was killed", e.name, e.pid, stopGrace)
	}
	return nil
}

// pidEntries reads the cluster's pid file (none when it has none).
func pidEntries(dir string) []pidEntry {
	f, err := os.Open(filepath.Join(dir, pidFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	var entries []pidEntry
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		name, pidText, ok := strings.Cut(scanner.Text(), " ")
		pid, err := strconv.Atoi(pidText)
		if ok && err == nil {
			entries = append(entries, pidEntry{name, pid})
		}
	}
	return entries
}

// runs reports whether pid is a live process of the named component (not a zombie, and not a
// recycled pid of another program).
func runs(pid int, name string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// stat is "pid (comm) state ...", comm cut to 15 characters.
	open, end := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
	if open < 0 || end < open || end+2 >= len(stat) {
		return false
	}
	comm, state := string(stat[open+1:end]), stat[end+2]
	return state != 'Z' && strings.HasPrefix(name, comm)
}

// CPUSeconds is the CPU time (user and system) each component has used so far, by name.
func (c *Cluster) CPUSeconds() map[string]float64 {
	used := map[string]float64{}
	for _, p := range c.procs {
		used[p.name] = ProcessCPUSeconds(p.Pid())
	}
	return used
}

// ProcessCPUSeconds is the CPU time (user and system) process pid has used so far; 0 when it
// cannot be read.
func ProcessCPUSeconds(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 || end+2 >= len(stat) {
		return 0
	}
	// After the command in parentheses, utime and stime are the 12th and 13th fields, in
	// clock ticks of 1/100 s.
	fields := strings.Fields(string(stat[end+2:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

// StopAPIServer kills the cluster's API server alone, as an outage would: everything else
// runs on, and finds it gone. StartAPIServer brings it back, on the same address and data.
func (c *Cluster) StopAPIServer() error {
	for i, p := range c.procs {
		if p.name == "kube-apiserver" {
			c.procs = append(c.procs[:i:i], c.procs[i+1:]...)
			c.stopped = append(c.stopped, p)
			p.Kill() // at once: an outage, not a shutdown
			return nil
		}
	}
	return errors.New("the cluster runs no kube-apiserver")
}

// StartAPIServer starts the API server StopAPIServer stopped, and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	for i, p := range c.stopped {
		if p.name != "kube-apiserver" {
			continue
		}
		c.stopped = append(c.stopped[:i:i], c.stopped[i+1:]...)
		if err := c.run(p.name, p.path, p.args...); err != nil {
			return err
		}
		client, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			return err
		}
		return c.waitFor(ctx, "kube-apiserver", 90*time.Second, func(ctx context.Context) error {
			return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		})
	}
	return errors.New("no kube-apiserver was stopped")
}
