package leadership

import (
	"context"
	"net"
	"net/http"

	"k8s.io/klog/v2"
)

// WrapTransport makes every write of a client ask the fence first (rest.Config.Wrap). Reads
// pass: the informers may go on listing and watching, only writes can harm the next leader's
// work. The leader election's own client must not be wrapped: its renewals keep the fence
// open.
func (f *Fence) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &fencedTransport{fence: f, next: rt}
}

type fencedTransport struct {
	fence *Fence
	next  http.RoundTripper
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	if err := t.fence.Check(); err != nil {
		// A RoundTripper closes the body, even when it sends nothing.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		klog.FromContext(req.Context()).Info("Refused a write: this process may no longer lead", "method", req.Method,
			"path", req.URL.Path, "reason", err)
		return nil, err
	}
	return t.next.RoundTrip(req)
}

var _ http.RoundTripper = &fencedTransport{}

// Dial makes every connection that dial opens ask the fence before each write of bytes to
// the network (rest.Config.Dial of the writing clients). The transport's check (RoundTrip)
// comes before a request is built, framed and queued for its connection: a process stopped
// in between would, once woken, send a request its fence no longer allows. The connection's
// check comes just before the system call that sends the bytes, which leaves a stop only the
// few instructions between the two (the API server cannot fence a write to a pod by a Lease).
// A closed fence fails every write on these connections, reads' requests included: the
// process is stopping then. Before the first renewal they pass: the transport has refused
// every write, and the reads at start (discovery) must go.
func (f *Fence) Dial(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &fencedConn{Conn: conn, fence: f}, nil
	}
}

type fencedConn struct {
	net.Conn
	fence *Fence
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if err := c.fence.checkSend(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
