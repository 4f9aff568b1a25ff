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
