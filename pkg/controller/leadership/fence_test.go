package leadership

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"
)

const renewDeadline = 10 * time.Second

// fakeLock is a leader election lock whose writes succeed unless err is set; during runs in
// the middle of each write, as the API server's round trip would.
type fakeLock struct {
	err    error
	during func()
	writes int
}

func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{}, nil, nil
}
func (l *fakeLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, ler)
}
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.writes++
	if l.during != nil {
		l.during()
	}
	return l.err
}
func (l *fakeLock) RecordEvent(string) {}
func (l *fakeLock) Identity() string   { return "me" }
func (l *fakeLock) Describe() string   { return "fake" }
func renewal() resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: "me"}
}

// countingTransport stands for the API server: it counts the requests that reach it.
type countingTransport map[string]int

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c[req.Method]++
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// send makes a request through the fenced transport and reports whether it was refused.
func send(t *testing.T, rt http.RoundTripper, method string) (refused bool) {
	t.Helper()
	req, err := http.NewRequest(method, "https://api.example/api/v1/namespaces/ns/pods/p", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return true
	}
	resp.Body.Close()
	return false
}

// TestWritesRefusedPastTheRenewDeadline: a leader writes while its last renewal is younger
// than the renew deadline and never after, whatever happens later (a leader woken from a
// pause must not resume); reads always pass.
func TestWritesRefusedPastTheRenewDeadline(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := New(renewDeadline, clock)
	server := countingTransport{}
	rt := fence.WrapTransport(server)
	lock := fence.Lock(&fakeLock{})

	if !send(t, rt, http.MethodPost) {
		t.Fatal("a write before the first renewal went through")
	}
	// Closed for good, even by a renewal after: the process is to stop.
	fence = New(renewDeadline, clock)
	rt, lock = fence.WrapTransport(server), fence.Lock(&fakeLock{})

	if err := lock.Create(context.Background(), renewal()); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if send(t, rt, method) {
			t.Fatalf("%s refused right after a renewal", method)
		}
	}
	clock.Step(renewDeadline - time.Millisecond)
	if send(t, rt, http.MethodPost) {
		t.Fatal("a write refused before the renew deadline")
	}
	if err := lock.Update(context.Background(), renewal()); err != nil {
		t.Fatal(err)
	}
	clock.Step(renewDeadline - time.Millisecond)
	if send(t, rt, http.MethodDelete) {
		t.Fatal("a renewal did not keep the fence open for another renew deadline")
	}

	// A pause: the process wakes past the deadline.
	clock.Step(25 * time.Second)
	before := server[http.MethodPut]
	if !send(t, rt, http.MethodPut) || server[http.MethodPut] != before {
		t.Fatal("a write past the renew deadline reached the API server")
	}
	select {
	case <-fence.Done():
	default:
		t.Fatal("the fence refused a write but is not closed")
	}
	if err := fence.Err(); err == nil || !strings.Contains(err.Error(), "past the renew deadline of 10s") {
		t.Fatalf("reason: %v", err)
	}
	if send(t, rt, http.MethodGet) {
		t.Fatal("a read was refused")
	}

	if err := lock.Update(context.Background(), renewal()); err != nil {
		t.Fatal(err)
	}
	if !send(t, rt, http.MethodPost) {
		t.Fatal("a renewal after the fence closed opened it again")
	}
}

// TestRenewalCountsFromItsSending: the deadline runs from when the renewal left, not from when
// its answer came back, and a failed renewal extends nothing.
func TestRenewalCountsFromItsSending(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := New(renewDeadline, clock)
	rt := fence.WrapTransport(countingTransport{})
	inner := &fakeLock{during: func() { clock.Step(4 * time.Second) }}
	lock := fence.Lock(inner)

	if err := lock.Update(context.Background(), renewal()); err != nil {
		t.Fatal(err)
	}
	inner.err = errors.New("timeout")
	if err := lock.Update(context.Background(), renewal()); err == nil {
		t.Fatal("want the lock's error")
	}
	// 8 s since the successful renewal was sent: open; 2 s more: closed.
	if send(t, rt, http.MethodPost) {
		t.Fatal("refused within the deadline")
	}
	clock.Step(2 * time.Second)
	if !send(t, rt, http.MethodPost) {
		t.Fatal("a failed renewal kept the fence open, or the deadline ran from the answer")
	}
}

// TestReleaseOnlyWhileLeading: giving the Lease up closes the fence before the request
// leaves, and a process that may have lost the Lease does not release it: it would clear the
// Lease of the replica that took over.
func TestReleaseOnlyWhileLeading(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := New(renewDeadline, clock)
	rt := fence.WrapTransport(countingTransport{})
	inner := &fakeLock{}
	lock := fence.Lock(inner)
	if err := lock.Update(context.Background(), renewal()); err != nil {
		t.Fatal(err)
	}
	var refusedDuring bool
	inner.during = func() { refusedDuring = send(t, rt, http.MethodPost) }
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if !refusedDuring || !send(t, rt, http.MethodPost) {
		t.Fatal("a write went through while or after the Lease was released")
	}

	fence = New(renewDeadline, clock)
	inner = &fakeLock{}
	lock = fence.Lock(inner)
	if err := lock.Update(context.Background(), renewal()); err != nil {
		t.Fatal(err)
	}
	clock.Step(20 * time.Second)
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err == nil || inner.writes != 1 {
		t.Fatalf("a stale leader released the Lease (error %v, %d writes)", err, inner.writes)
	}
}

// TestWatchStopsAWokenProcess: a process with nothing to write still learns, at its first tick
// after waking, that it must stop.
func TestWatchStopsAWokenProcess(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := New(renewDeadline, clock)
	fence.Renewed(clock.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := make(chan error, 1)
	go func() { watched <- fence.Watch(ctx, 2*time.Second) }()

	for i := 0; i < 4; i++ {
		waitTicker(t, clock)
		clock.Step(2 * time.Second)
		fence.Renewed(clock.Now())
	}
	select {
	case err := <-watched:
		t.Fatalf("Watch returned while the Lease was renewed: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	clock.Step(25 * time.Second) // stopped, then woken
	select {
	case err := <-watched:
		if err == nil || !strings.Contains(err.Error(), "past the renew deadline") {
			t.Fatalf("Watch returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not notice the deadline had passed")
	}

	fence = New(renewDeadline, clock)
	fence.Renewed(clock.Now())
	go func() { watched <- fence.Watch(ctx, 2*time.Second) }()
	cancel()
	if err := <-watched; err != nil {
		t.Fatalf("Watch after its context ended: %v", err)
	}
}

// waitTicker waits until Watch's ticker is registered with the fake clock, so that the next
// Step fires it.
func waitTicker(t *testing.T, clock *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !clock.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Watch never set a ticker")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConnectionRefusesBytesPastTheRenewDeadline: a request that passed the transport's check
// and was then held (the process stopped before its bytes left) sends nothing once the
// renew deadline has passed: the connection asks the fence again just before it writes.
func TestConnectionRefusesBytesPastTheRenewDeadline(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := New(renewDeadline, clock)
	if err := fence.Lock(&fakeLock{}).Create(context.Background(), renewal()); err != nil {
		t.Fatal(err)
	}
	client, server := net.Pipe()
	defer server.Close()
	dial := fence.Dial(func(context.Context, string, string) (net.Conn, error) { return client, nil })
	conn, err := dial(context.Background(), "tcp", "api.example:443")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	received := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 64)
		n, _ := server.Read(buf)
		received <- buf[:n]
	}()
	if _, err := conn.Write([]byte("POST")); err != nil {
		t.Fatalf("a write within the renew deadline: %v", err)
	}
	if got := <-received; string(got) != "POST" {
		t.Fatalf("the other end read %q, want POST", got)
	}

	clock.Step(renewDeadline) // the process stopped between the transport's check and the send
	go func() {
		buf := make([]byte, 64)
		n, _ := server.Read(buf)
		received <- buf[:n]
	}()
	if n, err := conn.Write([]byte("PUT")); err == nil || n != 0 {
		t.Fatalf("a write past the renew deadline: %d bytes, %v; want none and the fence's reason", n, err)
	}
	server.Close() // ends the reader: it must have read nothing
	if got := <-received; len(got) != 0 {
		t.Fatalf("the other end read %q past the renew deadline", got)
	}
	if fence.Err() == nil {
		t.Fatal("the connection refused a write but the fence is open")
	}
}

// TestConnectionLetsReadsGoBeforeLeading: before the first renewal a writing connection
// carries what the transport let through, reads (discovery at start), and closes nothing.
func TestConnectionLetsReadsGoBeforeLeading(t *testing.T) {
	fence := New(renewDeadline, testingclock.NewFakeClock(time.Now()))
	client, server := net.Pipe()
	defer server.Close()
	conn, err := fence.Dial(func(context.Context, string, string) (net.Conn, error) { return client, nil })(context.Background(), "tcp", "api.example:443")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() { _, _ = io.Copy(io.Discard, server) }()
	if _, err := conn.Write([]byte("GET")); err != nil {
		t.Fatalf("a read's bytes before the first renewal: %v", err)
	}
	if err := fence.Err(); err != nil {
		t.Fatalf("the connection closed the fence: %v", err)
	}
}
