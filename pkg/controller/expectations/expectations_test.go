package expectations

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestCreations(t *testing.T) {
	e := New(DefaultTTL)
	e.ExpectCreations("job/pods", 2)
	if e.Satisfied("job/pods") {
		t.Fatal("satisfied before any creation was observed")
	}
	e.CreationObserved("job/pods")
	if e.Satisfied("job/pods") {
		t.Fatal("satisfied with one of two creations observed")
	}
	e.CreationObserved("job/pods")
	if !e.Satisfied("job/pods") {
		t.Fatal("not satisfied after both creations were observed")
	}
	e.CreationObserved("job/pods") // an extra observation (a pod created by hand) is harmless
	if !e.Satisfied("job/pods") {
		t.Fatal("an extra observation left expectations unsatisfied")
	}
}

// TestDeletionsByUID: a graceful delete shows twice (deletionTimestamp set, then gone); it
// must count once, and another pod's deletion must not stand in for it.
func TestDeletionsByUID(t *testing.T) {
	e := New(DefaultTTL)
	e.ExpectDeletions("job/pods", "a", "b")
	e.DeletionObserved("job/pods", "a")
	e.DeletionObserved("job/pods", "a")
	e.DeletionObserved("job/pods", "c")
	if e.Satisfied("job/pods") {
		t.Fatal("satisfied while b's deletion is unobserved")
	}
	e.DeletionObserved("job/pods", "b")
	if !e.Satisfied("job/pods") {
		t.Fatal("not satisfied after a and b were observed")
	}
}

func TestKeysAreIndependent(t *testing.T) {
	e := New(DefaultTTL)
	e.ExpectCreations("job/pods", 1)
	e.ExpectDeletions("job/services", types.UID("s"))
	e.CreationObserved("job/pods")
	if !e.Satisfied("job/pods") || e.Satisfied("job/services") {
		t.Fatal("one key's observation leaked into another")
	}
}

func TestExpiry(t *testing.T) {
	now := time.Unix(0, 0)
	e := New(time.Minute)
	e.now = func() time.Time { return now }
	e.ExpectCreations("job/pods", 1)
	now = now.Add(59 * time.Second)
	if e.Satisfied("job/pods") {
		t.Fatal("expired early")
	}
	now = now.Add(2 * time.Second)
	if !e.Satisfied("job/pods") {
		t.Fatal("an unobserved expectation did not expire")
	}
}

func TestForget(t *testing.T) {
	e := New(DefaultTTL)
	e.ExpectCreations("job/pods", 3)
	e.Forget("job/pods")
	if !e.Satisfied("job/pods") {
		t.Fatal("forgotten expectations still hold")
	}
}

// Updates are observed by UID; Wait says how long unmet expectations may still hold a job
// back, so that a sync that waits for them can come back by itself.
func TestUpdatesAndWait(t *testing.T) {
	e := New(time.Minute)
	now := time.Unix(0, 0)
	e.SetClock(func() time.Time { return now })
	e.ExpectUpdates("job/configmaps", "a")
	if got := e.Wait("job/configmaps"); got != time.Minute {
		t.Fatalf("Wait = %s with an update pending, want the TTL", got)
	}
	now = now.Add(20 * time.Second)
	if got := e.Wait("job/configmaps"); got != 40*time.Second {
		t.Fatalf("Wait = %s after 20 s, want 40 s", got)
	}
	e.UpdateObserved("job/configmaps", "other")
	if e.Satisfied("job/configmaps") {
		t.Fatal("satisfied by another object's update")
	}
	e.UpdateObserved("job/configmaps", "a")
	if got := e.Wait("job/configmaps"); got != 0 {
		t.Fatalf("Wait = %s once the update was observed, want 0", got)
	}
	e.ExpectCreations("job/pods", 1)
	now = now.Add(2 * time.Minute)
	if got := e.Wait("job/pods"); got != 0 {
		t.Fatalf("Wait = %s after the TTL, want 0", got)
	}
}
