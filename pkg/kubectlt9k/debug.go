package kubectlt9k

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Debug makes a copy of the job ref in debug mode (spec.runMode.debug, which a job cannot
// turn on once made: docs/changing-jobs.md), named NAME-debug: every replica runs its debug
// command (sleep, or an MPIJob worker's sshd) instead of training, so that a person can
// exec into it. Unless o.NoWait it waits for the copy to run, then says how to get in.
func (o *Options) Debug(ctx context.Context, ref string) error {
	j, err := find(ctx, o.Jobs, o.Namespace, ref)
	if err != nil {
		return err
	}
	name := j.GetName() + "-debug"
	copyRef := strings.ToLower(j.Kind.Name) + "/" + name
	meta := metav1.ObjectMeta{Name: name, Namespace: j.GetNamespace(), Labels: j.GetLabels(),
		Annotations: map[string]string{batch.GroupName + "/debug-copy-of": j.GetName()}}
	// The original's spec, under metadata of its own; the API server ignores the status.
	cp := j.jobObject.(runtime.Object).DeepCopyObject().(jobObject)
	cpMeta, mode := parts(cp)
	*cpMeta = meta
	keepDebug(mode)
	created, err := j.Kind.client(o.Jobs.BatchV1beta1(), meta.Namespace).create(ctx, cp)
	if err != nil {
		return fmt.Errorf("making %s: %w", copyRef, explain(err, "create", j.Kind, meta.Namespace))
	}
	if o.NoWait {
		fmt.Fprintf(o.Out, "%s made in debug mode; `kubectl t9k get %s -w` follows it\n", copyRef, copyRef)
		return nil
	}
	running, err := o.waitShown(ctx, job{j.Kind, created}, copyRef, func(j job) bool { return j.JobStatus().Phase == batch.JobRunning },
		copyRef+" is made", "not running")
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s runs in debug mode (%d replicas): every replica runs its debug command instead of training.\n",
		copyRef, running.JobStatus().Aggregate.Running)
	if t := firstType(running); t != "" {
		fmt.Fprintf(o.Out, "  kubectl t9k exec %s -n %s --type %s --rank 0 -it -- sh\n", copyRef, meta.Namespace, t)
	}
	fmt.Fprintf(o.Out, "  kubectl delete %s -n %s    # when done\n", copyRef, meta.Namespace)
	return nil
}

// keepDebug turns debug mode on in a copy's run mode, keeping the original's per-type debug
// settings and dropping a pause (the copy is to run).
func keepDebug(mode **batch.RunMode) {
	if *mode == nil {
		*mode = &batch.RunMode{}
	}
	(*mode).Pause = nil
	if (*mode).Debug == nil {
		(*mode).Debug = &batch.DebugMode{}
	}
	(*mode).Debug.Enabled = true
}

func firstType(j job) string {
	if t := j.JobStatus().Tasks; len(t) > 0 {
		return t[0].Type
	}
	return ""
}
