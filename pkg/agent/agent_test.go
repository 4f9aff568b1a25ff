package agent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// probe is the startup probe's exit code on a state directory.
func probe(state string) int {
	return Main([]string{"--probe", "--state-dir=" + state}, io.Discard)
}

func mustStart(t *testing.T, state string) *agent {
	t.Helper()
	a, err := start(state)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustStep(t *testing.T, a *agent, attempt, released string, wantRestart bool) {
	t.Helper()
	restart, err := a.step(attempt, released)
	if err != nil {
		t.Fatal(err)
	}
	if restart != wantRestart {
		t.Fatalf("label %s, released %s: restart %v, want %v", attempt, released, restart, wantRestart)
	}
}

// The life of a pod's agent across two attempts and a failure, step by step: what the probe
// says and when the agent asks for a restart.
func TestAttempts(t *testing.T) {
	state := t.TempDir()

	// A new pod, made with its attempt released: the probe passes.
	a := mustStart(t, state)
	if probe(state) == 0 {
		t.Fatal("the probe passed before the agent looked at the pod")
	}
	mustStep(t, a, "1", "1", false)
	if probe(state) != 0 {
		t.Fatal("attempt 1 released, the probe does not pass")
	}

	// A container failed: the kubelet restarted them all, the agent starts again on the same
	// attempt and holds the pod.
	a = mustStart(t, state)
	mustStep(t, a, "1", "1", false)
	if probe(state) == 0 {
		t.Fatal("the probe passed again for attempt 1, after a failure")
	}
	// The job restarts: the held pod's label moves on. Nothing of the old attempt runs, so no
	// restart; the new attempt runs once released.
	mustStep(t, a, "2", "1", false)
	if probe(state) == 0 {
		t.Fatal("the probe passed for attempt 2 before its release")
	}
	mustStep(t, a, "2", "2", false)
	if probe(state) != 0 {
		t.Fatal("attempt 2 released, the probe does not pass")
	}

	// The next restart: the label moves on while attempt 2 runs, the agent asks for a
	// restart of the pod's containers.
	mustStep(t, a, "2", "2", false)
	mustStep(t, a, "3", "2", true)

	// Restarted by the kubelet, the agent holds the pod until attempt 3 is released.
	a = mustStart(t, state)
	mustStep(t, a, "3", "2", false)
	if probe(state) == 0 {
		t.Fatal("the probe passed for attempt 3 before its release")
	}
	mustStep(t, a, "3", "3", false)
	if probe(state) != 0 {
		t.Fatal("attempt 3 released, the probe does not pass")
	}
}

// The downward API's files are replaced by renaming a directory: a read that falls between
// sees nothing, which neither releases nor restarts.
func TestUnreadableFilesDoNothing(t *testing.T) {
	state := t.TempDir()
	a := mustStart(t, state)
	mustStep(t, a, "", "", false)
	mustStep(t, a, "1", "1", false)
	mustStep(t, a, "", "", false)
	if probe(state) != 0 {
		t.Fatal("attempt 1 released, the probe does not pass")
	}
}

// Run reads the files and exits with the restart code when the label moves on, 0 when told
// to stop.
func TestRun(t *testing.T) {
	info, state := t.TempDir(), t.TempDir()
	set := func(attempt, released string) {
		for name, v := range map[string]string{"attempt": attempt, "released": released} {
			if err := write(info, name, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func() (<-chan int, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			code, err := Run(ctx, Config{InfoDir: info, StateDir: state, RestartExitCode: 88, Poll: time.Millisecond})
			if err != nil {
				t.Error(err)
			}
			done <- code
		}()
		return done, cancel
	}
	set("1", "1")
	done, cancel := run()
	defer cancel()
	deadline := time.Now().Add(10 * time.Second)
	for probe(state) != 0 { // the agent polls: nothing to wait on but the file
		if time.Now().After(deadline) {
			t.Fatal("the startup probe never passed")
		}
		time.Sleep(time.Millisecond)
	}
	set("2", "1")
	if code := <-done; code != 88 {
		t.Fatalf("exit %d on a new attempt, want the restart code 88", code)
	}
	done, cancel = run()
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d when told to stop, want 0", code)
	}
	if _, err := os.Stat(filepath.Join(state, startedFile)); err != nil {
		t.Error(err)
	}
}

func TestBadCommandLine(t *testing.T) {
	if code := Main([]string{"--info-dir=/x"}, io.Discard); code != 2 {
		t.Errorf("exit %d without --state-dir, want 2", code)
	}
}
