package leadership

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lock wraps the leader election lock so that the fence learns of every renewal: each Create
// or Update that makes this process the holder and succeeds opens the fence for another renew
// deadline, from the moment the request was sent.
func (f *Fence) Lock(inner resourcelock.Interface) resourcelock.Interface {
	return &lock{Interface: inner, fence: f}
}

type lock struct {
	resourcelock.Interface
	fence *Fence
}

func (l *lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler, func() error { return l.Interface.Create(ctx, ler) })
}

func (l *lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler, func() error { return l.Interface.Update(ctx, ler) })
}

func (l *lock) write(ler resourcelock.LeaderElectionRecord, send func() error) error {
	if ler.HolderIdentity != l.Identity() {
		// Giving the Lease up (release on shutdown). client-go decides to release from the
		// holder it last saw, not from the Lease it has just read, so a leader woken from a
		// long pause would clear the Lease of the replica that took over: release only while
		// the fence says this process still holds it. Another replica may take the Lease as
		// soon as it is released, so the fence closes before the request leaves.
		if err := l.fence.Check(); err != nil {
			return fmt.Errorf("not releasing the Lease: %w", err)
		}
		l.fence.Close(errors.New("the leader election Lease is being released"))
		return send()
	}
	sent := l.fence.clock.Now()
	err := send()
	if err == nil {
		l.fence.Renewed(sent)
	}
	return err
}
