package procnode

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// ClusterIP Services, as kube-proxy makes them reachable, without iptables: the whole Service
// range is local to the node's network namespace (network.go), where a TCP proxy listens on
// each Service's address and port and passes each connection on to one of the Service's ready
// endpoints (EndpointSlices) that are pods of this node. The API server's Service
// (default/kubernetes) has no endpoints on the local cluster (its API server runs with
// --endpoint-reconciler-type=none), so its connections go to the API server the node talks
// to, dialled from the machine's namespace (Options.APIServerAddress).
//
// Not done: UDP and SCTP ports, session affinity, traffic policies, NodePorts, external IPs and
// load balancers; a Service with no ready endpoint on this node closes its connections.

// serviceProxy runs the proxies of the cluster's Services.
type serviceProxy struct {
	n      *Node
	slices discoverylisters.EndpointSliceLister

	mu        sync.Mutex
	listeners map[string]*serviceListener // by ip:port
}

// serviceListener is one Service port's proxy.
type serviceListener struct {
	l                     net.Listener
	namespace, name, port string // the Service and its port's name
}

// sync makes a proxy for every TCP port of every Service with a cluster IP in the node's
// Service range, and closes those of ports gone.
func (p *serviceProxy) sync() {
	services, err := p.n.services.List(labels.Everything())
	if err != nil {
		return
	}
	want := map[string]*serviceListener{}
	for _, s := range services {
		ip, err := netip.ParseAddr(s.Spec.ClusterIP)
		if !hasClusterIP(s) || err != nil || !p.n.net.services.Contains(ip) {
			continue
		}
		for _, port := range s.Spec.Ports {
			if port.Protocol == corev1.ProtocolTCP || port.Protocol == "" {
				want[net.JoinHostPort(ip.String(), strconv.Itoa(int(port.Port)))] = &serviceListener{namespace: s.Namespace, name: s.Name, port: port.Name}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, sl := range p.listeners {
		if w, ok := want[addr]; !ok || w.namespace != sl.namespace || w.name != sl.name || w.port != sl.port {
			sl.l.Close()
			delete(p.listeners, addr)
		}
	}
	for addr, sl := range want {
		if _, ok := p.listeners[addr]; ok {
			continue
		}
		l, err := p.n.net.listen(addr)
		if err != nil {
			p.n.log("service %s/%s: listening on %s: %v", sl.namespace, sl.name, addr, err)
			continue
		}
		sl.l = l
		p.listeners[addr] = sl
		go p.serve(sl)
	}
}

// close closes every proxy.
func (p *serviceProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, sl := range p.listeners {
		sl.l.Close()
		delete(p.listeners, addr)
	}
}

func (p *serviceProxy) serve(sl *serviceListener) {
	for {
		c, err := sl.l.Accept()
		if err != nil {
			return
		}
		go p.forward(sl, c)
	}
}

// forward passes a connection on to an endpoint of its Service, both ways, until both sides
// have closed.
func (p *serviceProxy) forward(sl *serviceListener, c net.Conn) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	upstream, err := p.dial(ctx, sl)
	cancel()
	if err != nil {
		p.n.log("service %s/%s: %v", sl.namespace, sl.name, err)
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	pipe := func(to, from net.Conn) {
		_, _ = io.Copy(to, from)
		if tc, ok := to.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // pass the end of one direction on; the other goes on
		}
		done <- struct{}{}
	}
	go pipe(upstream, c)
	go pipe(c, upstream)
	<-done
	<-done
}

// dial connects to an endpoint of the Service: the API server for default/kubernetes, else a
// ready endpoint on this node's pod network, picked at random.
func (p *serviceProxy) dial(ctx context.Context, sl *serviceListener) (net.Conn, error) {
	if sl.namespace == "default" && sl.name == "kubernetes" && p.n.opts.APIServerAddress != "" {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", p.n.opts.APIServerAddress)
	}
	endpoints := p.endpoints(sl)
	if len(endpoints) == 0 {
		return nil, errors.New("no ready endpoint on this node for port " + strconv.Quote(sl.port))
	}
	return p.n.net.dialContext(ctx, "tcp", endpoints[rand.IntN(len(endpoints))])
}

// endpoints lists the ready endpoints (ip:port) of a Service's port that are in the node's
// pod range.
func (p *serviceProxy) endpoints(sl *serviceListener) []string {
	slices, err := p.slices.EndpointSlices(sl.namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: sl.name}))
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port := int32(0)
		for _, sp := range s.Ports {
			if ptrValue(sp.Name) == sl.port && (sp.Protocol == nil || *sp.Protocol == corev1.ProtocolTCP) && sp.Port != nil {
				port = *sp.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil && p.n.net.prefix.Contains(ip) {
					out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
				}
			}
		}
	}
	return out
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
