package procnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// forwarder connects port-forward streams to ports of a pod (kubectl port-forward).
type forwarder struct{ r *podRunner }

// PortForward connects stream to the port on the pod's loopback, in its network namespace,
// as a kubelet does (a server that listens on the pod's address or on all of them answers
// too), and copies both ways until both sides are done.
func (f forwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	f.r.mu.Lock()
	netns, serving := f.r.netns, f.r.serving
	f.r.mu.Unlock()
	if !serving {
		return fmt.Errorf("pod %s has no network (it has not started, or has ended)", f.r.key)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	var conn net.Conn
	err := inNetNS(netns, func() (err error) {
		d := net.Dialer{Timeout: 10 * time.Second}
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return fmt.Errorf("connecting to port %d in pod %s: %w", port, f.r.key, err)
	}
	defer conn.Close()
	fromPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(stream, conn)
		fromPod <- err
	}()
	if _, err := io.Copy(conn, stream); err == nil {
		_ = conn.(*net.TCPConn).CloseWrite() // the client is done sending; the answer may still come
	} else {
		return nil // the client went
	}
	select {
	case <-fromPod:
	case <-ctx.Done():
	}
	return nil
}
