package procnode

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The node runs three kinds of helper processes, all its own binary started again with a
// hidden first argument: a holder keeps a network namespace alive (a pod's, or the node's,
// which holds the bridge), a pod's file system holder keeps the pod's mount namespace with
// its tmpfs (rootfs.go), and a container init is the first process of one container. All
// die with the node (parent-death signal), and what they hold dies with them: the
// namespaces, their interfaces and mounts. So a node that is killed leaves nothing behind.
const (
	holdArg      = "__t9k_procnode_hold"
	containerArg = "__t9k_procnode_container"
)

// Init runs the helper process this one was started as, if any, and never returns then. A
// binary that embeds the node calls it first thing in main.
func Init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case holdArg:
		// Hold the namespace until the node (or a signal) ends us.
		signal.Ignore(syscall.SIGHUP)
		for {
			_ = unix.Pause()
		}
	case podFSArg:
		os.Exit(holdPodFS(os.Args[2]))
	case containerArg:
		os.Exit(runContainer(os.Args[2]))
	}
}

// containerSpec is what a container init needs; the node writes it as JSON.
type containerSpec struct {
	Hostname string
	// NetNS is the pod's network namespace (a holder's /proc/<pid>/ns/net).
	NetNS string
	// PodNS is the pod's mount namespace (its file system holder's /proc/<pid>/ns/mnt), with
	// the pod's tmpfs at PodFS; Root is the container's directory there (rootfs.go).
	PodNS, PodFS, Root string
	// Mounts are mounted in order, in the container's root.
	Mounts  []mount
	Dir     string
	Env     []string
	Command []string
	// The command's stdin, stdout and stderr are the init's fds 3, 4 and 5 (stdio.go); with
	// TTY they are a terminal, which becomes the command's controlling terminal.
	TTY bool
	// Image is the unpacked root file system of the container's image, the lower layer of its
	// root; empty: the machine's root (rootfs.go).
	Image string
	// Security is what the command runs with (security.go, applied by secure.go).
	Security processSecurity
}

type mount struct {
	Source, Target string
	ReadOnly       bool
	// File: the source is a file (hosts, resolv.conf).
	File bool
}

// runContainer is the first process of a container, in new mount, UTS and PID namespaces:
// it joins the pod's network, makes the container's root and mounts the volumes in it
// (rootfs.go), then runs the command as its child, passes signals on, reaps orphans, and
// exits as the command did (128+n for a signal).
func runContainer(specPath string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "procnode: "+format+"\n", args...)
		return 127
	}
	data, err := os.ReadFile(specPath)
	if err != nil {
		return fail("%v", err)
	}
	var s containerSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return fail("%v", err)
	}
	runtime.LockOSThread() // the namespace we join is this thread's; the command forks from it
	ns, err := os.Open(s.NetNS)
	if err != nil {
		return fail("pod network: %v", err)
	}
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fail("joining the pod network: %v", err)
	}
	ns.Close()
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return fail("hostname: %v", err)
	}
	if err := enterPodNS(s.PodNS); err != nil {
		return fail("%v", err)
	}
	root, err := makeRoot(&s)
	if err != nil {
		return fail("%v", err)
	}
	stdio := []*os.File{os.NewFile(3, "stdin"), os.NewFile(4, "stdout"), os.NewFile(5, "stderr")}
	if err := root.enter(); err != nil {
		return fail("%v", err)
	}
	if s.Dir != "" {
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return fail("workingDir: %v", err)
		}
	}
	if s.Security.ReadOnlyRoot {
		// The root only: the mounts on it (volumes, /dev, /proc, hosts) keep their own flags.
		if err := unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fail("a read-only root: %v", err)
		}
	}
	path := lookPath(s.Command[0], s.Env)
	if err := secureThread(s.Security); err != nil {
		return fail("%v", err)
	}
	proc, err := os.StartProcess(path, s.Command, &os.ProcAttr{Dir: s.Dir, Env: s.Env, Files: stdio,
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: s.TTY}})
	if err != nil {
		fmt.Fprintf(stdio[2], "procnode: starting %q: %v\n", s.Command[0], err)
		return 127
	}
	for _, f := range stdio {
		f.Close()
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for sig := range signals {
			_ = syscall.Kill(-proc.Pid, sig.(syscall.Signal)) // the command's session
		}
	}()
	for {
		var status unix.WaitStatus
		pid, err := unix.Wait4(-1, &status, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail("waiting: %v", err)
		}
		if pid != proc.Pid {
			continue // an orphan, reaped
		}
		if status.Signaled() {
			return 128 + int(status.Signal())
		}
		return status.ExitStatus()
	}
}

// lookPath finds a command in the container's PATH.
func lookPath(name string, env []string) string {
	if strings.Contains(name, "/") {
		return name
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}
