// Package leadership keeps a leader from writing once it cannot know that it still leads.
//
// client-go's leader election tells a leader that it lost its Lease only when its renewals
// have failed for the renew deadline, counted from when it last tried. A leader that was
// stopped (a long GC pause, a frozen VM, SIGSTOP) for longer than the Lease wakes to a Lease
// another replica holds, yet goes on writing until that deadline passes again: two leaders at
// once. A Fence closes that gap: it knows when the Lease was last renewed, and every write of
// the controllers asks it first.
package leadership

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Fence records the time of the last successful renewal of the Lease and refuses writes once
// that time is older than the renew deadline. A closed fence stays closed: the process is to
// stop, as when it loses the Lease, and the next leader takes over from fresh caches.
type Fence struct {
	clock         clock.WithTicker
	renewDeadline time.Duration

	mu      sync.Mutex
	renewed time.Time // when the last successful renewal was sent; zero before the first
	err     error     // why the fence closed; nil while open
	done    chan struct{}
}

// New returns a fence that stays open for renewDeadline after each renewal. It is closed
// until the first renewal: a replica that has never led has nothing to write.
func New(renewDeadline time.Duration, c clock.WithTicker) *Fence {
	return &Fence{clock: c, renewDeadline: renewDeadline, done: make(chan struct{})}
}

// Renewed records that a renewal sent at sent succeeded. The Lease counts from the renew time
// the leader wrote, taken before the request left, so the send time is the safe one.
func (f *Fence) Renewed(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sent.After(f.renewed) {
		f.renewed = sent
	}
}

// Check returns nil while the last renewal is younger than the renew deadline. Otherwise it
// closes the fence for good and returns why.
func (f *Fence) Check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.renewed.IsZero() {
		f.closeLocked(fmt.Errorf("the leader election Lease was never renewed by this process"))
		return f.err
	}
	f.expireLocked()
	return f.err
}

// checkSend is Check for bytes about to leave on a writing connection (Dial). Before the
// first renewal it lets them go and closes nothing: what a process that has not led sends is
// reads (discovery at start), the transport having refused every write.
func (f *Fence) checkSend() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil && !f.renewed.IsZero() {
		f.expireLocked()
	}
	return f.err
}

// expireLocked closes an open fence whose last renewal is older than the renew deadline.
func (f *Fence) expireLocked() {
	if since := f.sinceRenewedLocked(); since >= f.renewDeadline {
		f.closeLocked(fmt.Errorf("the leader election Lease was last renewed %s ago, past the renew deadline of %s: another replica may lead",
			since.Round(time.Millisecond), f.renewDeadline))
	}
}

// Close closes the fence: the process gives the Lease up, or knows it lost it.
func (f *Fence) Close(reason error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.closeLocked(reason)
	}
}

// Done is closed when the fence closes.
func (f *Fence) Done() <-chan struct{} { return f.done }

// Err says why the fence closed, or nil while it is open.
func (f *Fence) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Watch checks the fence every period, so that a process woken from a long pause stops even
// when it has nothing to write: a tick missed while the process was stopped fires as soon as
// it runs again. It returns why the fence closed, by a check or a refused write, or nil when
// ctx ends first.
func (f *Fence) Watch(ctx context.Context, period time.Duration) error {
	ticker := f.clock.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.done:
			return f.Err()
		case <-ticker.C():
			if err := f.Check(); err != nil {
				return err
			}
		}
	}
}

// sinceRenewedLocked is the larger of the monotonic and the wall-clock time since the last
// renewal. The monotonic clock (CLOCK_MONOTONIC) goes on while the process is stopped, but
// not while the machine is suspended; the wall clock does, once it is set again. Taking the
// larger errs towards stopping.
func (f *Fence) sinceRenewedLocked() time.Duration {
	now := f.clock.Now()
	return max(now.Sub(f.renewed), now.Round(0).Sub(f.renewed.Round(0)))
}

func (f *Fence) closeLocked(reason error) {
	f.err = reason
	close(f.done)
}
