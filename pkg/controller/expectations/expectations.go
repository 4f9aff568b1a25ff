// Package expectations remembers the writes a controller has made that its informer cache
// has yet to show, so that a sync does not act on a stale cache: it would create a pod twice,
// or delete one twice.
//
// Creations are counted; updates and deletions are tracked by UID, so that a graceful delete
// (an update that sets deletionTimestamp, then the delete itself) is observed once. An
// expectation that is never observed (a lost watch event) expires, and Wait says when, so
// that a job waiting for it is looked at again then: a job is never stuck.
package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// DefaultTTL is how long an unobserved expectation holds a job back.
const DefaultTTL = 5 * time.Minute

// Expectations is safe for concurrent use. Keys are chosen by the caller, e.g.
// "<namespace>/<job>/pods".
type Expectations struct {
	mu      sync.Mutex
	pending map[string]*pending
	ttl     time.Duration
	now     func() time.Time
}

type pending struct {
	creations int
	updates   sets.Set[types.UID]
	deletions sets.Set[types.UID]
	since     time.Time
}

// New returns empty expectations whose entries expire after ttl.
func New(ttl time.Duration) *Expectations {
	return &Expectations{pending: map[string]*pending{}, ttl: ttl, now: time.Now}
}

func (e *Expectations) entry(key string) *pending {
	p, ok := e.pending[key]
	if !ok {
		p = &pending{updates: sets.New[types.UID](), deletions: sets.New[types.UID]()}
		e.pending[key] = p
	}
	p.since = e.now()
	return p
}

// SetClock makes the expectations read time from now (tests).
func (e *Expectations) SetClock(now func() time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = now
}

// ExpectCreations records n creations about to be sent.
func (e *Expectations) ExpectCreations(key string, n int) {
	if n <= 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).creations += n
}

// CreationObserved records that the cache showed one expected creation, or that a creation
// was not sent or failed and so will never show.
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.pending[key]; ok && p.creations > 0 {
		p.creations--
		e.dropIfDone(key, p)
	}
}

// ExpectUpdates records updates about to be sent, by the UIDs of the objects.
func (e *Expectations) ExpectUpdates(key string, uids ...types.UID) {
	if len(uids) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).updates.Insert(uids...)
}

// UpdateObserved records that the cache showed an object as updated, or that its update
// failed. Unexpected UIDs are ignored.
func (e *Expectations) UpdateObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.pending[key]; ok {
		p.updates.Delete(uid)
		e.dropIfDone(key, p)
	}
}

// ExpectDeletions records deletions about to be sent, by the UIDs of the objects.
func (e *Expectations) ExpectDeletions(key string, uids ...types.UID) {
	if len(uids) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).deletions.Insert(uids...)
}

// DeletionObserved records that the cache showed an object going (or being deleted), or that
// its deletion failed. Unexpected UIDs are ignored, so seeing one deletion twice is harmless.
func (e *Expectations) DeletionObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.pending[key]; ok {
		p.deletions.Delete(uid)
		e.dropIfDone(key, p)
	}
}

func (e *Expectations) dropIfDone(key string, p *pending) {
	if p.creations <= 0 && p.updates.Len() == 0 && p.deletions.Len() == 0 {
		delete(e.pending, key)
	}
}

// Satisfied reports whether the cache shows every expected write of key, or the expectations
// have expired.
func (e *Expectations) Satisfied(key string) bool {
	return e.Wait(key) == 0
}

// Wait is how long key's expectations may still hold a job back: 0 once the cache shows every
// expected write or they have expired, else the time until they expire.
func (e *Expectations) Wait(key string) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.pending[key]
	if !ok {
		return 0
	}
	left := e.ttl - e.now().Sub(p.since)
	if left <= 0 {
		delete(e.pending, key)
		return 0
	}
	return left
}

// Forget drops the expectations of key, e.g. when its job is deleted.
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, key)
}
