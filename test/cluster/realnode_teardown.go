package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stopping the real node leaves the machine as it was before it started: no process, mount,
// network namespace, link, cgroup, iptables or nftables rule, changed sysctl, or file of its
// own. What its parts change on the host is recorded before they start (saveHostState) and
// restored after they stop; RealNodeLeftovers checks it.

// realSysctls are the sysctls the node's parts change: the kubelet (protectKernelDefaults off),
// the bridge plugin (isGateway) and kube-proxy.
var realSysctls = []string{"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward", "net.ipv4.conf.all.route_localnet",
	"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables", "net.netfilter.nf_conntrack_max"}

// realFixedDirs are the paths the kubelet, containerd and libcni hard-code.
var realFixedDirs = []string{"/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/run/containerd", "/var/lib/cni", "/etc/cni", "/opt/cni"}

// realNodeComponents are the node's processes in the cluster's pid file, stopped in this
// order; containerd goes after its pods are removed.
var realNodeComponents = []string{"coredns", "kube-proxy", "kubelet"}

// hostState is the machine as it was before the node started.
type hostState struct {
	Sysctls   map[string]string `json:"sysctls"` // absent: not on this kernel
	Existed   []string          `json:"existed"` // of realFixedDirs
	IPTables  []string          `json:"iptables"`
	IP6Tables []string          `json:"ip6tables"`
	NFTables  []string          `json:"nftables"`
}

// hostStateFile is where the state is kept while the node runs, and where it is moved once
// the node is gone, for RealNodeLeftovers.
func hostStateFile() string               { return filepath.Join(realStateDir, "host.json") }
func keptHostStateFile(dir string) string { return filepath.Join(dir, "realnode-host.json") }

func saveHostState(clusterDir string) error {
	if err := os.MkdirAll(realStateDir, 0o700); err != nil {
		return err
	}
	s := hostState{Sysctls: map[string]string{}}
	for _, name := range realSysctls {
		if v, err := readSysctl(name); err == nil {
			s.Sysctls[name] = v
		}
	}
	for _, d := range realFixedDirs {
		if _, err := os.Lstat(d); err == nil {
			s.Existed = append(s.Existed, d)
		}
	}
	s.IPTables, s.IP6Tables, s.NFTables = iptablesRules("iptables"), iptablesRules("ip6tables"), nftTables()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(hostStateFile(), b, 0o600)
}

// tearDownRealNode stops the real node of the cluster whose directory is clusterDir (or the
// one a crashed run left: its processes then are gone or orphans) and restores the machine.
// It does what it can and reports every step that failed.
func tearDownRealNode(clusterDir string, progress io.Writer) error {
	p := realPaths()
	var errs []error
	// 1. The kubelet and its neighbours, so that nothing makes pods again.
	for _, name := range realNodeComponents {
		stopComponent(clusterDir, name)
	}
	// 2. Every pod sandbox, through the CRI: its network (CNI DEL), mounts and containers.
	binDir := realNodeBinDir()
	if _, err := os.Stat(p.containerdSocket); err == nil && binDir != "" {
		if out, err := exec.Command(filepath.Join(binDir, "crictl"), "--runtime-endpoint", "unix://"+p.containerdSocket,
			"--timeout", "30s", "rmp", "-fa").CombinedOutput(); err != nil {
			fmt.Fprintf(progress, "realnode: crictl rmp: %v: %s\n", err, strings.TrimSpace(string(out)))
		}
	}
	// 3. kube-proxy's rules, and the chains and tables it leaves after its own clean-up.
	if _, err := os.Stat(p.proxyConfig); err == nil && binDir != "" {
		_ = exec.Command(filepath.Join(binDir, "kube-proxy"), "--cleanup", "--config="+p.proxyConfig).Run()
	}
	state, _ := readHostState(hostStateFile())
	errs = append(errs, cleanIPTables(state))
	// 4. containerd, then what it leaves running: shims and containers.
	stopComponent(clusterDir, "containerd")
	if pids := realNodeProcesses(); len(pids) > 0 {
		fmt.Fprintf(progress, "realnode: killing leftover processes %v\n", pids)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		waitGone(pids, 5*time.Second)
	}
	// 5. Mounts, deepest first; then the bridge and the kubelet's cgroups.
	for _, m := range realNodeMounts() {
		if err := syscall.Unmount(m, 0); err != nil {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
			}
		}
	}
	if _, err := os.Stat("/sys/class/net/" + realBridge); err == nil {
		errs = append(errs, run("ip", "link", "del", realBridge))
	}
	for _, c := range realNodeCgroups() {
		if err := os.Remove(c); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", c, err))
		}
	}
	// 6. The host as it was: sysctls and the fixed directories.
	if state != nil {
		for name, v := range state.Sysctls {
			if now, err := readSysctl(name); err == nil && now != v {
				errs = append(errs, writeSysctl(name, v))
			}
		}
		for _, d := range realFixedDirs {
			if !slices.Contains(state.Existed, d) {
				errs = append(errs, os.RemoveAll(d))
			}
		}
		if b, err := json.Marshal(state); err == nil && clusterDir != "" {
			if _, err := os.Stat(clusterDir); err == nil {
				errs = append(errs, os.WriteFile(keptHostStateFile(clusterDir), b, 0o600))
			}
		}
	}
	errs = append(errs, os.RemoveAll(realStateDir))
	return errors.Join(errs...)
}

// RanRealNode reports whether the cluster whose directory is dir ran a real node that has
// stopped (its record of the machine is kept there).
func RanRealNode(dir string) bool {
	_, err := os.Stat(keptHostStateFile(dir))
	return err == nil
}

// RealNodeLeftovers lists what the real node left on the machine after it stopped: empty
// when it left nothing. The cluster's directory holds the machine's state from before it
// started (its iptables rules and sysctls), to compare with.
func RealNodeLeftovers(clusterDir string) []string {
	var left []string
	if pids := realNodeProcesses(); len(pids) > 0 {
		left = append(left, fmt.Sprintf("processes %v", pids))
	}
	if m := realNodeMounts(); len(m) > 0 {
		left = append(left, "mounts "+strings.Join(m, ", "))
	}
	if links := realNodeLinks(); len(links) > 0 {
		left = append(left, "links "+strings.Join(links, ", "))
	}
	if entries, _ := os.ReadDir("/run/netns"); len(entries) > 0 {
		left = append(left, fmt.Sprintf("%d network namespaces in /run/netns", len(entries)))
	}
	if c := realNodeCgroups(); len(c) > 0 {
		left = append(left, "cgroups "+strings.Join(c, ", "))
	}
	state, err := readHostState(keptHostStateFile(clusterDir))
	for _, d := range append([]string{realStateDir}, realFixedDirs...) {
		if _, statErr := os.Lstat(d); statErr == nil && (state == nil || !slices.Contains(state.Existed, d)) {
			left = append(left, "path "+d)
		}
	}
	if err != nil {
		return append(left, "no record of the machine before the node started: "+err.Error())
	}
	for _, t := range []struct {
		name   string
		before []string
		now    []string
	}{{"iptables", state.IPTables, iptablesRules("iptables")}, {"ip6tables", state.IP6Tables, iptablesRules("ip6tables")}, {"nftables", state.NFTables, nftTables()}} {
		if added := subtract(t.now, t.before); len(added) > 0 {
			left = append(left, t.name+" added: "+strings.Join(added, "; "))
		}
		if removed := subtract(t.before, t.now); len(removed) > 0 {
			left = append(left, t.name+" removed: "+strings.Join(removed, "; "))
		}
	}
	for name, v := range state.Sysctls {
		if now, err := readSysctl(name); err == nil && now != v {
			left = append(left, fmt.Sprintf("sysctl %s is %s, was %s", name, now, v))
		}
	}
	return left
}

// stopComponent stops the named component of the cluster's pid file, if it runs.
func stopComponent(clusterDir, name string) {
	for _, e := range pidEntries(clusterDir) {
		if e.name == name {
			_ = e.stop()
		}
	}
}

// realNodeBinDir is the directory of the node's programs, as its start recorded it ("" when
// it did not get that far).
func realNodeBinDir() string {
	b, err := os.ReadFile(filepath.Join(realStateDir, "bin-dir"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// realNodeProcesses are the processes the node left: containerd's shims and the containers
// (their command line names the node's state directory, or they are in the kubelet's
// cgroups).
func realNodeProcesses() []int {
	self := os.Getpid()
	seen := map[int]bool{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(p))
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err == nil && pid != self && strings.Contains(string(cmdline), realStateDir) {
			seen[pid] = true
		}
	}
	for _, c := range realNodeCgroups() {
		b, _ := os.ReadFile(filepath.Join(c, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				seen[pid] = true
			}
		}
	}
	var pids []int
	for pid := range seen {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !slices.ContainsFunc(pids, func(pid int) bool { return syscall.Kill(pid, 0) == nil }) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// realNodeMounts are the mounts under the node's paths, deepest first.
func realNodeMounts() []string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mounts []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 2 {
			continue
		}
		m := strings.ReplaceAll(fields[1], `\040`, " ")
		for _, root := range []string{"/var/lib/kubelet", realStateDir, "/run/containerd", "/run/netns"} {
			if m == root || strings.HasPrefix(m, root+"/") {
				mounts = append(mounts, m)
				break
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	return mounts
}

// realNodeLinks are the node's bridge and the pods' veths, if any is left.
func realNodeLinks() []string {
	entries, _ := os.ReadDir("/sys/class/net")
	var links []string
	for _, e := range entries {
		if e.Name() == realBridge || strings.HasPrefix(e.Name(), "veth") {
			links = append(links, e.Name())
		}
	}
	return links
}

// realNodeCgroups are the kubelet's and containerd's cgroups in every hierarchy, deepest
// first.
func realNodeCgroups() []string {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		for _, top := range []string{"kubepods", "kubepods.slice", "k8s.io"} {
			start := filepath.Join(root, top)
			if _, err := os.Stat(start); err != nil {
				continue
			}
			_ = filepath.WalkDir(start, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

var iptablesCounters = regexp.MustCompile(`\[\d+:\d+\]`)

// iptablesRules is what <tool>-save prints, without comments and counters.
func iptablesRules(tool string) []string {
	out, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return nil
	}
	var rules []string
	for _, l := range strings.Split(string(out), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		rules = append(rules, iptablesCounters.ReplaceAllString(l, ""))
	}
	return rules
}

// nftTables lists the nftables tables ("table ip filter"); none where nft is missing.
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var tables []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			tables = append(tables, l)
		}
	}
	return tables
}

// cleanIPTables removes what kube-proxy leaves after its own clean-up: the KUBE- chains (the
// KUBE-FIREWALL chain it shares with the kubelet among them) and the jumps to them, and the
// nftables tables that were not there before and hold no rule.
func cleanIPTables(state *hostState) error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			out, err := exec.Command(tool+"-save", "-t", table).Output()
			if err != nil {
				continue
			}
			var chains []string
			for _, l := range strings.Split(string(out), "\n") {
				switch {
				case strings.HasPrefix(l, ":KUBE-"):
					chains = append(chains, strings.Fields(l[1:])[0])
				case strings.HasPrefix(l, "-A ") && strings.Contains(l, " -j KUBE-") && !strings.HasPrefix(l, "-A KUBE-"):
					args := append([]string{"-t", table, "-D"}, shellFields(strings.TrimPrefix(l, "-A "))...)
					errs = append(errs, run(tool, args...))
				}
			}
			for _, chain := range chains {
				_ = run(tool, "-t", table, "-F", chain)
			}
			for _, chain := range chains {
				errs = append(errs, run(tool, "-t", table, "-X", chain))
			}
		}
	}
	if state == nil {
		return errors.Join(errs...)
	}
	for _, table := range subtract(nftTables(), state.NFTables) {
		family, name, _ := strings.Cut(strings.TrimPrefix(table, "table "), " ")
		out, err := exec.Command("nft", "list", "table", family, name).Output()
		if err == nil && !nftHasRules(string(out)) {
			errs = append(errs, run("nft", "delete", "table", family, name))
		}
	}
	return errors.Join(errs...)
}

// nftHasRules reports whether a table, as `nft list table` prints it, holds a rule: a line
// that is not the table's or a chain's frame, its hook or its policy.
func nftHasRules(table string) bool {
	for _, l := range strings.Split(table, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "}" || strings.HasPrefix(l, "table ") || strings.HasPrefix(l, "chain ") ||
			strings.HasPrefix(l, "type ") || strings.HasPrefix(l, "policy ") {
			continue
		}
		return true
	}
	return false
}

// shellFields splits an iptables-save rule into arguments, keeping quoted comments whole.
func shellFields(s string) []string {
	var fields []string
	var b strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if b.Len() > 0 {
				fields = append(fields, b.String())
				b.Reset()
			}
		default:
			b.WriteRune(r)
		}
	}
	if b.Len() > 0 {
		fields = append(fields, b.String())
	}
	return fields
}

func readHostState(path string) (*hostState, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s hostState
	return &s, json.Unmarshal(b, &s)
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func readSysctl(name string) (string, error) {
	b, err := os.ReadFile(sysctlPath(name))
	return strings.TrimSpace(string(b)), err
}

func writeSysctl(name, value string) error {
	return os.WriteFile(sysctlPath(name), []byte(value), 0o644)
}

// subtract is what a holds that b does not, in a's order.
func subtract(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
