package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/t9k-jobs/t9k-jobs/pkg/controller/leadership"
)

// leaderElect runs run while this process leads, elected with a Lease. It returns nil when ctx
// ends, and an error when the process lost the Lease or can no longer know that it holds it
// (the fence closed): the process then exits, and its Deployment starts it again, a candidate
// like any other.
func leaderElect(ctx context.Context, o options, kube kubernetes.Interface, fence *leadership.Fence, run func(context.Context),
	logger klog.Logger) error {
	namespace := o.leaseNamespace
	if namespace == "" {
		namespace = "default"
		if data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			namespace = string(data)
		}
	}
	// <host>_<pid>_<random>: in a container every process is pid 1, and a container the
	// kubelet restarts keeps its host name, so host and pid alone would let a new process
	// take the Lease as the old one's (no transition, no fresh start).
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s_%d_%s", host, os.Getpid(), rand.Text()[:8])
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, o.leaseName, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	// The fence closing ends the term at once, as a lost Lease does, with its reason.
	leadCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            fence.Lock(lock),
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Leading", "lease", namespace+"/"+o.leaseName, "identity", id)
				go func() {
					if err := fence.Watch(ctx, o.retryPeriod); err != nil {
						stop(err)
					}
				}()
				run(ctx)
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading", "lease", namespace+"/"+o.leaseName, "identity", id) },
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(leadCtx)
	if ctx.Err() != nil {
		return nil
	}
	if cause := context.Cause(leadCtx); cause != nil {
		return fmt.Errorf("stopped writing and leading: %w", cause)
	}
	return errors.New("lost the leader election lease")
}

// checkLeaseTimings refuses lease timings with which two replicas could lead at once.
func checkLeaseTimings(o options) error {
	switch {
	case o.leaseDuration < time.Second || o.leaseDuration%time.Second != 0:
		// The Lease holds whole seconds: a fraction would be cut off, and another replica
		// would take the Lease before this one stops.
		return fmt.Errorf("--leader-elect-lease-duration=%s: must be a whole number of seconds", o.leaseDuration)
	case o.renewDeadline <= 0 || o.renewDeadline >= o.leaseDuration:
		return fmt.Errorf("--leader-elect-renew-deadline=%s: must be positive and shorter than --leader-elect-lease-duration=%s, "+
			"so that a leader stops before another replica may take the Lease", o.renewDeadline, o.leaseDuration)
	case float64(o.renewDeadline) <= leaderelection.JitterFactor*float64(o.retryPeriod) || o.retryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period=%s: must be positive and less than --leader-elect-renew-deadline=%s / %.1f, "+
			"so that the leader tries to renew more than once before its deadline", o.retryPeriod, o.renewDeadline, leaderelection.JitterFactor)
	}
	return nil
}
