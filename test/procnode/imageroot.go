package procnode

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// systemMounts mounts in the root of a container made from an image (not yet entered) what a
// container runtime gives every container, and nothing else of the machine's: a /proc of its
// own; a /dev of its own, a tmpfs with the machine's null, zero, full, random, urandom and
// tty, the usual links, and a devpts of its own; /sys, read-only. (/dev/shm, /etc/hosts,
// /etc/resolv.conf and the volumes are mounted later, as in every container.)
func systemMounts(root string) error {
	for _, m := range []struct {
		target, fstype, data string
		flags                uintptr
	}{
		{"proc", "proc", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"dev", "tmpfs", "mode=755,size=65536k", unix.MS_NOSUID | unix.MS_STRICTATIME},
		{"sys", "sysfs", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY},
	} {
		target := filepath.Join(root, m.target)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		err := unix.Mount(m.fstype, target, m.fstype, m.flags, m.data)
		if err != nil && m.target == "sys" {
			// Where a sysfs of the pod's network cannot be mounted, the machine's, read-only.
			err = bind("/sys", mount{Target: target, ReadOnly: true})
		}
		if err != nil {
			return fmt.Errorf("/%s: %w", m.target, err)
		}
	}
	dev := filepath.Join(root, "dev")
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := bind("/dev/"+name, mount{Target: filepath.Join(dev, name), File: true}); err != nil {
			return fmt.Errorf("/dev/%s: %w", name, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("/dev/pts: %w", err)
	}
	return nil
}
