package procnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Probes, as a kubelet runs them: tcpSocket, exec and httpGet; a startup probe first, then
// liveness and readiness, each from its initialDelaySeconds on, every periodSeconds, within
// timeoutSeconds, its result changed by successThreshold successes or failureThreshold
// failures in a row. A container is Ready when its readiness probe says so (at once when it
// has none, once started). tcpSocket and httpGet are dialled from the node's network
// namespace to the pod's address, as a kubelet dials from the host.
//
// The node restarts no container. A container that fails its liveness (or startup) probe is
// stopped as a kubelet stops it to restart it (SIGTERM, then SIGKILL after the probe's or the
// pod's termination grace period), and stays stopped: its status is Terminated with reason
// LivenessProbeFailed (or StartupProbeFailed) and a message that says so, and, unless the pod's
// restartPolicy is Never (where its exit code decides, as on a kubelet), the pod ends Failed,
// so that its owner (a ReplicaSet, a job) replaces it.

// The reasons of a container a probe stopped.
const (
	reasonLivenessFailed = "LivenessProbeFailed"
	reasonStartupFailed  = "StartupProbeFailed"
)

// probeResult is a container's probes' verdict so far.
type probeResult struct {
	started, ready bool
	// killedBy is set once a probe has stopped the container: the reason and a message.
	killedBy, killMessage string
}

// watchProbes runs the container's probes until it ends.
func (r *podRunner) watchProbes(ctx context.Context, c *container) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	if p := c.spec.StartupProbe; p != nil {
		if ok, msg := runProbe(ctx, c.started, p, startup, r.prober(c, p), func(bool) {}); !ok {
			if ctx.Err() == nil {
				r.killByProbe(c, p, reasonStartupFailed, "startup", msg)
			}
			return
		}
	}
	c.setProbe(func(s *probeResult) { s.started = true })
	if c.spec.ReadinessProbe == nil {
		c.setProbe(func(s *probeResult) { s.ready = true })
	} else {
		p := c.spec.ReadinessProbe
		go runProbe(ctx, c.started, p, readiness, r.prober(c, p), func(ok bool) { c.setProbe(func(s *probeResult) { s.ready = ok }) })
	}
	if p := c.spec.LivenessProbe; p != nil {
		if ok, msg := runProbe(ctx, c.started, p, liveness, r.prober(c, p), func(bool) {}); !ok && ctx.Err() == nil {
			r.killByProbe(c, p, reasonLivenessFailed, "liveness", msg)
		}
	}
	<-ctx.Done()
}

// probeKind is what a probe's verdict does.
type probeKind int

const (
	startup   probeKind = iota // its first verdict, success or failure, ends it
	liveness                   // a failure ends it
	readiness                  // it runs until the container ends
)

// probeSecond is the unit of a probe's delay and period: a second (shorter in tests).
var probeSecond = time.Second

// prober runs a probe of a container once.
func (r *podRunner) prober(c *container, p *corev1.Probe) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) { return r.probeOnce(ctx, c, p) }
}

// runProbe probes (once) from the probe's initial delay after started on, every period, and
// calls set with each change of its result: successThreshold successes or failureThreshold
// failures in a row (it starts as a failure). It returns as its kind says: true for a
// success, false with the last failure's message; or false when ctx ends.
func runProbe(ctx context.Context, started time.Time, p *corev1.Probe, kind probeKind, once func(context.Context) (bool, string), set func(bool)) (bool, string) {
	period := time.Duration(max(p.PeriodSeconds, 1)) * probeSecond
	successes, failures := max(p.SuccessThreshold, 1), max(p.FailureThreshold, 1)
	if wait := time.Until(started.Add(time.Duration(p.InitialDelaySeconds) * probeSecond)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false, ""
		}
	}
	result, lastOK, run := false, false, int32(0)
	for {
		ok, msg := once(ctx)
		if ctx.Err() != nil {
			return false, ""
		}
		if ok == lastOK {
			run++
		} else {
			lastOK, run = ok, 1
		}
		if ok && run >= successes && !result {
			result = true
			set(true)
			if kind == startup {
				return true, ""
			}
		}
		if !ok && run >= failures {
			if result {
				result = false
				set(false)
			}
			if kind != readiness {
				return false, msg
			}
		}
		select {
		case <-time.After(period):
		case <-ctx.Done():
			return false, ""
		}
	}
}

// killByProbe stops a container whose liveness or startup probe failed, and says why.
func (r *podRunner) killByProbe(c *container, p *corev1.Probe, reason, kind, msg string) {
	grace := ptr.Deref(r.pod.Spec.TerminationGracePeriodSeconds, 30)
	if p.TerminationGracePeriodSeconds != nil {
		grace = *p.TerminationGracePeriodSeconds
	}
	message := fmt.Sprintf("Container %s failed %s probe %d times in a row (%s); the process node does not restart containers, so it was stopped for good",
		c.spec.Name, kind, max(p.FailureThreshold, 1), msg)
	r.n.log("pod %s: %s", r.key, message)
	c.setProbe(func(s *probeResult) { s.ready, s.killedBy, s.killMessage = false, reason, message })
	r.stop([]*container{c}, time.Duration(grace)*time.Second)
}

// probeOnce runs a probe once: whether it passed, and why not.
func (r *podRunner) probeOnce(ctx context.Context, c *container, p *corev1.Probe) (bool, string) {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	switch {
	case p.TCPSocket != nil:
		port, err := probePort(c.spec, p.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		addr := net.JoinHostPort(r.ip.String(), strconv.Itoa(port))
		if !r.n.net.dial(ctx, addr, timeout) {
			return false, "dial tcp " + addr + ": no answer"
		}
		return true, ""
	case p.HTTPGet != nil:
		return r.httpProbe(ctx, c, p.HTTPGet, timeout)
	case p.Exec != nil:
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		args := append([]string{"-t", strconv.Itoa(c.cmd.Process.Pid), "-m", "-u", "-n", "-p"}, c.userArgs()...)
		cmd := exec.CommandContext(pctx, "nsenter", append(append(args, "--"), p.Exec.Command...)...)
		cmd.Env = c.env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return false, fmt.Sprintf("command %q: %v: %s", strings.Join(p.Exec.Command, " "), err, strings.TrimSpace(string(out)))
		}
		return true, ""
	case p.GRPC != nil:
		return false, "gRPC probes are not supported by the process node"
	}
	return true, ""
}

// probePort is a probe's port: a number, or the name of one of the container's ports.
func probePort(c *corev1.Container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
}

// httpProbe GETs the probe's URL as a kubelet does: success is a status from 200 to 399;
// redirects are followed on the same host, and one to another host counts as a success.
func (r *podRunner) httpProbe(ctx context.Context, c *container, g *corev1.HTTPGetAction, timeout time.Duration) (bool, string) {
	port, err := probePort(c.spec, g.Port)
	if err != nil {
		return false, err.Error()
	}
	host := g.Host
	if host == "" {
		host = r.ip.String()
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path))
	if err != nil {
		return false, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Set(h.Name, h.Value)
	}
	client := &http.Client{
		Transport: &http.Transport{DialContext: r.n.net.dialContext, DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // as a kubelet: the probe checks liveness, not identity
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 || req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 10<<10))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return false, fmt.Sprintf("HTTP probe failed with statuscode: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return true, ""
}

// setProbe changes the container's probe results.
func (c *container) setProbe(f func(*probeResult)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.probes)
}

// probeResults are the container's probe results so far.
func (c *container) probeResults() probeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probes
}
