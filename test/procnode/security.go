package procnode

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A container's security context, the pod's merged with the container's (the container's
// fields win), is what its process runs with, as a kubelet and a container runtime make it:
//
//   - the user: runAsUser, else the image's User (a name is looked up in the root's
//     /etc/passwd), else root; the group: runAsGroup, else the image User's group, else the
//     user's primary group in /etc/passwd, else 0; supplementary groups: the user's groups in
//     /etc/group, fsGroup and supplementalGroups;
//   - runAsNonRoot: a root user, or an image user that is a name, refuses the container as a
//     kubelet does: it stays Waiting with reason CreateContainerConfigError;
//   - capabilities: the container runtime's default set, less drop, plus add (ALL in either);
//     privileged: every capability. This is the process's bounding set: a root process has
//     it all, effective; another user's process has none effective (no ambient capabilities).
//     A pod that runs the machine's programs (no image) and names no capabilities keeps the
//     full set of root, as those programs had before images (sshd, for one);
//   - allowPrivilegeEscalation false: no_new_privs;
//   - readOnlyRootFilesystem: the container's root is remounted read-only once its mounts
//     are made (volumes stay as their mounts say).
//
// Not enforced: seccomp and AppArmor profiles, SELinux options, procMount, sysctls, the
// ownership and modes fsGroup gives volumes (fsGroupChangePolicy), Windows options, and the
// capabilities and no_new_privs of a process that `kubectl exec` or an exec probe starts
// (it runs as the container's user and groups, with the node's capabilities).

// defaultCapabilities are the capabilities a container runtime (containerd, CRI-O, Docker)
// gives a container by default.
var defaultCapabilities = []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"}

// capabilityNames are Linux's, by number.
var capabilityNames = []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
	"MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
	"CHECKPOINT_RESTORE"}

// processSecurity is what a container init applies to the command it starts (init.go).
type processSecurity struct {
	UID, GID uint32
	Groups   []uint32
	// Capabilities, when set, is the bounding set, by number; nil leaves every capability.
	Capabilities *[]int
	NoNewPrivs   bool
	ReadOnlyRoot bool
	// Home is the user's home directory in its root, for HOME ("" when it has no entry).
	Home string
	// SetUser: the init sets the user, group and groups; otherwise the command keeps the
	// node's (root, as the machine's programs always ran).
	SetUser bool
}

// configError is a container that cannot be made as its pod and image say: the kubelet's
// CreateContainerConfigError, which leaves it Waiting.
type configError struct{ msg string }

func (e configError) Error() string { return e.msg }

// effectiveSecurityContext merges the pod's security context into the container's, as
// Kubernetes does: the container's fields win.
func effectiveSecurityContext(pod *corev1.Pod, c *corev1.Container) corev1.SecurityContext {
	var sc corev1.SecurityContext
	if p := pod.Spec.SecurityContext; p != nil {
		sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot = p.RunAsUser, p.RunAsGroup, p.RunAsNonRoot
		sc.SELinuxOptions, sc.SeccompProfile, sc.AppArmorProfile, sc.WindowsOptions = p.SELinuxOptions, p.SeccompProfile, p.AppArmorProfile, p.WindowsOptions
	}
	if c.SecurityContext == nil {
		return sc
	}
	cs := c.SecurityContext.DeepCopy()
	if cs.RunAsUser == nil {
		cs.RunAsUser = sc.RunAsUser
	}
	if cs.RunAsGroup == nil {
		cs.RunAsGroup = sc.RunAsGroup
	}
	if cs.RunAsNonRoot == nil {
		cs.RunAsNonRoot = sc.RunAsNonRoot
	}
	if cs.SELinuxOptions == nil {
		cs.SELinuxOptions = sc.SELinuxOptions
	}
	if cs.SeccompProfile == nil {
		cs.SeccompProfile = sc.SeccompProfile
	}
	if cs.AppArmorProfile == nil {
		cs.AppArmorProfile = sc.AppArmorProfile
	}
	if cs.WindowsOptions == nil {
		cs.WindowsOptions = sc.WindowsOptions
	}
	return *cs
}

// securityFor works out the security of a container's process. imageUser is the image's
// User ("" for none, or the machine's programs); root is the file system its names are
// looked up in (the image's, or the machine's); fromImage says whether the runtime's default
// capabilities apply (see above).
func securityFor(pod *corev1.Pod, c *corev1.Container, imageUser, root string, fromImage bool) (processSecurity, error) {
	sc := effectiveSecurityContext(pod, c)
	var out processSecurity
	if err := verifyRunAsNonRoot(pod, c, sc, imageUser); err != nil {
		return out, err
	}
	users, _ := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	groups, _ := os.ReadFile(filepath.Join(root, "etc", "group"))
	passwd, groupFile := parsePasswd(users), parseGroups(groups)

	userPart, groupPart, _ := strings.Cut(imageUser, ":")
	var entry *passwdEntry
	switch {
	case sc.RunAsUser != nil:
		out.UID = uint32(*sc.RunAsUser)
		entry = passwd.byUID(out.UID)
	case userPart == "":
		entry = passwd.byUID(0) // root, whose home and groups count
	default:
		if uid, err := strconv.ParseUint(userPart, 10, 32); err == nil {
			out.UID = uint32(uid)
			entry = passwd.byUID(out.UID)
		} else if entry = passwd.byName(userPart); entry != nil {
			out.UID = entry.uid
		} else {
			return out, configError{fmt.Sprintf("unable to find user %s: no matching entries in passwd file", userPart)}
		}
	}
	switch {
	case sc.RunAsGroup != nil:
		out.GID = uint32(*sc.RunAsGroup)
	case groupPart != "" && sc.RunAsUser == nil:
		if gid, err := strconv.ParseUint(groupPart, 10, 32); err == nil {
			out.GID = uint32(gid)
		} else if g := groupFile.byName(groupPart); g != nil {
			out.GID = g.gid
		} else {
			return out, configError{fmt.Sprintf("unable to find group %s: no matching entries in group file", groupPart)}
		}
	case entry != nil:
		out.GID = entry.gid
	}
	set := map[uint32]bool{}
	if entry != nil {
		out.Home = entry.home
		for _, g := range groupFile {
			if g.members[entry.name] && g.gid != out.GID {
				set[g.gid] = true
			}
		}
	}
	if p := pod.Spec.SecurityContext; p != nil {
		if p.FSGroup != nil {
			set[uint32(*p.FSGroup)] = true
		}
		for _, g := range p.SupplementalGroups {
			set[uint32(g)] = true
		}
	}
	for g := range set {
		out.Groups = append(out.Groups, g)
	}
	sort.Slice(out.Groups, func(i, j int) bool { return out.Groups[i] < out.Groups[j] })

	out.SetUser = fromImage || out.UID != 0 || out.GID != 0 || len(out.Groups) > 0
	caps, err := capabilities(sc, fromImage)
	if err != nil {
		return out, err
	}
	out.Capabilities = caps
	out.NoNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation && (sc.Privileged == nil || !*sc.Privileged)
	out.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	return out, nil
}

// verifyRunAsNonRoot refuses a container that must not run as root but would, or might, with
// the kubelet's words.
func verifyRunAsNonRoot(pod *corev1.Pod, c *corev1.Container, sc corev1.SecurityContext, imageUser string) error {
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	who := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return configError{fmt.Sprintf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", who, c.Name)}
		}
		return nil
	}
	user, _, _ := strings.Cut(imageUser, ":")
	uid, err := strconv.ParseInt(user, 10, 64)
	switch {
	case user == "" || err == nil && uid == 0:
		return configError{fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", who, c.Name)}
	case err != nil:
		return configError{fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", user, who, c.Name)}
	}
	return nil
}

// capabilities is the bounding set of a container's process (nil: all of root's, unchanged).
func capabilities(sc corev1.SecurityContext, fromImage bool) (*[]int, error) {
	if sc.Privileged != nil && *sc.Privileged {
		return nil, nil
	}
	if sc.Capabilities == nil && !fromImage {
		return nil, nil
	}
	set := map[string]bool{}
	for _, name := range defaultCapabilities {
		set[name] = true
	}
	var add, drop []string
	if sc.Capabilities != nil {
		for _, list := range []struct {
			from []corev1.Capability
			to   *[]string
		}{{sc.Capabilities.Add, &add}, {sc.Capabilities.Drop, &drop}} {
			for _, c := range list.from {
				name, err := capabilityName(c)
				if err != nil {
					return nil, err
				}
				*list.to = append(*list.to, name)
			}
		}
	}
	// As containerd does: ALL first (add, then drop), then single ones (add, then drop).
	if slices.Contains(add, "ALL") {
		for _, n := range capabilityNames {
			set[n] = true
		}
	}
	if slices.Contains(drop, "ALL") {
		set = map[string]bool{}
	}
	for _, n := range add {
		set[n] = n != "ALL"
	}
	for _, n := range drop {
		delete(set, n)
	}
	caps := []int{}
	for i, name := range capabilityNames {
		if set[name] {
			caps = append(caps, i)
		}
	}
	return &caps, nil
}

// capabilityName is a capability's name without CAP_, upper case; ALL stays.
func capabilityName(c corev1.Capability) (string, error) {
	name := strings.TrimPrefix(strings.ToUpper(string(c)), "CAP_")
	if name == "ALL" {
		return name, nil
	}
	for _, n := range capabilityNames {
		if n == name {
			return name, nil
		}
	}
	return "", configError{fmt.Sprintf("unknown capability %q", c)}
}

type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

type passwdFile []passwdEntry

// parsePasswd reads /etc/passwd: name:password:uid:gid:gecos:home:shell.
func parsePasswd(data []byte) passwdFile {
	var out passwdFile
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := strings.Split(s.Text(), ":")
		if len(f) < 6 {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 == nil && err2 == nil {
			out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid), home: f[5]})
		}
	}
	return out
}

func (p passwdFile) byUID(uid uint32) *passwdEntry {
	for i := range p {
		if p[i].uid == uid {
			return &p[i]
		}
	}
	return nil
}

func (p passwdFile) byName(name string) *passwdEntry {
	for i := range p {
		if p[i].name == name {
			return &p[i]
		}
	}
	return nil
}

type groupEntry struct {
	name    string
	gid     uint32
	members map[string]bool
}

type groupFile []groupEntry

// parseGroups reads /etc/group: name:password:gid:member,member.
func parseGroups(data []byte) groupFile {
	var out groupFile
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := strings.Split(s.Text(), ":")
		if len(f) < 4 {
			continue
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		g := groupEntry{name: f[0], gid: uint32(gid), members: map[string]bool{}}
		for _, m := range strings.Split(f[3], ",") {
			if m != "" {
				g.members[m] = true
			}
		}
		out = append(out, g)
	}
	return out
}

func (g groupFile) byName(name string) *groupEntry {
	for i := range g {
		if g[i].name == name {
			return &g[i]
		}
	}
	return nil
}
