package procnode

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A probe's result changes after successThreshold successes or failureThreshold failures in a
// row; readiness goes on, liveness ends at its failure, startup at its first verdict.
func TestRunProbe(t *testing.T) {
	probeSecond = time.Millisecond
	defer func() { probeSecond = time.Second }()
	// script plays the probe's results in turn, then fails.
	script := func(results string) func(context.Context) (bool, string) {
		var mu sync.Mutex
		i := 0
		return func(context.Context) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			i++
			if i <= len(results) && results[i-1] == '+' {
				return true, ""
			}
			return false, fmt.Sprintf("failure %d", i)
		}
	}
	p := &corev1.Probe{PeriodSeconds: 1, SuccessThreshold: 2, FailureThreshold: 2}

	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var changes []bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runProbe(ctx, time.Now(), p, readiness, script("+-++-+--++"), func(ok bool) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, ok)
			if len(changes) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("readiness did not change three times")
	}
	// ++ at 3-4: ready; -- at 7-8: not ready; ++ at 9-10: ready.
	if want := []bool{true, false, true}; !reflect.DeepEqual(changes, want) {
		t.Errorf("readiness changed %v, want %v", changes, want)
	}

	ok, msg := runProbe(context.Background(), time.Now(), p, liveness, script("++-+--"), func(bool) {})
	if ok || msg != "failure 6" {
		t.Errorf("liveness ended %v, %q; want a failure at the 6th probe", ok, msg)
	}
	if ok, _ := runProbe(context.Background(), time.Now(), p, startup, script("-++"), func(bool) {}); !ok {
		t.Error("startup did not pass")
	}
	if ok, msg := runProbe(context.Background(), time.Now(), p, startup, script("+--"), func(bool) {}); ok || msg != "failure 3" {
		t.Errorf("startup ended %v, %q; want a failure at the 3rd probe", ok, msg)
	}
	start := time.Now()
	runProbe(context.Background(), start, &corev1.Probe{InitialDelaySeconds: 50}, startup, script("+"), func(bool) {})
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("the first probe came %v after the start, before the initial delay", waited)
	}
}
