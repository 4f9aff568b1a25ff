package procnode

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

// writeLog runs a container's output of two streams through an output and returns it once
// both have ended.
func writeLog(t *testing.T, stdout, stderr string) *output {
	t.Helper()
	o, err := newOutput(filepath.Join(t.TempDir(), "c.log"), 2)
	if err != nil {
		t.Fatal(err)
	}
	o.copy("stdout", io.NopCloser(strings.NewReader(stdout)))
	o.copy("stderr", io.NopCloser(strings.NewReader(stderr)))
	return o
}

func readLog(t *testing.T, o *output, opts logOptions) string {
	t.Helper()
	var b strings.Builder
	if err := o.read(context.Background(), opts, &b, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestLogFormatAndOptions(t *testing.T) {
	long := strings.Repeat("x", maxLogLine+10)
	o := writeLog(t, "one\ntwo\n"+long+"\nno newline", "oops\n")
	data, err := os.ReadFile(o.path)
	if err != nil {
		t.Fatal(err)
	}
	// <time> <stream> <P|F> <text>, the long line in two parts, the last unfinished.
	var tags []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		f := strings.SplitN(line, " ", 4)
		if _, err := time.Parse(time.RFC3339Nano, f[0]); err != nil || len(f) != 4 {
			t.Fatalf("entry %q: %v", line, err)
		}
		tags = append(tags, f[1]+" "+f[2])
	}
	if got := strings.Join(tags, ","); got != "stdout F,stdout F,stdout P,stdout F,stdout P,stderr F" {
		t.Errorf("entries: %s", got)
	}

	all := logOptions{stdout: true, stderr: true}
	if got, want := readLog(t, o, all), "one\ntwo\n"+long+"\nno newlineoops\n"; got != want {
		t.Errorf("the whole log: %q", got)
	}
	if plain, err := ReadLog(o.path); err != nil || plain != readLog(t, o, all) {
		t.Errorf("ReadLog: %q, %v", plain, err)
	}
	tail := all
	tail.tailLines = ptr.To[int64](2)
	if got := readLog(t, o, tail); got != "no newlineoops\n" {
		t.Errorf("tailLines 2: %q", got)
	}
	limit := all
	limit.limitBytes = ptr.To[int64](6)
	if got := readLog(t, o, limit); got != "one\ntw" {
		t.Errorf("limitBytes 6: %q", got)
	}
	stderrOnly := all
	stderrOnly.stdout = false
	if got := readLog(t, o, stderrOnly); got != "oops\n" {
		t.Errorf("stderr only: %q", got)
	}
	future := all
	future.since = time.Now().Add(time.Hour)
	if got := readLog(t, o, future); got != "" {
		t.Errorf("since an hour ahead: %q", got)
	}
	stamped := all
	stamped.timestamps = true
	lines := strings.Split(readLog(t, o, stamped), "\n")
	if len(lines) != 5 || !strings.HasSuffix(lines[2], " "+long) || strings.Count(lines[2], " ") != 1 {
		t.Errorf("timestamps: a line of parts gets one time, first: %d lines", len(lines))
	}
}

// TestLogFollow: a follower gets what is written as it comes, and ends when the output has
// ended and it has read all of it.
func TestLogFollow(t *testing.T) {
	o, err := newOutput(filepath.Join(t.TempDir(), "c.log"), 1)
	if err != nil {
		t.Fatal(err)
	}
	r, w := io.Pipe()
	go o.copy("stdout", r)
	got := make(chan string, 16)
	done := make(chan error)
	go func() {
		done <- o.read(context.Background(), logOptions{follow: true, stdout: true, stderr: true}, writerFunc(func(b []byte) (int, error) {
			got <- string(b)
			return len(b), nil
		}), nil)
	}()
	for _, line := range []string{"first", "second"} {
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-got:
			if g != line+"\n" {
				t.Fatalf("followed %q, want %q", g, line)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q did not arrive", line)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the follower ended before the output: %v", err)
	default:
	}
	_, _ = io.WriteString(w, "last")
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not end with the output")
	}
	if g := <-got; g != "last" {
		t.Errorf("the unfinished last line: %q", g)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
