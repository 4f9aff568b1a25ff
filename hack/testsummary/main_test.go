package main

import (
	"strings"
	"testing"
)

// A run of three packages as `go test -json` reports it: one passes with a skipped test and
// subtest, one fails in a subtest, one times out.
const run = `{"Action":"start","Package":"p/a"}
{"Action":"output","Package":"p/a","Output":"e2e: starting the cluster\n"}
{"Action":"run","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"    a_test.go:4: ok log\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"p/a","Test":"TestOK"}
{"Action":"run","Package":"p/a","Test":"TestReal"}
{"Action":"output","Package":"p/a","Test":"TestReal","Output":"=== RUN   TestReal\n"}
{"Action":"output","Package":"p/a","Test":"TestReal","Output":"    a_test.go:5: before\n"}
{"Action":"output","Package":"p/a","Test":"TestReal","Output":"    a_test.go:6: needs a real machine\n"}
{"Action":"output","Package":"p/a","Test":"TestReal","Output":"        (run as root)\n"}
{"Action":"output","Package":"p/a","Test":"TestReal","Output":"--- SKIP: TestReal (0.00s)\n"}
{"Action":"skip","Package":"p/a","Test":"TestReal"}
{"Action":"run","Package":"p/a","Test":"TestSub"}
{"Action":"run","Package":"p/a","Test":"TestSub/x"}
{"Action":"output","Package":"p/a","Test":"TestSub/x","Output":"--- SKIP: TestSub/x (0.00s)\n"}
{"Action":"skip","Package":"p/a","Test":"TestSub/x"}
{"Action":"pass","Package":"p/a","Test":"TestSub"}
{"Action":"output","Package":"p/a","Output":"PASS\n"}
{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t0.005s\n"}
{"Action":"pass","Package":"p/a"}
{"Action":"run","Package":"p/b","Test":"TestFail"}
{"Action":"output","Package":"p/b","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"p/b","Test":"TestFail","Output":"    b_test.go:3: a log\n"}
{"Action":"run","Package":"p/b","Test":"TestFail/s"}
{"Action":"output","Package":"p/b","Test":"TestFail/s","Output":"=== RUN   TestFail/s\n"}
{"Action":"output","Package":"p/b","Test":"TestFail/s","Output":"    b_test.go:3: sub failed\n"}
{"Action":"output","Package":"p/b","Test":"TestFail/s","Output":"--- FAIL: TestFail/s (0.00s)\n"}
{"Action":"fail","Package":"p/b","Test":"TestFail/s"}
{"Action":"run","Package":"p/b","Test":"TestFail/p"}
{"Action":"output","Package":"p/b","Test":"TestFail/p","Output":"    b_test.go:3: p ok\n"}
{"Action":"output","Package":"p/b","Test":"TestFail/p","Output":"--- PASS: TestFail/p (0.00s)\n"}
{"Action":"pass","Package":"p/b","Test":"TestFail/p"}
{"Action":"output","Package":"p/b","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"p/b","Test":"TestFail"}
{"Action":"output","Package":"p/b","Output":"FAIL\n"}
{"Action":"output","Package":"p/b","Output":"FAIL\tp/b\t0.006s\n"}
{"Action":"fail","Package":"p/b"}
{"Action":"run","Package":"p/c","Test":"TestHang"}
{"Action":"output","Package":"p/c","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"p/c","Test":"TestHang","Output":"panic: test timed out after 2s\n"}
{"Action":"output","Package":"p/c","Output":"FAIL\tp/c\t2.009s\n"}
{"Action":"fail","Package":"p/c"}
{"ImportPath":"p/d [p/d.test]","Action":"build-output","Output":"d_test.go:3:32: undefined: x\n"}
{"ImportPath":"p/d [p/d.test]","Action":"build-fail"}
{"Action":"output","Package":"p/d","Output":"FAIL\tp/d [build failed]\n"}
{"Action":"fail","Package":"p/d"}
`

func TestSummarize(t *testing.T) {
	var out strings.Builder
	failed, err := summarize(strings.NewReader(run), &out)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	want := `ok  	p/a	0.005s
--- FAIL: TestFail (0.00s)
    b_test.go:3: a log
    --- FAIL: TestFail/s (0.00s)
        b_test.go:3: sub failed
FAIL
FAIL	p/b	0.006s
panic: test timed out after 2s
FAIL	p/c	2.009s
d_test.go:3:32: undefined: x
FAIL	p/d [build failed]
FAIL
skipped: 2
in p/a:
SKIP TestReal: needs a real machine (run as root)
SKIP TestSub/x: (no reason given)
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestSummarizeAllPassed(t *testing.T) {
	var out strings.Builder
	in := `{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t0.005s\n"}
{"Action":"pass","Package":"p/a"}
{"Action":"output","Package":"p/e","Output":"?   \tp/e\t[no test files]\n"}
{"Action":"skip","Package":"p/e"}
`
	failed, err := summarize(strings.NewReader(in), &out)
	if err != nil || failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	if want := "ok  \tp/a\t0.005s\n?   \tp/e\t[no test files]\nskipped: none\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestCutShort(t *testing.T) {
	var out strings.Builder
	failed, _ := summarize(strings.NewReader(`{"Action":"output","Package":"p/a","Output":"starting\n"}`+"\n"), &out)
	if !failed || !strings.Contains(out.String(), "starting\nFAIL\tp/a\t(no result") {
		t.Errorf("failed %v, output %q", failed, out.String())
	}
}

// A parallel test's time is the time it ran: less the time go test paused it and the time it
// waited for a place in a share of the cluster.
func TestSlowestParallel(t *testing.T) {
	var out strings.Builder
	in := `{"Action":"run","Package":"p/e","Test":"TestShared","Time":"2026-12-06T10:00:00Z"}
{"Action":"pause","Package":"p/e","Test":"TestShared","Time":"2026-12-06T10:00:00Z"}
{"Action":"cont","Package":"p/e","Test":"TestShared","Time":"2026-12-06T10:01:40Z"}
{"Action":"output","Package":"p/e","Test":"TestShared","Output":"    parallel_test.go:80: waited 50.0s for a place on the real node\n"}
{"Action":"pass","Package":"p/e","Test":"TestShared","Elapsed":180}
{"Action":"pass","Package":"p/e"}
`
	if _, err := summarize(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if want := "    30.0s p/e TestShared\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("got %q, want it to end with %q", out.String(), want)
	}
}

// The slowest top-level tests are listed last, slowest first; subtests and tests under a
// second are not.
func TestSlowest(t *testing.T) {
	var out strings.Builder
	in := `{"Action":"pass","Package":"p/a","Test":"TestQuick","Elapsed":0.2}
{"Action":"pass","Package":"p/a","Test":"TestSlow","Elapsed":12.5}
{"Action":"pass","Package":"p/a","Test":"TestSlow/sub","Elapsed":12}
{"Action":"pass","Package":"p/e","Test":"TestSlower","Elapsed":300}
{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t13s\n"}
{"Action":"pass","Package":"p/a"}
{"Action":"pass","Package":"p/e"}
`
	if _, err := summarize(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := "skipped: none\nslowest tests (the time each ran, not the time it waited for its turn):\n   300.0s p/e TestSlower\n    12.5s p/a TestSlow\n"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("got %q, want it to end with %q", out.String(), want)
	}
}
