// Command go is the program of docs/go-client.md: it submits a job of each kind with the
// generated clientset and apply configurations, waits for it with an informer, reads its
// status and progress, pauses it, deletes it, and shows what the API's refusal of a bad job
// looks like.
//
//	go run ./examples/go -kubeconfig "$KUBECONFIG" -namespace default
//
// Against `make cluster-up` the jobs run on kwok's fake nodes: their pods are Running until
// deleted, whatever their image.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (empty: in-cluster)")
	namespace := flag.String("namespace", "default", "namespace of the jobs")
	kinds := flag.String("kind", strings.Join(Kinds, ","), "kinds to submit, separated by commas")
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to wait for each step")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client, err := versioned.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	for _, kind := range strings.Split(*kinds, ",") {
		if err := Tour(ctx, os.Stdout, client, kind, *namespace, *timeout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := ShowRefusal(ctx, os.Stdout, client, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Tour submits a job of kind, waits for it to run, prints its status, pauses it, waits for
// the pause, and deletes it.
func Tour(ctx context.Context, out io.Writer, client versioned.Interface, kind, ns string, timeout time.Duration) error {
	name := "example-" + strings.ToLower(strings.TrimSuffix(kind, "Job"))
	step := func(what string, f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := f(ctx); err != nil {
			return fmt.Errorf("%s %s: %s: %w", kind, name, what, err)
		}
		return nil
	}
	if err := step("submitting", func(ctx context.Context) error { return Submit(ctx, client, kind, ns, name) }); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s: submitted\n", kind, name)

	var running job
	err := step("waiting to run", func(ctx context.Context) (err error) {
		running, err = WaitFor(ctx, client, kind, ns, name, InPhase(batch.JobRunning, batch.JobSucceeded, batch.JobFailed))
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s: %s\n", kind, name, Describe(running.JobStatus()))

	if err := step("pausing", func(ctx context.Context) error { return SetPaused(ctx, client, kind, ns, name, true) }); err != nil {
		return err
	}
	var paused job
	err = step("waiting for the pause", func(ctx context.Context) (err error) {
		paused, err = WaitFor(ctx, client, kind, ns, name, InPhase(batch.JobPaused))
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s: %s\n", kind, name, Describe(paused.JobStatus()))

	if err := step("deleting", func(ctx context.Context) error { return Delete(ctx, client, kind, ns, name) }); err != nil {
		return err
	}
	err = step("waiting for it to go", func(ctx context.Context) error {
		_, err := WaitFor(ctx, client, kind, ns, name, Gone)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s: deleted\n", kind, name)
	return nil
}

// Describe says in one line what a job's status says: its phase, its replicas, why (the
// phase's condition), and how far it has come.
func Describe(s *batch.JobStatus) string {
	a := s.Aggregate
	line := fmt.Sprintf("%s; replicas: %d running, %d succeeded, %d failed", s.Phase, a.Running, a.Succeeded, a.Failed)
	for _, c := range s.Conditions {
		if string(c.Type) == string(s.Phase) && c.Message != "" {
			line += "; " + strings.TrimSuffix(c.Message, ".")
		}
	}
	switch p := s.Progress; {
	case p == nil:
		line += "; no progress reported"
	case p.ProgressPercentage != nil:
		line += fmt.Sprintf("; %d%% done", *p.ProgressPercentage)
	case p.Step != nil:
		line += fmt.Sprintf("; step %d", *p.Step)
	}
	return line
}

// ShowRefusal submits a GenericJob the API refuses (a replica type of -1 replicas) and
// prints what the refusal holds: for a refused field, an Invalid error whose causes name the
// field and why.
func ShowRefusal(ctx context.Context, out io.Writer, client versioned.Interface, ns string) error {
	bad := &batch.GenericJob{
		ObjectMeta: metav1.ObjectMeta{Name: "example-refused", Namespace: ns},
		Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{{Type: "worker", Replicas: ptr.To[int32](-1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}}}}}},
	}
	_, err := client.BatchV1beta1().GenericJobs(ns).Create(ctx, bad, metav1.CreateOptions{})
	if err == nil {
		return errors.New("the API accepted a job with replicas: -1")
	}
	for _, line := range Refusal(err) {
		fmt.Fprintln(out, line)
	}
	return nil
}

// Refusal turns an error of the API into lines a person can act on: for Invalid (422), one
// line per refused field; otherwise the reason and the message.
func Refusal(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return []string{"error: " + err.Error()}
	}
	s := status.Status()
	if !apierrors.IsInvalid(err) || s.Details == nil || len(s.Details.Causes) == 0 {
		return []string{fmt.Sprintf("refused (%s, %d): %s", s.Reason, s.Code, s.Message)}
	}
	lines := []string{fmt.Sprintf("refused (%s, %d): %s %q", s.Reason, s.Code, s.Details.Kind, s.Details.Name)}
	for _, c := range s.Details.Causes {
		if c.Field == "" || c.Field == "<nil>" { // a cause of the whole object
			lines = append(lines, "  "+c.Message)
			continue
		}
		lines = append(lines, fmt.Sprintf("  %s: %s", c.Field, c.Message))
	}
	return lines
}
