package procnode

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// secureThread gives this thread, the container init's main thread, the security of the
// command it is about to start, which inherits it (security.go): no_new_privs, the bounding
// set of capabilities (with nothing inheritable or ambient), then the groups and the user.
// The calls are the thread's own, not the process's: the init's other threads stay root, to
// pass signals on to the command and reap it.
func secureThread(s processSecurity) error {
	if s.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	if s.Capabilities != nil {
		if err := boundCapabilities(*s.Capabilities); err != nil {
			return err
		}
	}
	if !s.SetUser {
		return nil
	}
	groups := s.Groups
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); errno != 0 {
		return fmt.Errorf("setgroups %v: %w", groups, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(s.GID), uintptr(s.GID), uintptr(s.GID)); errno != 0 {
		return fmt.Errorf("setresgid %d: %w", s.GID, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(s.UID), uintptr(s.UID), uintptr(s.UID)); errno != 0 {
		return fmt.Errorf("setresuid %d: %w", s.UID, errno)
	}
	// A new user or group clears the parent-death signal the node gave the init: give it back,
	// so that the container still dies with the node. (The init is its PID namespace's first
	// process, whose parent it cannot see: a node killed in between these calls would leave
	// it, a window of microseconds.)
	return unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
}

// boundCapabilities drops from the thread's bounding set every capability not in keep, and
// clears its inheritable and ambient sets: a root command then has exactly keep, effective,
// and another user's has none.
func boundCapabilities(keep []int) error {
	last, err := lastCapability()
	if err != nil {
		return err
	}
	kept := map[int]bool{}
	for _, c := range keep {
		kept[c] = true
	}
	for c := 0; c <= last; c++ {
		if !kept[c] {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
				return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// lastCapability is the highest capability this kernel knows.
func lastCapability() (int, error) {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}
