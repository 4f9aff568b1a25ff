package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const page = `# HELP t9k_api_requests_total Requests.
# TYPE t9k_api_requests_total counter
t9k_api_requests_total{code="200",resource="pods",verb="create"} 12
t9k_api_requests_total{code="201",resource="pods/status",verb="update"} 3
t9k_job_queue_evictions_total{kind="GenericJob",reason="a \"quoted\", reason"} 1
go_memstats_heap_inuse_bytes 4.5e+06
`

func TestMetricsSamples(t *testing.T) {
	m := Metrics(page)
	got := m.Samples("t9k_api_requests_total")
	want := []Sample{
		{Name: "t9k_api_requests_total", Labels: map[string]string{"code": "200", "resource": "pods", "verb": "create"}, Value: 12},
		{Name: "t9k_api_requests_total", Labels: map[string]string{"code": "201", "resource": "pods/status", "verb": "update"}, Value: 3},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Samples = %+v, want %+v", got, want)
	}
	if s := m.Samples("t9k_job_queue_evictions_total"); len(s) != 1 || s[0].Labels["reason"] != `a "quoted", reason` || s[0].Labels["kind"] != "GenericJob" {
		t.Errorf("a quoted value with a comma: %+v", s)
	}
	if v, ok := m.Value("go_memstats_heap_inuse_bytes"); !ok || v != 4.5e6 {
		t.Errorf("Value = %v %v", v, ok)
	}
	if _, ok := m.Value("go_memstats_heap_alloc_bytes"); ok {
		t.Error("Value found a series the page lacks")
	}
	if !m.Has(`t9k_api_requests_total{code="201"`) || m.Has("t9k_build_info") {
		t.Error("Has")
	}
}

func TestStopKillsAProgramThatIgnoresSIGTERM(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	log := filepath.Join(t.TempDir(), "log")
	p, err := Start(sh, []string{"-c", "trap '' TERM; echo trapped; while :; do sleep 0.05; done"}, Options{Group: true, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	// The signal must come after the trap.
	if err := WaitFor(context.Background(), "the trap", 10*time.Millisecond, 10*time.Second, func(context.Context) (bool, error) {
		data, _ := os.ReadFile(log)
		return strings.Contains(string(data), "trapped"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(300 * time.Millisecond); !errors.Is(err, ErrKilled) {
		t.Errorf("Stop = %v, want ErrKilled", err)
	}
	if exited, _ := p.Exited(); !exited {
		t.Error("the program still runs after Stop")
	}
	q, err := Start(sh, []string{"-c", "exec sleep 60"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Stop(5 * time.Second); err != nil {
		t.Errorf("Stop of a program that exits on SIGTERM: %v", err)
	}
}

// TestChildOutlivesTheThreadThatStartedIt: Linux sends a child its parent-death signal when
// the thread that forked it ends, not the process (golang/go#27505). A program started from
// a goroutine locked to its thread, which ends with it, runs on.
func TestChildOutlivesTheThreadThatStartedIt(t *testing.T) {
	type started struct {
		p   *Process
		tid int
		err error
	}
	var s started
	// Go never ends the main thread (a locked goroutine that returns there leaves it
	// wedged), so a start that ran there is tried again.
	for s.tid = os.Getpid(); s.tid == os.Getpid(); {
		ch := make(chan started, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			p, err := Start("sleep", []string{"60"}, Options{})
			ch <- started{p, syscall.Gettid(), err}
		}()
		if s = <-ch; s.err != nil {
			t.Fatal(s.err)
		}
		t.Cleanup(s.p.Kill)
	}
	task := filepath.Join("/proc/self/task", strconv.Itoa(s.tid))
	if err := WaitFor(context.Background(), "the starting thread to end", 5*time.Millisecond, 5*time.Second, func(context.Context) (bool, error) {
		_, err := os.Stat(task)
		return errors.Is(err, os.ErrNotExist), nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.p.Done: // the signal comes as the thread ends, and the child's exit right after
		t.Fatalf("the program died with the thread that started it: %v", s.p.err)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestFreePortsAreOutsideTheEphemeralRange: the ports handed out are never handed out twice,
// can be listened on, and lie below the range the kernel takes outgoing connections' ports
// from, so that no client's connection can hold one.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	ephemeral := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if _, err := fmt.Sscan(string(b), &ephemeral); err != nil {
			t.Fatal(err)
		}
	}
	ports, err := FreePorts(200)
	if err != nil {
		t.Fatal(err)
	}
	more, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range append(ports, more...) {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p >= ephemeral || p >= 30000 || p < 1024 {
			t.Fatalf("port %d is not below the ephemeral ports (%d) and the node ports (30000)", p, ephemeral)
		}
	}
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on the free address %s: %v", addr, err)
	}
	l.Close()
}
