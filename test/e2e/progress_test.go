package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/progress"
)

// Progress reports (docs/progress.md): a real PyTorch run reports its steps through the helper
// of examples/progress, and forged reports are refused and change nothing.

// progressSteps and progressStepTime make the real run last long enough for several of its
// status writes to be seen: 20 steps of a second.
const (
	progressSteps    = 20
	progressStepTime = time.Second
)

// pytorchWithProgress is examples/pytorch's job with workers replicas that all-reduce
// progressSteps times and report every step (the helper's interval set to a second), its
// script and the helper in ns as `kubectl apply -k examples/pytorch` puts them.
func pytorchWithProgress(t *testing.T, ns string, workers int32) *batch.GenericJob {
	t.Helper()
	if out, err := kubectl("apply", "-n", ns, "-k", filepath.Join(repoRoot, "examples", "progress")); err != nil {
		t.Fatalf("kubectl apply -k examples/progress: %v: %s", err, out)
	}
	allreduceConfigMap(t, ns, "pytorch-allreduce-script", "pytorch")
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "pytorch", "allreduce.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job := &batch.GenericJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	r := &job.Spec.ReplicaSpecs[0]
	r.Replicas = ptr.To(workers)
	c := &r.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "STEPS", Value: strconv.Itoa(progressSteps)},
		corev1.EnvVar{Name: "STEP_SECONDS", Value: fmt.Sprint(progressStepTime.Seconds())},
		corev1.EnvVar{Name: "T9K_PROGRESS_INTERVAL", Value: "1"})
	return job
}

// progressSeen is a change of a job's status.progress, as a watch saw it.
type progressSeen struct {
	at       time.Time
	phase    batch.JobPhase
	progress *batch.JobProgress
}

// TestProgressReportedByARealRun: examples/pytorch with 2 workers (gloo), each reporting its
// steps through the helper: status.progress and the Progress column follow the steps, one
// line per pod by its UID while the job runs, at most one status write per job every 5 s,
// and the job ends Succeeded at 100%, step 20 of 20, with the reported metric.
func TestProgressReportedByARealRun(t *testing.T) {
	parallel(t, realNode.all())
	ns := namespace(t)
	needRealNode(t, ns, trainingImage)
	job := pytorchWithProgress(t, ns, 2)
	before := controllerMetrics(t)

	events := watchGenericJob(t, ns, job.Name)
	createJob(t, ns, job)

	var seen []progressSeen
	var last *batch.GenericJob
	column, lines := "", false
	for ev := range events {
		j, ok := ev.Object.(*batch.GenericJob)
		if !ok {
			continue
		}
		last = j
		p := j.Status.Progress
		if p != nil && (len(seen) == 0 || !equality.Semantic.DeepEqual(seen[len(seen)-1].progress, p)) {
			seen = append(seen, progressSeen{at: time.Now(), phase: j.Status.Phase, progress: p.DeepCopy()})
		}
		if p != nil && p.ProgressPercentage != nil && j.Status.Phase == batch.JobRunning {
			if column == "" && *p.ProgressPercentage > 0 && *p.ProgressPercentage < 100 {
				column = progressColumn(t, ns, job.Name)
			}
			if !lines && len(p.Replicas) == 2 {
				lines = true
				checkLines(t, ns, p.Replicas)
			}
		}
		if j.Status.Phase == batch.JobFailed || (j.Status.Phase == batch.JobSucceeded && p != nil && p.ProgressPercentage != nil && *p.ProgressPercentage == 100) {
			break
		}
	}
	if last == nil || last.Status.Phase != batch.JobSucceeded {
		t.Fatalf("the job did not end Succeeded at 100%% within %s: %+v", realTimeout, last)
	}
	p := last.Status.Progress
	t.Logf("status.progress at the end: %s", asJSON(p))
	pods := map[string]bool{job.Name + "-worker-0": true, job.Name + "-worker-1": true}
	if *p.ProgressPercentage != 100 || p.Step == nil || *p.Step != progressSteps || p.TotalSteps == nil || *p.TotalSteps != progressSteps ||
		p.EstimatedRemainingSeconds == nil || *p.EstimatedRemainingSeconds != 0 || p.LastUpdatedTime == nil || !pods[p.Replica] ||
		len(p.Metrics) != 1 || p.Metrics[0] != (batch.ProgressMetric{Name: "sum", Value: "3"}) || len(p.Replicas) != 0 {
		t.Errorf("the finished job's progress: %s; want 100%%, step %d of %d, no time left, sum 3, a worker named, no lines", asJSON(p), progressSteps, progressSteps)
	}

	// What was seen: the percentage and step never went back, and moved through the run.
	var percentages []int32
	for i, s := range seen {
		if s.progress.ProgressPercentage == nil {
			continue
		}
		percentages = append(percentages, *s.progress.ProgressPercentage)
		if i > 0 && seen[i-1].progress.ProgressPercentage != nil && *s.progress.ProgressPercentage < *seen[i-1].progress.ProgressPercentage {
			t.Errorf("the percentage went back: %v", percentages)
		}
	}
	if len(percentages) < 3 {
		t.Errorf("the progress seen: %v; want it to follow the run (3 changes at least)", percentages)
	}
	if !lines {
		t.Error("the status never had a line for each of the 2 pods while the job ran")
	}
	if column == "" {
		t.Error("kubectl get never showed a Progress while the job ran")
	}

	// The cost: status writes of the progress against the reports the controller took.
	after := controllerMetrics(t)
	delta := func(series string) float64 {
		a, _ := after.Value(series)
		b, _ := before.Value(series)
		return a - b
	}
	accepted := delta(`t9k_progress_reports_total{code="200"}`)
	took := delta("t9k_progress_report_duration_seconds_sum") / max(1, delta("t9k_progress_report_duration_seconds_count"))
	span := seen[len(seen)-1].at.Sub(seen[0].at)
	writes := len(seen) // each change of status.progress is one of the endpoint's writes
	t.Logf("%d reports taken (%.2f ms each on average), %d status writes of the progress over %.1fs: %.1f a minute; the Progress column read %q",
		int(accepted), took*1000, writes, span.Seconds(), float64(writes-1)/span.Minutes(), column)
	if limit := int(span/progress.DefaultWriteInterval) + 2; writes > limit {
		t.Errorf("%d status writes of the progress over %s, want at most one every %s (%d)", writes, span, progress.DefaultWriteInterval, limit)
	}
	if accepted < float64(writes) {
		t.Errorf("%v reports taken, fewer than the %d writes", accepted, writes)
	}
	for _, pod := range []string{job.Name + "-worker-0", job.Name + "-worker-1"} {
		if log := containerLogs(ns, pod, "worker"); strings.Contains(log, "report not sent") || !strings.Contains(log, "all-reduce sum 3, want 3") {
			t.Errorf("%s's log:\n%s", pod, log)
		}
	}
}

// progressColumn is the Progress column of `kubectl get genericjob`, checked to be a
// percentage.
func progressColumn(t *testing.T, ns, name string) string {
	t.Helper()
	out, err := kubectl("get", "genericjob", "-n", ns, name)
	if err != nil {
		t.Fatalf("kubectl get: %v: %s", err, out)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 {
		t.Fatalf("kubectl get: %s", out)
	}
	header, row := strings.Fields(rows[0]), strings.Fields(rows[1])
	for i, h := range header {
		if h == "PROGRESS" && i < len(row) {
			if n, err := strconv.Atoi(row[i]); err != nil || n < 0 || n > 100 {
				t.Errorf("the Progress column: %q\n%s", row[i], out)
			}
			return row[i]
		}
	}
	t.Errorf("kubectl get shows no Progress column:\n%s", out)
	return "?"
}

// checkLines: the status's lines are the job's pods, by UID.
func checkLines(t *testing.T, ns string, lines []batch.ReplicaProgress) {
	t.Helper()
	pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[types.UID]bool{}
	for _, p := range pods.Items {
		uids[p.UID] = true
	}
	for _, l := range lines {
		if !uids[l.UID] || l.ProgressPercentage == nil {
			t.Errorf("the line %+v is of no pod of the job, or has no percentage", l)
		}
	}
}

func asJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// TestProgressRefusesForged: reports to a job's endpoint with another job's pod's token, with
// a token for this job bound to another job's pod, with no token or one that is none, with a
// bad body, and with the token of a pod that was deleted, are refused, each with its code,
// and change nothing; the job's own pod's token, minted as the kubelet would (TokenRequest
// bound to the pod, for the job's audience), is taken. The pods are on the fake nodes: the
// tokens are minted here, and the reports sent from here, to the URL and with the CA the
// controller gave the pods.
func TestProgressRefusesForged(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		r := replica("worker", "busybox")
		exits(&r, 0, "10m")
		createJob(t, ns, &batch.GenericJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{r}}})
	}
	waitJob(t, ns, "a", "Running", inPhase(batch.JobRunning))
	waitJob(t, ns, "b", "Running", inPhase(batch.JobRunning))
	podA, podB := getPod(t, ns, "a-worker-0"), getPod(t, ns, "b-worker-0")
	jobA := progress.JobRef{Resource: "genericjobs", Namespace: ns, Name: "a"}
	jobB := progress.JobRef{Resource: "genericjobs", Namespace: ns, Name: "b"}

	// What the pod was told: the URL of its job's endpoint and the CA, in the job's ConfigMap.
	to := reporterOf(t, podA)
	if to.url != controller.progress+progress.Path(jobA) {
		t.Fatalf("a-worker-0 reports to %q, want %q", to.url, controller.progress+progress.Path(jobA))
	}
	url, post, report := to.url, to.post, progressReport

	tokenA := mintToken(t, podA, progress.Audience(jobA))
	if code, body := post(url, tokenA, report(10)); code != http.StatusOK {
		t.Fatalf("a-worker-0's own report: %d %s", code, body)
	}
	a := waitJob(t, ns, "a", "progress 10%", func(j *batch.GenericJob) bool {
		return j.Status.Progress != nil && j.Status.Progress.ProgressPercentage != nil && *j.Status.Progress.ProgressPercentage == 10
	})
	if p := a.Status.Progress; p.Replica != "a-worker-0" || len(p.Replicas) != 1 || p.Replicas[0].UID != podA.UID {
		t.Errorf("a's progress: %s", asJSON(p))
	}
	before := a.Status.Progress.DeepCopy()
	unused := mintToken(t, podA, progress.Audience(jobA))
	accepted := func() float64 {
		v, _ := controllerMetrics(t).Value(`t9k_progress_reports_total{code="200"}`)
		return v
	}
	taken := accepted()

	for _, c := range []struct {
		what, token, body string
		code              int
		says              string
	}{
		{"no token", "", report(50), 401, "no bearer token"},
		{"a token that is none", "not-a-token", report(50), 401, "not valid for this job"},
		{"another job's pod's token", mintToken(t, podB, progress.Audience(jobB)), report(50), 401, "not valid for this job"},
		{"a token for this job bound to another job's pod", mintToken(t, podB, progress.Audience(jobA)), report(50), 403, "b-worker-0 is not of genericjobs " + ns + "/a"},
		{"a bad body", tokenA, `{"trainerStatus": {"progressPercentage": 150}}`, 422, "lastUpdatedTime: required"},
	} {
		code, body := post(url, c.token, c.body)
		if code != c.code || !strings.Contains(body, c.says) || !strings.Contains(body, `"kind":"Status"`) {
			t.Errorf("%s: %d %s, want %d saying %q", c.what, code, body, c.code, c.says)
		}
	}

	// The pod deleted: the controller makes the replica a new one; the old pod's tokens go
	// with it. The one used before is refused by the pod's check (its review is cached), the
	// unused one by the API server's review.
	if err := env.kube.CoreV1().Pods(ns).Delete(ctx, podA.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	// The new pod is made once the controller's cache (which the endpoint reads) has lost the
	// old one: its name is the old one's.
	waitFor(t, "a-worker-0 to be replaced", jobTimeout, func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, podA.Name, metav1.GetOptions{})
		return err == nil && p.UID != podA.UID, nil
	})
	for what, token := range map[string]string{"the deleted pod's token, used before": tokenA, "the deleted pod's token, never used": unused} {
		if code, body := post(url, token, report(70)); code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 401 or 403", what, code, body)
		}
	}

	// Nothing changed: the endpoint took none of them (its metric counts each answer it
	// gave, 200 for a report it took), so none waits to be written either.
	if n := accepted() - taken; n != 0 {
		t.Errorf("%v forged reports were taken", n)
	}
	if p := getJob(t, ns, "a").Status.Progress; !equality.Semantic.DeepEqual(p, before) {
		t.Errorf("a's progress changed:\n%s\n%s", asJSON(before), asJSON(p))
	}
	if p := getJob(t, ns, "b").Status.Progress; p != nil {
		t.Errorf("b's progress: %s, want none", asJSON(p))
	}

	checkProgressSecret(t, to.ca)
}

// reporter posts to a job's progress endpoint as its pod would: to the URL the pod was told,
// trusting the CA the job's ConfigMap holds.
type reporter struct {
	t       *testing.T
	url, ca string
	client  *http.Client
}

func reporterOf(t *testing.T, pod *corev1.Pod) *reporter {
	t.Helper()
	job := pod.Labels[batch.LabelJobName]
	cm, err := env.kube.CoreV1().ConfigMaps(pod.Namespace).Get(context.Background(), job+"-progress-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
		t.Fatalf("%s-progress-ca's ca.crt is no certificate: %q", job, cm.Data["ca.crt"])
	}
	return &reporter{t: t, url: envOf(pod.Spec.Containers[0], "KUBEFLOW_TRAINER_SERVER_URL"), ca: cm.Data["ca.crt"],
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
}

// post sends body with token (none: "") to url, and returns the answer's code and body.
func (r *reporter) post(url, token, body string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatalf("posting to %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// progressReport is a report of percent, as Kubeflow Trainer's protocol has it.
func progressReport(percent int) string {
	return fmt.Sprintf(`{"trainerStatus": {"progressPercentage": %d, "metrics": [{"name": "loss", "value": "0.5"}], "lastUpdatedTime": %q}}`,
		percent, time.Now().UTC().Format(time.RFC3339))
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := env.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// mintToken mints a token of pod's ServiceAccount bound to the pod, for audience, as the
// kubelet does for the projected volume.
func mintToken(t *testing.T, pod *corev1.Pod, audience string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	tr, err := env.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(context.Background(), pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// checkProgressSecret: the controller made the Secret of its certificate in t9k-system, with
// the CA the jobs' ConfigMaps hold; its ServiceAccount may write no other Secret there, nor
// delete that one (manifests/rbac.yaml's policy).
func checkProgressSecret(t *testing.T, ca string) {
	t.Helper()
	ctx := context.Background()
	s, err := env.kube.CoreV1().Secrets("t9k-system").Get(ctx, "t9k-job-controller-progress-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["ca.crt"]) != ca || s.Type != corev1.SecretTypeTLS || len(s.Data["tls.crt"]) == 0 {
		t.Errorf("the Secret of the progress certificate: type %s, its CA the jobs' %v", s.Type, string(s.Data["ca.crt"]) == ca)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", controller.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(cfg)
	const says = "writes nothing in its own namespace t9k-system but its Lease"
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "progress-check"}}
	if _, err := sa.CoreV1().Secrets("t9k-system").Create(ctx, other, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), says) {
		t.Errorf("another Secret in t9k-system with the controller's token: %v, want it refused", err)
	}
	// (A precondition cannot keep a delete that the policy let through from happening: the API
	// server checks it first.)
	if err := sa.CoreV1().Secrets("t9k-system").Delete(ctx, s.Name, metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), says) {
		t.Errorf("deleting the progress certificate's Secret with the controller's token: %v, want it refused by the policy", err)
	}
}
