package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// Short lease timings keep the test fast; the renew deadline leaves a loaded machine 2 s of
// slack between renewals (every second) before a healthy leader would stop.
var leaseFlags = []string{"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}

// TestPausedLeaderWritesNothingAfterWaking (issue 13): two controllers elect a leader; the
// leader is stopped (SIGSTOP, as a long GC pause or a frozen VM would) while its jobs restart
// replicas, until the other holds the Lease; then it is woken. From waking on it sends no
// write (each controller reaches the API server through a proxy of the test that sees every
// request), it exits, and every restart is counted exactly once.
func TestPausedLeaderWritesNothingAfterWaking(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	// The suite's controller would run these jobs too.
	if !stopController() {
		t.Fatal("the suite's controller did not stop on SIGTERM")
	}
	t.Cleanup(func() {
		if err := startController(); err != nil {
			t.Errorf("starting the suite's controller again: %v", err)
		}
	})
	lease := "leader-" + ns

	old := startCandidate(t, "old", ns, lease)
	waitFor(t, "the first controller to lead", 30*time.Second, func(ctx context.Context) (bool, error) {
		return old.holds(leaseHolder(ctx, lease)) && runsJobs(old.base), nil
	})
	standby := startCandidate(t, "new", ns, lease)
	waitFor(t, "the second controller to serve", 30*time.Second, func(context.Context) (bool, error) {
		return httpGet(standby.base+"/healthz") == nil, nil
	})

	// Jobs whose replica fails every 2 s and is restarted 4 times, then fails the job: the
	// restarts go on across the pause, the takeover and the waking.
	const jobs, limit = 20, 4
	for i := range jobs {
		r := replica("worker", "trainer")
		exits(&r, 1, "2s")
		r.RestartPolicy = &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](limit)}
		createJob(t, ns, &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("leader-%02d", i)},
			Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}, CleanUpPolicy: batch.CleanUpNone}})
	}
	waitFor(t, "the leader's first restarts", jobTimeout, func(ctx context.Context) (bool, error) {
		return restartsSoFar(ctx, t, ns) >= jobs/2, nil
	})

	if err := old.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitFor(t, "the second controller to take the Lease", 30*time.Second, func(ctx context.Context) (bool, error) {
		return standby.holds(leaseHolder(ctx, lease)), nil
	})
	woken := time.Now()
	if err := old.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("the leader was stopped for %v", woken.Sub(stopped).Round(time.Millisecond))

	select {
	case <-old.Done:
	case <-time.After(15 * time.Second):
		t.Fatalf("the woken leader did not exit; its log is %s", old.log)
	}
	if code := old.Cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("the woken leader exited with %d, want 1 (as on a lost Lease); its log is %s", code, old.log)
	}
	if log, _ := os.ReadFile(old.log); !strings.Contains(string(log), "past the renew deadline") {
		t.Errorf("the woken leader's log does not say why it stopped; see %s", old.log)
	}

	waitFor(t, "every job failed after its restarts", 2*jobTimeout, func(ctx context.Context) (bool, error) {
		list, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, j := range list.Items {
			if j.Status.Phase != batch.JobFailed {
				return false, nil
			}
		}
		return len(list.Items) == jobs, nil
	})

	before, after := old.proxy.writes(woken)
	if len(after) > 0 {
		t.Errorf("the old leader wrote %d times after it woke:\n%s", len(after), strings.Join(after, "\n"))
	}
	if len(before) == 0 {
		t.Error("the old leader wrote nothing before it was stopped: the test did not exercise a takeover")
	}
	if standby.proxy.podWrites().creates == 0 {
		t.Error("the new leader created no pod: the test did not exercise a takeover")
	}
	list, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Items {
		task := j.Status.Tasks[0]
		if r := task.Replicas[0]; r.RestartCount != limit || task.RestartCount != limit || r.Phase != batch.ReplicaFailed {
			t.Errorf("%s: replica restarted %d times (task %d), phase %s; want exactly %d and Failed",
				j.Name, r.RestartCount, task.RestartCount, r.Phase, limit)
		}
	}
	// Every pod the two controllers made: one per replica, then one per restart.
	pods := old.proxy.podWrites()
	pods.add(standby.proxy.podWrites())
	if pods.creates != jobs*(limit+1) || pods.deletes != jobs*limit {
		t.Errorf("the controllers created %d pods and deleted %d; want %d and %d",
			pods.creates, pods.deletes, jobs*(limit+1), jobs*limit)
	}
	if t.Failed() {
		t.Logf("controller logs: %s, %s", old.log, standby.log)
	}
}

// candidate is a controller process of the leader election test, reaching the API server
// through its own recording proxy.
type candidate struct {
	*harness.Process
	identity string // its holder identity in the Lease, but the random part: <host>_<pid>
	base     string // URL of /metrics, /healthz and /readyz
	log      string
	proxy    *recorder
}

// startCandidate starts a controller that runs the jobs of ns, elected with the Lease
// t9k-system/lease. It is killed when the test ends.
func startCandidate(t *testing.T, name, ns, lease string) *candidate {
	t.Helper()
	proxy := newRecorder(t)
	kubeconfig, err := clientcmd.LoadFromFile(controller.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kubeconfig.Clusters {
		c.Server, c.CertificateAuthority, c.CertificateAuthorityData, c.InsecureSkipTLSVerify = proxy.url, "", proxy.caPEM, false
	}
	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, kubeconfigPath); err != nil {
		t.Fatal(err)
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// Beside the suite's controller log, kept when the run fails.
	logPath := filepath.Join(filepath.Dir(controller.log), fmt.Sprintf("%s-%s.log", lease, name))
	// No progress endpoint: the candidates are about the Lease (the suite's controller serves
	// the endpoint).
	args := append([]string{"--kubeconfig", kubeconfigPath, "--namespace", ns, "--leader-elect-namespace", "t9k-system",
		"--leader-elect-name", lease, "--bind-address", addr, "--progress-bind-address=0", "-v=2"}, leaseFlags...)
	proc, err := harness.Start(controller.binary, args, harness.Options{Log: logPath})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	c := &candidate{Process: proc, identity: fmt.Sprintf("%s_%d", host, proc.Pid()), base: "http://" + addr, log: logPath, proxy: proxy}
	t.Cleanup(proc.Kill) // a stopped process dies of SIGKILL too
	return c
}

// holds reports whether holder, a Lease's holder identity, is this candidate's.
func (c *candidate) holds(holder string) bool { return strings.HasPrefix(holder, c.identity+"_") }

func leaseHolder(ctx context.Context, name string) string {
	l, err := env.kube.CoordinationV1().Leases("t9k-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// restartsSoFar sums the restarts the jobs of ns report.
func restartsSoFar(ctx context.Context, t *testing.T, ns string) int {
	list, err := env.jobs.BatchV1beta1().GenericJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing jobs: %v", err)
		return 0
	}
	n := 0
	for _, j := range list.Items {
		for _, task := range j.Status.Tasks {
			n += int(task.RestartCount)
		}
	}
	return n
}

// recorder is a reverse proxy to the API server that notes every request it passes: when it
// arrived, what it asked and how it was answered. It sees what a controller sent, whatever
// the controller believes it did.
type recorder struct {
	url   string
	caPEM []byte // its serving certificate: clients send their credentials only over TLS

	mu       sync.Mutex
	requests []*recorded
}

type recorded struct {
	at           time.Time
	method, path string
	code         int // 0 until answered
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	target, err := url.Parse(env.config.Host)
	if err != nil {
		t.Fatal(err)
	}
	// Only the server's certificate is checked here; each controller's own token goes
	// through in its requests.
	upstream, err := rest.TransportFor(&rest.Config{Host: env.config.Host, TLSClientConfig: rest.TLSClientConfig{
		CAFile: env.config.CAFile, CAData: env.config.CAData, Insecure: env.config.Insecure}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     upstream,
		FlushInterval: -1, // watches stream
	}
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := &recorded{at: time.Now(), method: r.Method, path: r.URL.Path}
		rec.mu.Lock()
		rec.requests = append(rec.requests, req)
		rec.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w}
		proxy.ServeHTTP(sw, r)
		rec.mu.Lock()
		req.code = sw.code
		rec.mu.Unlock()
	}))
	server.StartTLS()
	t.Cleanup(server.Close)
	rec.url = server.URL
	rec.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	return rec
}

// writes lists the non-read requests that arrived before and after t.
func (r *recorder) writes(t time.Time) (before, after []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, req := range r.requests {
		if req.method == http.MethodGet {
			continue
		}
		s := fmt.Sprintf("%s %s %s -> %d", req.at.Format("15:04:05.000"), req.method, req.path, req.code)
		if req.at.Before(t) {
			before = append(before, s)
		} else {
			after = append(after, s)
		}
	}
	return before, after
}

type podWrites struct{ creates, deletes int }

func (p *podWrites) add(q podWrites) { p.creates, p.deletes = p.creates+q.creates, p.deletes+q.deletes }

// podWrites counts the pod creations and deletions the API server carried out.
func (r *recorder) podWrites() podWrites {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p podWrites
	for _, req := range r.requests {
		ok := req.code >= 200 && req.code < 300
		switch {
		case ok && req.method == http.MethodPost && strings.HasSuffix(req.path, "/pods"):
			p.creates++
		case ok && req.method == http.MethodDelete && strings.Contains(req.path, "/pods/"):
			p.deletes++
		}
	}
	return p
}

// statusWriter notes the status code of a response; Unwrap lets the proxy flush watches.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
