package procnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// execer runs commands in a container (kubectl exec).
type execer struct{ c *container }

// ExecInContainer runs cmd in the container's namespaces as its own command runs: its mount
// namespace (volumes, /proc, hosts), UTS (host name), PID, and the pod's network; its
// working directory and its environment. nsenter does the entering, since a Go program
// cannot join a mount namespace; the command is nsenter's child, in the container's PID
// namespace, so it ends when the container does. The command's exit code is the error's.
func (e execer) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, stderr io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	c := e.c
	if len(cmd) == 0 {
		return errors.New("no command to run")
	}
	select {
	case <-c.exited:
		return fmt.Errorf("cannot exec in a stopped container: %s has ended", c.spec.Name)
	default:
	}
	args := append([]string{"--target", strconv.Itoa(c.cmd.Process.Pid), "--mount", "--uts", "--pid", "--net=" + c.netns},
		c.userArgs()...) // the container's user and group
	switch {
	case c.dir == "":
		args = append(args, "--wd", "--") // the init's working directory, in its mount namespace: the root
	case c.image != nil:
		// An image has no env(1) to change directory with: nsenter changes to it inside.
		args = append(args, "--wdns="+c.dir, "--")
	default:
		// nsenter opens a --wd=DIR before it enters the namespaces, where a directory of the
		// container's mounts is not: env changes to it inside.
		args = append(args, "--wd", "--", "/usr/bin/env", "--chdir="+c.dir, "--")
	}
	p := &session{Cmd: exec.Command("nsenter", append(args, cmd...)...)}
	p.Env = c.env // nsenter passes it on; the command is found in its PATH
	p.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	done := make(chan struct{})
	defer close(done)
	go func() { // a session that ends early ends its command, and what it started
		select {
		case <-ctx.Done():
			p.signal(syscall.SIGKILL)
		case <-done:
		}
	}()
	var err error
	if tty {
		err = runWithTerminal(p, in, out, resize)
	} else {
		err = runWithPipes(p, in, out, stderr)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return utilexec.CodeExitError{Err: err, Code: int(exitCode(exit.ProcessState))}
	}
	return err
}

// session is an exec's process: nsenter, leading a session of its own with the command.
type session struct {
	*exec.Cmd
	mu     sync.Mutex
	waited bool
}

func (p *session) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Start()
}

// wait waits for the process; it is not signalled afterwards (its pid may be another's).
func (p *session) wait() error {
	err := p.Wait()
	p.mu.Lock()
	p.waited = true
	p.mu.Unlock()
	return err
}

// signal signals the process's session, while it runs.
func (p *session) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Process != nil && !p.waited {
		_ = syscall.Kill(-p.Process.Pid, sig)
	}
}

// runWithPipes runs p with the session's streams. Stdin is copied by hand: exec.Cmd would
// wait for the client's stdin to end before it returns.
func runWithPipes(p *session, in io.Reader, out, stderr io.Writer) error {
	if out != nil {
		p.Stdout = out
	}
	if stderr != nil {
		p.Stderr = stderr
	}
	var stdin io.WriteCloser
	if in != nil {
		var err error
		if stdin, err = p.StdinPipe(); err != nil {
			return err
		}
	}
	if err := p.start(); err != nil {
		return err
	}
	if in != nil {
		go func() {
			_, _ = io.Copy(stdin, in)
			_ = stdin.Close() // the client's end of input is the command's
		}()
	}
	return p.wait()
}

// runWithTerminal runs p on a new terminal, which the session's input and output go through,
// sized as the client's.
func runWithTerminal(p *session, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	master, tty, err := pty.Open()
	if err != nil {
		return err
	}
	defer master.Close()
	p.Stdin, p.Stdout, p.Stderr = tty, tty, tty
	p.SysProcAttr.Setctty = true // fd 0 becomes the controlling terminal of its session
	err = p.start()
	tty.Close()
	if err != nil {
		return err
	}
	go resizeTerminal(master, resize)
	if in != nil {
		go func() {
			_, _ = io.Copy(master, in)
			p.signal(syscall.SIGHUP) // the client's terminal is gone: hang up, as a terminal does
		}()
	}
	copied := make(chan struct{})
	go func() {
		if out != nil {
			_, _ = io.Copy(out, master) // until the terminal's last holder closes it
		}
		close(copied)
	}()
	err = p.wait()
	select { // what the command wrote last; a process it left behind may hold the terminal
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	return err
}

func resizeTerminal(f *os.File, resize <-chan remotecommand.TerminalSize) {
	for size := range resize {
		if size.Width > 0 && size.Height > 0 {
			_ = pty.Setsize(f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
		}
	}
}

// attacher attaches clients to a container's own command (kubectl attach).
type attacher struct{ c *container }

// AttachContainer gives the client the container's output from now on, until the container
// ends or the client goes; with spec.stdin, the client's input goes to the command
// (spec.stdinOnce: its stdin closes when the client's input ends); with spec.tty, input and
// output go through the container's terminal, which the client sizes.
func (a attacher) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, stderr io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize) error {
	c := a.c
	select {
	case <-c.exited:
		return fmt.Errorf("cannot attach to a stopped container: %s has ended", c.spec.Name)
	default:
	}
	if in != nil && c.stdin == nil {
		return fmt.Errorf("container %s does not keep stdin open (spec.stdin)", c.spec.Name)
	}
	if tty && c.tty == nil {
		return fmt.Errorf("container %s has no terminal (spec.tty)", c.spec.Name)
	}
	if tty {
		go resizeTerminal(c.tty, resize)
	}
	output, detach := c.out.attach()
	defer detach()
	gone := make(chan struct{})
	if in != nil {
		go func() {
			_, err := io.Copy(c.stdin, in)
			if c.spec.StdinOnce {
				c.closeStdin()
			}
			if err != nil { // the client went
				close(gone)
			}
		}()
	}
	for {
		select {
		case ch, ok := <-output:
			if !ok {
				return nil // the container has ended
			}
			w := out
			if ch.stream == "stderr" {
				w = stderr
			}
			if w != nil {
				if _, err := w.Write(ch.data); err != nil {
					return nil // the client went
				}
			}
		case <-gone:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
