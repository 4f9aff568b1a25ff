package leadership

import (
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
