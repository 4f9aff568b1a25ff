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

// The node runs two kinds of helper processes, both its own binary started again with a
// hidden first argument: a holder keeps a network namespace alive (a pod's, or the node's,
// which holds the bridge), and a container init is the first process of one container.
// Both die with the node (parent-death signal), and what they hold dies with them: the
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
	case containerArg:
		os.Exit(runContainer(os.Args[2]))
	}
}

// containerSpec is what a container init needs; the node writes it as JSON.
type containerSpec struct {
	Hostname string
	// NetNS is the pod's network namespace (a holder's /proc/<pid>/ns/net).
	NetNS   string
	Mounts  []mount
	Dir     string
	Env     []string
	Command []string
	Log     string
}

type mount struct {
	Source, Target string
	ReadOnly       bool
	// File: the source is a file (hosts, resolv.conf).
	File bool
}

// runContainer is the first process of a container, in new mount, UTS and PID namespaces:
// it joins the pod's network, mounts the volumes, then runs the command as its child, passes
// signals on, reaps orphans, and exits as the command did (128+n for a signal).
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
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("private mounts: %v", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fail("/proc: %v", err)
	}
	for _, m := range s.Mounts {
		if err := bind(m); err != nil {
			return fail("mounting %s at %s: %v", m.Source, m.Target, err)
		}
	}
	log, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail("%v", err)
	}
	if s.Dir != "" {
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return fail("workingDir: %v", err)
		}
	}
	path := lookPath(s.Command[0], s.Env)
	proc, err := os.StartProcess(path, s.Command, &os.ProcAttr{Dir: s.Dir, Env: s.Env, Files: []*os.File{nil, log, log},
		Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		fmt.Fprintf(log, "procnode: starting %q: %v\n", s.Command[0], err)
		return 127
	}
	log.Close()
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

// bind mounts a file or directory at its target, creating the target as needed, and makes it
// read-only when asked.
func bind(m mount) error {
	if m.File {
		if err := os.MkdirAll(filepath.Dir(m.Target), 0o755); err != nil {
			return err
		}
		if _, err := os.Stat(m.Target); os.IsNotExist(err) {
			if err := os.WriteFile(m.Target, nil, 0o644); err != nil {
				return err
			}
		}
	} else if err := os.MkdirAll(m.Target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if m.ReadOnly {
		return unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, "")
	}
	return nil
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
