package procnode

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// The node serves the part of the kubelet's API that `kubectl logs`, `exec`, `attach` and
// `port-forward` reach through the API server, for the pods it runs:
//
//	GET      /containerLogs/{namespace}/{pod}/{container}   follow, tailLines, sinceSeconds, sinceTime, timestamps, limitBytes, previous, stream
//	GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}    command, input, output, error, tty
//	GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}  input, output, error, tty
//	GET|POST /portForward/{namespace}/{pod}[/{uid}]         port
//	GET      /healthz
//
// The streaming protocols (SPDY, and WebSocket; the API server turns kubectl's WebSockets
// into SPDY towards a kubelet that does not declare them) are those of
// k8s.io/cri-streaming, the kubelet's own; the node supplies "run this in that container"
// (exec.go) and "connect to that port there" (portforward.go).
//
// It runs commands as root, so it serves only on loopback, over TLS, and only to clients
// with a certificate of the client CA: the API server's kubelet client certificate.

const (
	// streamIdleTimeout ends a stream no data went through for this long (the kubelet's
	// streamingConnectionIdleTimeout).
	streamIdleTimeout = 4 * time.Hour
	// streamCreationTimeout is how long a client has to create its streams.
	streamCreationTimeout = remotecommand.DefaultStreamCreationTimeout
)

// listenAPI opens the kubelet API's listener on 127.0.0.1 and returns it with its TLS
// configuration: a client certificate of ClientCAFile required, and the serving certificate
// of TLSCertFile and TLSKeyFile (one of the node's own making without them).
func listenAPI(opts Options) (net.Listener, *tls.Config, error) {
	caPEM, err := os.ReadFile(opts.ClientCAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("client CA: %w", err)
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("client CA %s: no certificate", opts.ClientCAFile)
	}
	var cert tls.Certificate
	if opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		if cert, err = tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSKeyFile); err != nil {
			return nil, nil, fmt.Errorf("serving certificate: %w", err)
		}
	} else if cert, err = selfSignedCert(); err != nil {
		return nil, nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, nil, fmt.Errorf("the kubelet API's port: %w", err)
	}
	return l, &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"}, // SPDY upgrades need HTTP/1.1
	}, nil
}

// selfSignedCert is a serving certificate for 127.0.0.1 the node makes itself, when it is not
// given one: an API server that verifies kubelets' certificates refuses it.
func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "t9k-procnode"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// serveAPI serves the kubelet API on l until ctx ends.
func (n *Node) serveAPI(ctx context.Context, l net.Listener, config *tls.Config) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", n.serveLogs)
	for _, path := range []string{"/exec/{namespace}/{pod}/{container}", "/exec/{namespace}/{pod}/{uid}/{container}"} {
		mux.HandleFunc(path, n.serveExec)
	}
	for _, path := range []string{"/attach/{namespace}/{pod}/{container}", "/attach/{namespace}/{pod}/{uid}/{container}"} {
		mux.HandleFunc(path, n.serveAttach)
	}
	for _, path := range []string{"/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"} {
		mux.HandleFunc(path, n.servePortForward)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog: log.New(n.opts.Log, "procnode kubelet API: ", log.Ltime)} // refused clients too
	go func() {
		<-ctx.Done()
		_ = srv.Close() // hijacked streams end with their containers, or the node
	}()
	if err := srv.Serve(tls.NewListener(l, config)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		n.log("kubelet API: %v", err)
	}
}

// apiError is an answer that is not a stream: a status and a message, as a kubelet gives
// them.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &apiError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var e *apiError
	if errors.As(err, &e) {
		status = e.status
	}
	http.Error(w, err.Error(), status)
}

// runnerOf is the runner of a pod of this node, by namespace and name (and UID, when given).
func (n *Node) runnerOf(namespace, pod, uid string) (*podRunner, error) {
	n.mu.Lock()
	r, ok := n.pods[namespace+"/"+pod]
	n.mu.Unlock()
	if !ok || (uid != "" && string(r.uid) != uid) {
		return nil, notFound("pod %s/%s does not exist on node %s", namespace, pod, n.opts.Name)
	}
	return r, nil
}

// containerOf is a container of a pod of this node that has started.
func (n *Node) containerOf(namespace, pod, uid, name string) (*container, error) {
	r, err := n.runnerOf(namespace, pod, uid)
	if err != nil {
		return nil, err
	}
	if specOf(r.pod, name) == nil {
		return nil, notFound("container %q not found in pod %q", name, pod)
	}
	r.mu.Lock()
	c, ok := r.containers[name]
	r.mu.Unlock()
	if !ok {
		return nil, badRequest("container %q in pod %q is waiting to start: ContainerCreating", name, pod)
	}
	return c, nil
}

func specOf(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// serveLogs answers GET /containerLogs: the container's output as kubectl logs asks for it.
func (n *Node) serveLogs(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	opts := logOptions{follow: boolParam(q.Get("follow")), timestamps: boolParam(q.Get("timestamps")), stdout: true, stderr: true}
	var err error
	intParam := func(name string) *int64 {
		v := q.Get(name)
		if v == "" || err != nil {
			return nil
		}
		i, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || i < 0 {
			err = badRequest("%s=%q: want a number of at least 0", name, v)
			return nil
		}
		return &i
	}
	opts.tailLines, opts.limitBytes = intParam("tailLines"), intParam("limitBytes")
	if tail := q.Get("tail"); tail != "" && tail != "all" && opts.tailLines == nil { // the old name
		q.Set("tailLines", tail)
		opts.tailLines = intParam("tailLines")
	}
	if s := intParam("sinceSeconds"); s != nil {
		opts.since = time.Now().Add(-time.Duration(*s) * time.Second)
	}
	if s := q.Get("sinceTime"); s != "" && err == nil {
		if opts.since, err = time.Parse(time.RFC3339, s); err != nil {
			err = badRequest("sinceTime=%q: want an RFC 3339 time", s)
		}
	}
	switch stream := q.Get("stream"); stream {
	case "", string(corev1.LogStreamAll):
	case string(corev1.LogStreamStdout):
		opts.stderr = false
	case string(corev1.LogStreamStderr):
		opts.stdout = false
	default:
		err = badRequest("stream=%q: want All, Stdout or Stderr", stream)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	pod, name := req.PathValue("pod"), req.PathValue("container")
	c, err := n.containerOf(req.PathValue("namespace"), pod, "", name)
	if err != nil {
		writeError(w, err)
		return
	}
	if boolParam(q.Get("previous")) {
		// The node restarts no container (pods here have restartPolicy Never: the
		// controller makes a new pod), so there is never a previous one.
		writeError(w, badRequest("previous terminated container %q in pod %q not found: the process node does not restart containers", name, pod))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	flush := func() { _ = http.NewResponseController(w).Flush() }
	if err := c.out.read(req.Context(), opts, w, flush); err != nil {
		n.log("logs of %s/%s/%s: %v", req.PathValue("namespace"), pod, name, err)
	}
}

func boolParam(v string) bool {
	b, _ := strconv.ParseBool(v)
	return b
}

// serveExec answers /exec: a command in a container, streamed.
func (n *Node) serveExec(w http.ResponseWriter, req *http.Request) {
	c, opts, ok := n.streamRequest(w, req)
	if !ok {
		return
	}
	remotecommand.ServeExec(w, req, execer{c}, req.PathValue("pod"), req.PathValue("uid"), req.PathValue("container"),
		req.URL.Query()["command"], opts, streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// serveAttach answers /attach: the container's own stdin and output, streamed.
func (n *Node) serveAttach(w http.ResponseWriter, req *http.Request) {
	c, opts, ok := n.streamRequest(w, req)
	if !ok {
		return
	}
	remotecommand.ServeAttach(w, req, attacher{c}, req.PathValue("pod"), req.PathValue("uid"), req.PathValue("container"),
		opts, streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// streamRequest checks an exec or attach request: its method, streams and container.
func (n *Node) streamRequest(w http.ResponseWriter, req *http.Request) (*container, *remotecommand.Options, bool) {
	if req.Method != http.MethodGet && req.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil, nil, false
	}
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		writeError(w, badRequest("%v", err))
		return nil, nil, false
	}
	c, err := n.containerOf(req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("uid"), req.PathValue("container"))
	if err != nil {
		writeError(w, err)
		return nil, nil, false
	}
	return c, opts, true
}

// servePortForward answers /portForward: connections to ports of the pod, in its network
// namespace.
func (n *Node) servePortForward(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	r, err := n.runnerOf(req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("uid"))
	if err != nil {
		writeError(w, err)
		return
	}
	// WebSocket clients name their ports in the request (SPDY ones per stream).
	opts, err := portforward.NewV4Options(req)
	if err != nil {
		writeError(w, badRequest("%v", err))
		return
	}
	portforward.ServePortForward(w, req, forwarder{r}, r.key, string(r.uid), opts, streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}
