package kubectlt9k

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/term"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// ExecOptions choose the replica `kubectl t9k exec` runs a command in, and how.
type ExecOptions struct {
	Type      string // the replica type ("" when the job has one)
	Rank      int
	Container string // "" for the replica's main container
	Stdin     bool
	TTY       bool
	In        io.Reader
}

// replicaPod finds the pod of the job's replica of type typ ("" when the job has one type)
// and rank, saying which types and ranks there are when it is not there.
func (o *Options) replicaPod(ctx context.Context, j job, typ string, rank int) (*corev1.Pod, error) {
	ref := strings.ToLower(j.Kind.Name) + "/" + j.GetName()
	pods, err := o.Kube.CoreV1().Pods(j.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: podLabels(j).String()})
	if err != nil {
		return nil, err
	}
	var types []string
	for _, p := range pods.Items {
		if t := p.Labels[batch.LabelReplicaType]; !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	if typ == "" {
		if len(types) != 1 {
			return nil, fmt.Errorf("%s has replicas of types %s: say which with --type", ref, strings.Join(types, ", "))
		}
		typ = types[0]
	}
	var ranks []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Labels[batch.LabelReplicaType] != typ {
			continue
		}
		if p.Labels[batch.LabelReplicaIndex] == strconv.Itoa(rank) && p.DeletionTimestamp == nil {
			return p, nil
		}
		ranks = append(ranks, p.Labels[batch.LabelReplicaIndex])
	}
	if len(ranks) == 0 {
		return nil, fmt.Errorf("%s has no pod of type %q now (its pods' types: %s); `kubectl t9k why %s` says why", ref, typ, orDash(strings.Join(types, ", ")), ref)
	}
	slices.Sort(ranks)
	return nil, fmt.Errorf("%s has no pod of type %s and rank %d now (ranks there: %s)", ref, typ, rank, strings.Join(ranks, ", "))
}

// Exec runs command in a replica of the job ref, as kubectl exec does in its pod: over a
// WebSocket, or SPDY where the API server offers no WebSocket.
func (o *Options) Exec(ctx context.Context, ref string, opts ExecOptions, command []string) error {
	if len(command) == 0 {
		return fmt.Errorf("no command: kubectl t9k exec JOB --type T --rank N -- COMMAND [ARGS...]")
	}
	j, err := find(ctx, o.Jobs, o.Namespace, ref)
	if err != nil {
		return err
	}
	pod, err := o.replicaPod(ctx, j, opts.Type, opts.Rank)
	if err != nil {
		return err
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("%s's pod %s is %s: a command runs only in a running container", ref, pod.Name, pod.Status.Phase)
	}
	container := opts.Container
	if container == "" {
		container = mainContainer(pod)
	}
	req := o.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdin: opts.Stdin, Stdout: true,
			Stderr: !opts.TTY, TTY: opts.TTY}, scheme.ParameterCodec)
	if o.REST == nil {
		return fmt.Errorf("exec needs a connection to the API server")
	}
	ws, err := remotecommand.NewWebSocketExecutor(o.REST, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(o.REST, "POST", req.URL())
	if err != nil {
		return err
	}
	// SPDY only where the WebSocket upgrade failed, as kubectl: an error of the command
	// itself (its exit code) must not run it a second time.
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	streams := remotecommand.StreamOptions{Stdout: o.Out, Tty: opts.TTY}
	if !opts.TTY {
		streams.Stderr = o.ErrOut
	}
	if opts.Stdin {
		streams.Stdin = opts.In
	}
	if opts.TTY {
		if f, ok := opts.In.(*os.File); ok && term.IsTerminal(f.Fd()) {
			state, err := term.SetRawTerminal(f.Fd())
			if err != nil {
				return err
			}
			defer func() { _ = term.RestoreTerminal(f.Fd(), state) }()
		}
	}
	return exec.StreamWithContext(ctx, streams)
}
