package procnode

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// network is the node's: a bridge inside a network namespace of its own (so that nothing of
// it is left on the machine when the node dies), and one namespace per pod, joined to the
// bridge by a veth pair, with an address from the node's range. Pods reach each other and
// the node's DNS server; nothing else, and nothing outside reaches them.
type network struct {
	prefix  netip.Prefix
	gateway netip.Addr
	// services is the range of the cluster's Service addresses: all of it is local to the
	// node's namespace (services.go).
	services netip.Prefix
	holder   *os.Process // holds the node's namespace

	mu   sync.Mutex
	used map[netip.Addr]bool
	last netip.Addr // the address handed out last; allocation goes on after it
}

// holdNamespace starts a holder process in a new network namespace and returns it.
func holdNamespace() (*os.Process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, holdArg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a namespace holder: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process, nil
}

func nsPath(p *os.Process) string { return fmt.Sprintf("/proc/%d/ns/net", p.Pid) }

// ip runs the ip command in a holder's network namespace.
func ip(holder *os.Process, args ...string) error {
	cmd := exec.Command("nsenter", append([]string{"--net=" + nsPath(holder), "ip"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func newNetwork(cidr, serviceCIDR string) (*network, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 28 {
		return nil, fmt.Errorf("pod range %q: want an IPv4 range of at least 16 addresses, such as 10.250.0.0/24", cidr)
	}
	services, err := netip.ParsePrefix(serviceCIDR)
	if err != nil || !services.Addr().Is4() {
		return nil, fmt.Errorf("service range %q: want an IPv4 range, such as 10.96.0.0/16", serviceCIDR)
	}
	prefix, services = prefix.Masked(), services.Masked()
	if prefix.Overlaps(services) {
		return nil, fmt.Errorf("the pod range %s overlaps the service range %s", prefix, services)
	}
	n := &network{prefix: prefix, gateway: prefix.Addr().Next(), services: services, used: map[netip.Addr]bool{}}
	if n.holder, err = holdNamespace(); err != nil {
		return nil, err
	}
	bridge := fmt.Sprintf("%s/%d", n.gateway, prefix.Bits())
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "br0", "type", "bridge"},
		{"addr", "add", bridge, "dev", "br0"},
		{"link", "set", "br0", "up"},
		// Every Service address is the node namespace's own, as kube-proxy makes them a
		// node's: pods reach them through their default route, and the node's proxies
		// listen on them (services.go).
		{"route", "add", "local", services.String(), "dev", "lo"},
	} {
		if err := ip(n.holder, args...); err != nil {
			n.close()
			return nil, err
		}
	}
	return n, nil
}

// close ends the node's namespace, and with it the bridge.
func (n *network) close() {
	if n.holder != nil {
		_ = n.holder.Kill()
	}
}

// attach gives a pod's namespace (its holder) an address and a veth pair on the bridge.
func (n *network) attach(holder *os.Process, id string) (netip.Addr, error) {
	addr, err := n.allocate()
	if err != nil {
		return addr, err
	}
	host := "vp" + id
	steps := []struct {
		in   *os.Process
		args []string
	}{
		{n.holder, []string{"link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(holder.Pid)}},
		{n.holder, []string{"link", "set", host, "master", "br0", "up"}},
		{holder, []string{"link", "set", "lo", "up"}},
		{holder, []string{"addr", "add", fmt.Sprintf("%s/%d", addr, n.prefix.Bits()), "dev", "eth0"}},
		{holder, []string{"link", "set", "eth0", "up"}},
		{holder, []string{"route", "add", "default", "via", n.gateway.String()}},
	}
	for _, s := range steps {
		if err := ip(s.in, s.args...); err != nil {
			n.release(addr)
			return addr, err
		}
	}
	return addr, nil
}

// allocate hands out the next free address after the last one, round the range, as a
// cluster's host-local IPAM does: an address freed a moment ago goes out again only once the
// rest of the range has. A pod's namespace outlives the kill of its holder while the kernel
// tears it down, and so does its veth on the bridge: an address handed on at once could be
// answered for by both pods, and cut the new one's connections (seen as a new controller
// replica losing the API server seconds after it started).
func (n *network) allocate() (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	first := n.gateway.Next()
	size := 1<<(32-n.prefix.Bits()) - 3 // less the network, gateway and broadcast addresses
	a := n.last
	for range size {
		if a = a.Next(); !a.IsValid() || a.Less(first) || !n.prefix.Contains(a.Next()) {
			a = first
		}
		if !n.used[a] {
			n.used[a], n.last = true, a
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("the pod range %s is full", n.prefix)
}

func (n *network) release(a netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.used, a)
}

// inNamespace runs f on an OS thread that has joined the node's namespace; sockets f opens
// live there. The thread returns to the machine's namespace afterwards. It must not end: a
// child started with a parent-death signal (every container) gets that signal when the
// thread that started it ends, and Go ends a thread whose goroutine exits locked.
func (n *network) inNamespace(f func() error) error {
	return inNetNS(nsPath(n.holder), f)
}

// inNetNS runs f on an OS thread that has joined the network namespace at path (see
// inNamespace).
func inNetNS(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		errc <- f()
		if unix.Setns(hostNetNS, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // back home: the thread may serve others again
		} // else the thread stays locked and ends with the goroutine (it is lost, not reused)
	}()
	return <-errc
}

// hostNetNS is the machine's network namespace, kept open from the start.
var hostNetNS = func() int {
	fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}()

// dial tells whether something listens at addr, from the node's namespace (a tcpSocket
// probe).
func (n *network) dial(ctx context.Context, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := n.dialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// dialContext connects to addr from the node's namespace: only a pod's address (or a
// Service's, the node's own) can be reached from there, and only those are dialled.
func (n *network) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !n.prefix.Contains(ip) && !n.services.Contains(ip) {
		return nil, fmt.Errorf("%s is not an address of the node's network %s", host, n.prefix)
	}
	var c net.Conn
	err = n.inNamespace(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listen opens a TCP listener at addr in the node's namespace.
func (n *network) listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := n.inNamespace(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}
