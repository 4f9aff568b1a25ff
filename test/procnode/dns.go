package procnode

import (
	"net"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// clusterDomain is the DNS domain of the cluster, as a cluster DNS serves it.
const clusterDomain = "cluster.local"

// resolver answers for names of the cluster: it returns the addresses of a name (fully
// qualified, lower case, no final dot) and whether the name exists.
type resolver func(name string) ([]netip.Addr, bool)

// serveDNS answers A queries over UDP on conn until it is closed: names of the cluster from
// resolve, NXDOMAIN for every other name (pods reach nothing outside the node).
func serveDNS(conn net.PacketConn, resolve resolver) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if reply := answer(buf[:n], resolve); reply != nil {
			_, _ = conn.WriteTo(reply, from)
		}
	}
}

// answer builds the reply to one query (nil when it cannot be parsed).
func answer(query []byte, resolve resolver) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	addrs, found := resolve(name)
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RCode: dnsmessage.RCodeSuccess}
	if !found {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		for _, a := range addrs {
			rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}
			if b.AResource(rr, dnsmessage.AResource{A: a.As4()}) != nil {
				return nil
			}
		}
	}
	reply, err := b.Finish()
	if err != nil {
		return nil
	}
	return reply
}

// splitClusterName splits <a>.<b>.svc.cluster.local into its labels before "svc" (nil for a
// name outside the cluster's service domain).
func splitClusterName(name string) []string {
	rest, ok := strings.CutSuffix(name, ".svc."+clusterDomain)
	if !ok {
		return nil
	}
	return strings.Split(rest, ".")
}
