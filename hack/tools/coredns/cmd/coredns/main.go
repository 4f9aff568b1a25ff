// Command coredns is CoreDNS with the plugins the local cluster's DNS needs (test/cluster,
// docs/testing.md "The real node"): kubernetes answers for Services and pods, as a cluster's
// DNS does; bind, ready, errors, log and cache serve it. Every other name is refused: the machine
// has no DNS beyond the cluster.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order in which the plugins handle a query, as CoreDNS's own list orders them.
func init() {
	dnsserver.Directives = []string{"bind", "ready", "errors", "log", "cache", "kubernetes"}
}

func main() { coremain.Run() }
