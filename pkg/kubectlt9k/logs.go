package kubectlt9k

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// LogOptions choose the replicas whose logs `kubectl t9k logs` prints, and how.
type LogOptions struct {
	Type       string // only this replica type
	Rank       int    // only this rank (-1: every rank)
	Follow     bool   // stream until the job ends, the replicas' next lives included
	Previous   bool   // the previous container of each replica, as kubectl logs --previous
	Timestamps bool   // keep each line's timestamp
	Attempt    int32  // only the pods of this attempt of the job (0: every pod there is)
	All        bool   // every container of each replica, init containers too, not only its main one
}

// Logs prints the logs of the job ref's replicas, each line prefixed with the replica's
// "type-rank| ". Without Follow the lines of all replicas are merged in the order of their
// timestamps; with Follow they are printed as they come, from every replica's pods, new
// ones too, until the job has ended and its last streams are read.
func (o *Options) Logs(ctx context.Context, ref string, opts LogOptions) error {
	j, err := find(ctx, o.Jobs, o.Namespace, ref)
	if err != nil {
		return err
	}
	selector := podLabels(j)
	if opts.Type != "" {
		selector[batch.LabelReplicaType] = opts.Type
	}
	if opts.Rank >= 0 {
		selector[batch.LabelReplicaIndex] = strconv.Itoa(opts.Rank)
	}
	if opts.Attempt != 0 {
		if current := j.JobStatus().Attempt; opts.Attempt < 1 || opts.Attempt > current {
			return fmt.Errorf("%s/%s has no attempt %d: its attempts are 1 to %d (status.attempt)", strings.ToLower(j.Kind.Name), j.GetName(), opts.Attempt, current)
		}
		selector[batch.LabelAttempt] = strconv.Itoa(int(opts.Attempt))
	}
	if opts.Follow {
		return o.followLogs(ctx, j, selector.AsSelector().String(), opts)
	}
	pods, err := o.Kube.CoreV1().Pods(j.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: selector.AsSelector().String()})
	if err != nil {
		return err
	}
	if len(pods.Items) == 0 && opts.Attempt != 0 && opts.Attempt < j.JobStatus().Attempt {
		return fmt.Errorf("%s/%s has no pods of attempt %d%s left: a whole-job restart deletes the pods of the attempt it ends, or in place "+
			"(spec.restartStrategy: InPlace) the kubelet removes their containers, and their logs with them; "+
			"read them from the cluster's log collector (docs/lifecycle.md, \"Attempts\")", strings.ToLower(j.Kind.Name), j.GetName(), opts.Attempt, which(opts))
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("%s/%s has no pods%s now: its replicas are not created, or were deleted (`kubectl t9k why %s/%s`)",
			strings.ToLower(j.Kind.Name), j.GetName(), which(opts), strings.ToLower(j.Kind.Name), j.GetName())
	}
	var lines []logLine
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, c := range containersOf(p, opts) {
			got, err := o.readLog(ctx, p, c, opts)
			if err != nil {
				fmt.Fprintf(o.ErrOut, "%s: %v\n", prefix(p, c, opts), err)
				continue
			}
			lines = append(lines, got...)
		}
	}
	sort.SliceStable(lines, func(a, b int) bool { return lines[a].at.Before(lines[b].at) })
	for _, l := range lines {
		fmt.Fprintln(o.Out, l.text)
	}
	return nil
}

type logLine struct {
	at   time.Time
	text string
}

// readLog reads the log of a pod's container with timestamps, to merge it with the others'.
func (o *Options) readLog(ctx context.Context, p *corev1.Pod, container string, opts LogOptions) ([]logLine, error) {
	stream, err := o.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, Previous: opts.Previous, Timestamps: true}).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	var lines []logLine
	scan := bufio.NewScanner(stream)
	scan.Buffer(make([]byte, 64*1024), 1024*1024)
	for scan.Scan() {
		at, text := splitTimestamp(scan.Text())
		if opts.Timestamps {
			text = at.UTC().Format(time.RFC3339Nano) + " " + text
		}
		lines = append(lines, logLine{at, prefix(p, container, opts) + text})
	}
	return lines, scan.Err()
}

// splitTimestamp splits the kubelet's RFC 3339 timestamp from a log line; a line without
// one (a fake clientset's) keeps its text and the zero time.
func splitTimestamp(line string) (time.Time, string) {
	stamp, rest, ok := strings.Cut(line, " ")
	if ok {
		if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
			return at, rest
		}
	}
	return time.Time{}, line
}

// followLogs streams the logs of every pod the selector selects, those created later too
// (a replica's next life is a new pod), until the job has ended and every stream is done,
// or ctx ends.
func (o *Options) followLogs(ctx context.Context, j job, selector string, opts LogOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu        sync.Mutex // orders whole lines on o.Out
		streaming sync.WaitGroup
		started   = map[types.UID]bool{}
	)
	out := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(o.Out, line)
	}
	stream := func(p *corev1.Pod, c string) {
		defer streaming.Done()
		r, err := o.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
			Container: c, Follow: true, Timestamps: opts.Timestamps}).Stream(ctx)
		if err != nil {
			if ctx.Err() == nil {
				out(prefix(p, c, opts) + "(no log: " + err.Error() + ")")
			}
			return
		}
		defer r.Close()
		scan := bufio.NewScanner(r)
		scan.Buffer(make([]byte, 64*1024), 1024*1024)
		for scan.Scan() {
			out(prefix(p, c, opts) + scan.Text())
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithNamespace(j.GetNamespace()),
		informers.WithTweakListOptions(func(l *metav1.ListOptions) { l.LabelSelector = selector }))
	pods := factory.Core().V1().Pods().Informer()
	var startMu sync.Mutex
	maybeStart := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		// A container that has not started has no log to stream yet.
		if !ok || p.Status.Phase == corev1.PodPending {
			return
		}
		startMu.Lock()
		defer startMu.Unlock()
		if started[p.UID] || ctx.Err() != nil {
			return
		}
		started[p.UID] = true
		for _, c := range containersOf(p, opts) {
			streaming.Add(1)
			go stream(p, c)
		}
	}
	reg, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: maybeStart, UpdateFunc: func(_, obj any) { maybeStart(obj) }})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // the informer stops with ctx: Shutdown waits for it
		factory.Shutdown()
	}()
	// The pods there are now have their streams started before the job's end is looked at:
	// a job that has ended already still has its logs printed.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}

	_, err = o.waitUntil(ctx, j, func(j job) bool {
		p := j.JobStatus().Phase
		return p == batch.JobSucceeded || p == batch.JobFailed
	})
	if err != nil {
		return nil // ctx ended: Ctrl-C
	}
	// The job has ended: the streams of pods that ended end by themselves; a pod the job's
	// clean-up policy keeps running (an MPIJob's workers under cleanUpWorkers: false) would
	// stream for ever, so the rest is cut after a grace.
	done := make(chan struct{})
	go func() {
		streaming.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(endGrace):
		cancel()
		<-done
	}
	return nil
}

// endGrace is how long logs are still followed once the job has ended.
const endGrace = 10 * time.Second

// prefix is "type-rank| " of a replica's pod, "type-rank/container| " when every container's
// log is read.
func prefix(p *corev1.Pod, container string, opts LogOptions) string {
	replica := p.Labels[batch.LabelReplicaType] + "-" + p.Labels[batch.LabelReplicaIndex]
	if opts.All {
		return replica + "/" + container + "| "
	}
	return replica + "| "
}

// containersOf are the containers whose logs are read of a replica's pod: its main one, or
// with opts.All every one, init containers first.
func containersOf(p *corev1.Pod, opts LogOptions) []string {
	if !opts.All {
		return []string{mainContainer(p)}
	}
	var names []string
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		names = append(names, c.Name)
	}
	return names
}

// mainContainer is the container whose log is a replica's: kubectl's default-container
// annotation, else the first.
func mainContainer(p *corev1.Pod) string {
	if c := p.Annotations["kubectl.kubernetes.io/default-container"]; c != "" {
		return c
	}
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return ""
}

func which(opts LogOptions) string {
	var parts []string
	if opts.Type != "" {
		parts = append(parts, "of type "+opts.Type)
	}
	if opts.Rank >= 0 {
		parts = append(parts, "of rank "+strconv.Itoa(opts.Rank))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " and ")
}
