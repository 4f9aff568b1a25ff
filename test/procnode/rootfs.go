package procnode

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A pod leaves nothing on the machine. Its containers share the machine's programs, but each
// has a root of its own: an overlay whose lower layer is the machine's root file system and
// whose upper layer lives in the pod's scratch, so that what a container writes outside its
// volumes (a mount target such as /scripts, a workingDir, /run/sshd.pid, ~/.cache) never
// reaches the machine. The machine's other mounts (/dev, /sys, ...) are carried over, /proc
// is the container's own, and /tmp and /dev/shm are the pod's: its containers share them, as
// in Kubernetes, and no other pod sees them.
//
// The pod's scratch is a tmpfs, mounted in a mount namespace of the pod's own that a holder
// process keeps (podFSArg): /dev/shm, memory emptyDirs and the containers' upper layers live
// there, and vanish with the pod, or with the node if it is killed. /tmp is a directory
// under the node's state directory (on disk, as a container's /tmp is in Kubernetes),
// removed when the pod goes. A container init joins the pod's mount namespace, makes its own
// copy of it, builds its root there and pivots into it.

const (
	podFSArg = "__t9k_procnode_podfs"
	// oldRoot is where the machine's root is while a container init mounts its volumes from
	// it, in the container's root; it is gone before the command starts.
	oldRoot = "/.t9k-procnode-old-root"
)

func init() {
	// A container init changes the mount namespace and the root of one thread: main runs on
	// the main thread, whose namespaces are the ones /proc/<pid>/ns shows (nsenter), and the
	// command is started from it.
	if len(os.Args) > 1 && os.Args[1] == containerArg {
		runtime.LockOSThread()
	}
}

// holdPodFS is the pod's file system holder, started in a mount namespace of its own: it
// mounts the pod's tmpfs at dir, with the pod's /dev/shm in it, says so on stdout, and
// waits for its end.
func holdPodFS(dir string) int {
	failed := func(err error) int {
		fmt.Println(err) // the node reads it
		return 1
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return failed(fmt.Errorf("private mounts: %w", err))
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return failed(fmt.Errorf("the pod's tmpfs: %w", err))
	}
	if err := mkdirMode(filepath.Join(dir, "shm"), 0o777|os.ModeSticky); err != nil {
		return failed(err)
	}
	fmt.Println("ready")
	os.Stdout.Close()
	signal.Ignore(syscall.SIGHUP)
	for {
		_ = unix.Pause()
	}
}

// mkdirMode makes a directory with exactly this mode (the umask aside).
func mkdirMode(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode.Perm()); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// podFS is a pod's scratch: its tmpfs (dir/fs, in the holder's mount namespace) and its /tmp
// (dir/tmp, on disk).
type podFS struct {
	holder *os.Process
	exited chan struct{}
	fs     string
	tmp    string
}

// startPodFS starts the holder of a pod's tmpfs, and makes its /tmp.
func startPodFS(dir string) (*podFS, error) {
	p := &podFS{fs: filepath.Join(dir, "fs"), tmp: filepath.Join(dir, "tmp"), exited: make(chan struct{})}
	if err := mkdirMode(p.tmp, 0o777|os.ModeSticky); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.fs, 0o755); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, podFSArg, p.fs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the pod's file system holder: %w", err)
	}
	p.holder = cmd.Process
	line, _ := bufio.NewReader(out).ReadString('\n')
	go func() {
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.exited)
	}()
	if line != "ready\n" {
		p.remove()
		return nil, fmt.Errorf("the pod's file system: %s", strings.TrimSpace(line))
	}
	return p, nil
}

// ns is the pod's mount namespace, where its tmpfs is.
func (p *podFS) ns() string { return fmt.Sprintf("/proc/%d/ns/mnt", p.holder.Pid) }

// nodeView is where the node sees a path of the pod's mount namespace: a path in the pod's
// tmpfs through the holder's root.
func (p *podFS) nodeView(path string) string {
	if p != nil && (path == p.fs || strings.HasPrefix(path, p.fs+"/")) {
		return fmt.Sprintf("/proc/%d/root%s", p.holder.Pid, path)
	}
	return path
}

// memoryDir makes the directory of a memory emptyDir in the pod's tmpfs.
func (p *podFS) memoryDir(name string) (string, error) {
	dir := filepath.Join(p.fs, "volumes", name)
	return dir, mkdirMode(p.nodeView(dir), 0o777)
}

// container fills in a container's part of its spec: its root, in the pod's tmpfs, and the
// pod's /dev/shm and, for the machine's programs, /tmp, mounted before anything else. A
// container of an image has the /tmp of its image, in its root, as in Kubernetes.
func (p *podFS) container(s *containerSpec, name string, fromImage bool) {
	s.PodNS, s.PodFS, s.Root = p.ns(), p.fs, filepath.Join(p.fs, "containers", name)
	own := []mount{{Source: filepath.Join(p.fs, "shm"), Target: "/dev/shm"}}
	if !fromImage {
		own = append([]mount{{Source: p.tmp, Target: "/tmp"}}, own...)
	}
	s.Mounts = append(own, s.Mounts...)
}

// remove ends the holder, and with it the tmpfs once no container uses it, and removes the
// pod's /tmp.
func (p *podFS) remove() {
	if p == nil {
		return
	}
	_ = p.holder.Kill()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
	}
	_ = os.RemoveAll(p.tmp)
	_ = os.Remove(p.fs)
}

// enterPodNS moves this thread into a mount namespace of its own, a copy of the pod's.
func enterPodNS(path string) error {
	// Joining a mount namespace needs a file system context (root, working directory) of
	// this thread's own.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unsharing the file system context: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("joining the pod's mount namespace: %w", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("a mount namespace of the container's own: %w", err)
	}
	return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
}

// rootFS is a container's root while it is made: the overlay at dir with the machine's other
// mounts and a /proc of the container's own, and the sources of the container's mounts,
// opened (O_PATH) on the machine's side.
type rootFS struct {
	dir     string
	mounts  []mount
	sources []int
}

// makeRoot makes the container's root in s.Root; enter then switches to it.
func makeRoot(s *containerSpec) (*rootFS, error) {
	if strings.ContainsAny(s.Root, ",:\\") {
		return nil, fmt.Errorf("the container's directory %q has a character overlayfs options cannot hold", s.Root)
	}
	upper, work, dir := filepath.Join(s.Root, "upper"), filepath.Join(s.Root, "work"), filepath.Join(s.Root, "root")
	for _, d := range []string{upper, work, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if s.Image != "" {
		if strings.ContainsAny(s.Image, ",:\\") {
			return nil, fmt.Errorf("the image's directory %q has a character overlayfs options cannot hold", s.Image)
		}
		if err := unix.Mount("overlay", dir, "overlay", 0, "lowerdir="+s.Image+",upperdir="+upper+",workdir="+work); err != nil {
			return nil, fmt.Errorf("the root (an overlay on the image's): %w", err)
		}
		// An image's root has only what a container runtime gives a container (imageroot.go).
		if err := systemMounts(dir); err != nil {
			return nil, err
		}
	} else {
		if err := unix.Mount("overlay", dir, "overlay", 0, "lowerdir=/,upperdir="+upper+",workdir="+work); err != nil {
			return nil, fmt.Errorf("the root (an overlay on the machine's): %w", err)
		}
		// The container has its own /proc, /tmp and pod file system; the machine's are not
		// carried over.
		carried, err := machineMounts([]string{"/proc", "/tmp", s.PodFS})
		if err != nil {
			return nil, err
		}
		for _, p := range carried {
			if err := unix.Mount(p, filepath.Join(dir, p), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return nil, fmt.Errorf("carrying the machine's mount %s over: %w", p, err)
			}
		}
		if err := unix.Mount("proc", filepath.Join(dir, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return nil, fmt.Errorf("/proc: %w", err)
		}
	}
	r := &rootFS{dir: dir, mounts: s.Mounts}
	for _, m := range s.Mounts {
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("mounting %s at %s: %w", m.Source, m.Target, err)
		}
		r.sources = append(r.sources, fd)
	}
	return r, nil
}

func (r *rootFS) close() {
	for _, fd := range r.sources {
		unix.Close(fd)
	}
	r.sources = nil
}

// enter makes the root this thread's (pivot_root, so that the mount namespace's root is the
// container's too, which nsenter enters), mounts the container's volumes in it (their targets
// are the container's paths, its symbolic links included), and drops the machine's root.
func (r *rootFS) enter() error {
	defer r.close()
	old := filepath.Join(r.dir, oldRoot)
	if err := os.MkdirAll(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(r.dir, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	for i, m := range r.mounts {
		if err := bind(fmt.Sprintf("/proc/self/fd/%d", r.sources[i]), m); err != nil {
			return fmt.Errorf("mounting %s at %s: %w", m.Source, m.Target, err)
		}
	}
	if err := unix.Unmount(oldRoot, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("dropping the machine's root: %w", err)
	}
	return os.Remove(oldRoot)
}

// bind mounts a file or directory (source, which may be a /proc/self/fd link) at m.Target,
// creating the target as needed, and makes it read-only when asked.
func bind(source string, m mount) error {
	if m.File {
		if err := os.MkdirAll(filepath.Dir(m.Target), 0o755); err != nil {
			return err
		}
		if _, err := os.Stat(m.Target); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(m.Target, nil, 0o644); err != nil {
				return err
			}
		}
	} else if err := os.MkdirAll(m.Target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if m.ReadOnly {
		return unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, "")
	}
	return nil
}

// machineMounts lists the mount points of the mounts on this thread's root, but those at or
// under a path of except: each is carried over with the mounts on it.
func machineMounts(except []string) ([]string, error) {
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	type entry struct {
		id, parent int
		point      string
	}
	var entries []entry
	for _, line := range strings.Split(string(bytes.TrimSpace(data)), "\n") {
		// id parent major:minor root mount-point options ...
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo: %q", line)
		}
		entries = append(entries, entry{id, parent, unescapeMountinfo(f[4])})
	}
	// The root is the top of the mounts at "/": the one no other mount at "/" is on.
	root := -1
	for _, e := range entries {
		if e.point != "/" {
			continue
		}
		top := true
		for _, o := range entries {
			top = top && !(o.point == "/" && o.parent == e.id && o.id != e.id)
		}
		if top {
			root = e.id
		}
	}
	if root < 0 {
		return nil, errors.New("mountinfo: no root")
	}
	var points []string
	for _, e := range entries {
		if e.parent == root && e.id != root && e.point != "/" {
			points = append(points, e.point)
		}
	}
	sort.Strings(points)
	var out []string
	for _, p := range points {
		if under(p, except) || under(p, out) {
			continue // the container's own, or carried over already
		}
		out = append(out, p)
	}
	return out, nil
}

// under tells whether path is one of dirs or under one.
func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if d != "" && (path == d || strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/")) {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
