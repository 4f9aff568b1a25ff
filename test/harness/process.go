// Package harness is what the tests' programs share: building and starting the programs they
// run beside a cluster (the controller, the control plane's components),
// waiting for a condition, and reading a /metrics page.
package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build builds the main package pkg (./cmd/..., ./hack/...) of the module at dir into out.
func Build(dir, pkg, out string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// FreeAddr is a loopback address with a port free at the moment (FreePorts).
func FreeAddr() (string, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), nil
}

// FreePorts are n ports free at the moment on every address of this machine, none handed
// out before by this process. A port is released before the program that will listen on it
// starts, so something else could take it in between. The kernel's own choice (port 0) would
// come from the ephemeral range, where every outgoing connection of the machine (kubelet,
// containerd, the tests' clients) takes its local port too, and one did take a controller's
// health port that way. So the ports come from below that range, where only listeners that
// chose a port go.
func FreePorts(n int) ([]int, error) {
	freePorts.Lock()
	defer freePorts.Unlock()
	low, high := belowEphemeral()
	ports := make([]int, 0, n)
	for misses := 0; len(ports) < n; {
		if misses > 1000 {
			return nil, fmt.Errorf("no free port in %d-%d after %d tries", low, high-1, misses)
		}
		port := low + rand.IntN(high-low)
		if freePorts.given[port] {
			misses++
			continue
		}
		// Listening on every address also proves the port free on the loopback one and on
		// the real node's gateway.
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			misses++
			continue
		}
		l.Close()
		freePorts.given[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

var freePorts = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// belowEphemeral is the range [low, high) of 10,000 ports below both the kernel's ephemeral
// ports (net.ipv4.ip_local_port_range, from 32768 by default) and the Services' node ports
// (30000-32767 by default), where kube-proxy may hold ports.
func belowEphemeral() (low, high int) {
	high = 30000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if fields := strings.Fields(string(b)); len(fields) == 2 {
			if v, err := strconv.Atoi(fields[0]); err == nil && v < high && v > 11024 {
				high = v
			}
		}
	}
	return high - 10000, high
}

// Options say how to start a program.
type Options struct {
	// Log receives the program's output; a file is appended to, so that a restarted
	// program's log follows the first one's. Empty: the output is dropped.
	Log string
	// Group makes the program lead a process group of its own: Stop signals the group, so
	// that whatever it started stops with it.
	Group bool
	// Detach lets the program outlive this process (a new session, no parent-death signal);
	// otherwise the kernel kills it when this process dies, so a crashed test leaves
	// nothing behind.
	Detach bool
	// Env, when set, is the program's environment.
	Env []string
}

// Process is a started program.
type Process struct {
	Cmd   *exec.Cmd
	Done  chan struct{} // closed once it has exited
	err   error
	group bool
}

// Start starts path with args.
func Start(path string, args []string, o Options) (*Process, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = o.Env
	if o.Log != "" {
		log, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer log.Close() // the child has its own copy
		cmd.Stdout, cmd.Stderr = log, log
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.Group}
	if o.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	p := &Process{Cmd: cmd, Done: make(chan struct{}), group: o.Group || o.Detach}
	// Linux sends the parent-death signal when the thread that forked the child ends, not
	// the process (golang/go#27505), and Go ends a thread whose goroutine returns locked to
	// it. The child is forked from a thread locked to the goroutine that waits for it, so
	// that thread lives as long as the child does.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.Done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	return p, nil
}

// Pid is the program's process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Exited tells whether the program has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.Done:
		return true, p.err
	default:
		return false, nil
	}
}

// ErrKilled is Stop's error for a program that did not exit within its grace period.
var ErrKilled = errors.New("did not stop in time and was killed")

// Stop sends SIGTERM (to the program's group, if it leads one), and SIGKILL after grace; it
// returns once the program has exited, with ErrKilled if it had to be killed.
func (p *Process) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.Done:
		return nil
	case <-time.After(grace):
		p.signal(syscall.SIGKILL)
		<-p.Done
		return ErrKilled
	}
}

// Kill kills the program at once, as a crash would, and waits until it has exited.
func (p *Process) Kill() {
	p.signal(syscall.SIGKILL)
	<-p.Done
}

func (p *Process) signal(sig syscall.Signal) {
	if p.group {
		_ = syscall.Kill(-p.Pid(), sig)
		return
	}
	_ = p.Cmd.Process.Signal(sig)
}
