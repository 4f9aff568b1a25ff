// Command testsummary reads `go test -json` on stdin and prints what `go test` prints without
// -json (per package its closing line, "ok" or "FAIL", and the output of the tests that
// failed), then every skipped test with its reason, then the slowest tests (where the run's
// time goes):
//
//	go test -json ./... | go run ./hack/testsummary
//
// It exits 1 when a package failed or did not build. `make test` uses it (docs/testing.md, "make test").
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// event is one line of `go test -json` (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
	Elapsed    float64 // seconds, on a test's pass or fail
	Time       time.Time
}

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// test is the output of one test (or subtest) and how it ended ("" while it runs).
type test struct {
	name   string
	end    string
	items  []item // its own lines and its subtests, in order
	parent *test
	// paused is when go test paused it (a parallel test, until the sequential ones are done);
	// waited is how long, in seconds, it waited in all, for go test and for its places in
	// the cluster's shares (test/e2e/parallel_test.go logs those waits).
	paused time.Time
	waited float64
}

// shareWait is the line the end-to-end tests log when a test waited for its place.
var shareWait = regexp.MustCompile(`: waited ([0-9.]+)s for a place on `)

// item is a line, or a subtest where it started.
type item struct {
	line string
	sub  *test
}

// pkg is one package's output: lines of its own (TestMain, the closing lines) and its
// top-level tests, in order.
type pkg struct {
	items []item
	tests map[string]*test
}

type skip struct{ pkg, test, reason string }

// timing is how long a top-level test took.
type timing struct {
	pkg, test string
	seconds   float64
}

// summarize copies the run of in to out as go test would print it, then the skipped tests; it
// reports whether anything failed.
func summarize(in io.Reader, out io.Writer) (bool, error) {
	pkgs := map[string]*pkg{}
	var skips []skip
	var timings []timing
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line) // not an event: pass it on
			continue
		}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output) // a build's errors
			continue
		case "build-fail":
			failed = true
			continue
		}
		p := pkgs[e.Package]
		if p == nil {
			p = &pkg{tests: map[string]*test{}}
			pkgs[e.Package] = p
		}
		if e.Test == "" {
			switch e.Action {
			case "output":
				p.items = append(p.items, item{line: e.Output})
			case "pass", "skip":
				// go test shows a package that passed by its closing line only.
				for _, it := range p.items {
					if it.sub == nil && (strings.HasPrefix(it.line, "ok  \t") || strings.HasPrefix(it.line, "?   \t")) {
						fmt.Fprint(out, it.line)
					}
				}
				delete(pkgs, e.Package)
			case "fail":
				failed = true
				for _, it := range p.items {
					if it.sub != nil {
						printTest(out, it.sub, "")
					} else {
						fmt.Fprint(out, it.line)
					}
				}
				delete(pkgs, e.Package)
			}
			continue
		}
		t := p.tests[e.Test]
		if t == nil {
			t = &test{name: e.Test}
			p.tests[e.Test] = t
			if i := strings.LastIndexByte(e.Test, '/'); i >= 0 && p.tests[e.Test[:i]] != nil {
				t.parent = p.tests[e.Test[:i]]
				t.parent.items = append(t.parent.items, item{sub: t})
			} else {
				p.items = append(p.items, item{sub: t})
			}
		}
		switch e.Action {
		case "output":
			t.items = append(t.items, item{line: e.Output})
			if m := shareWait.FindStringSubmatch(e.Output); m != nil {
				w, _ := strconv.ParseFloat(m[1], 64)
				t.waited += w
			}
		case "pause":
			t.paused = e.Time
		case "cont":
			if !t.paused.IsZero() && !e.Time.IsZero() {
				t.waited += e.Time.Sub(t.paused).Seconds()
			}
		case "pass", "fail", "skip":
			t.end = e.Action
			if e.Action == "skip" {
				skips = append(skips, skip{e.Package, e.Test, reason(t)})
			} else if t.parent == nil && !strings.Contains(e.Test, "/") {
				timings = append(timings, timing{e.Package, e.Test, e.Elapsed - t.waited})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	// A stream cut short: show what the unfinished packages printed.
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		failed = true
		for _, it := range pkgs[name].items {
			if it.sub != nil {
				printTest(out, it.sub, "")
			} else {
				fmt.Fprint(out, it.line)
			}
		}
		fmt.Fprintf(out, "FAIL\t%s\t(no result: the run was cut short)\n", name)
	}
	if failed {
		fmt.Fprintln(out, "FAIL") // go test's last line when anything failed
	}
	printSkips(out, skips)
	printSlowest(out, timings)
	return failed, nil
}

// slowest is how many of the slowest tests are shown, of those that took a second or more.
const slowest = 15

func printSlowest(out io.Writer, timings []timing) {
	timings = slices.DeleteFunc(timings, func(t timing) bool { return t.seconds < 1 })
	if len(timings) == 0 {
		return
	}
	sort.SliceStable(timings, func(i, j int) bool { return timings[i].seconds > timings[j].seconds })
	fmt.Fprintln(out, "slowest tests (the time each ran, not the time it waited for its turn):")
	for _, t := range timings[:min(slowest, len(timings))] {
		fmt.Fprintf(out, "%8.1fs %s %s\n", t.seconds, t.pkg, t.test)
	}
}

// printTest prints a test that failed, or never ended (a timeout's panic), as go test without
// -v does: its closing line, its log, then its subtests that failed; passed and skipped tests
// print nothing. A subtest's lines are indented under its parent's, as without -v.
func printTest(out io.Writer, t *test, indent string) {
	if t.end == "pass" || t.end == "skip" {
		return
	}
	var head string
	for _, it := range t.items {
		if it.sub == nil && isClosing(it.line, t.name) {
			head = it.line
		}
	}
	if head != "" {
		fmt.Fprint(out, indent+strings.TrimLeft(head, " "))
	}
	for _, it := range t.items {
		switch {
		case it.sub != nil:
			printTest(out, it.sub, indent+"    ")
		case it.line == head, isFraming(it.line):
		default:
			fmt.Fprint(out, indent+it.line)
		}
	}
}

var (
	// framing are the lines only -v prints: === RUN, PAUSE, CONT, NAME.
	framing = regexp.MustCompile(`^=== (RUN|PAUSE|CONT|NAME)\s`)
	// logStart is the first line of a t.Log, t.Skip or t.Error: "    file_test.go:12: text".
	logStart = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: `)
)

func isFraming(line string) bool { return framing.MatchString(line) }

// isClosing says whether line is the closing line of test name: "--- FAIL: name (1.00s)".
func isClosing(line, name string) bool {
	s := strings.TrimLeft(line, " ")
	for _, verb := range []string{"--- FAIL: ", "--- PASS: ", "--- SKIP: "} {
		if strings.HasPrefix(s, verb+name+" (") {
			return true
		}
	}
	return false
}

// reason is a skipped test's last log entry, which t.Skip wrote: its text without the file
// and line, continuation lines joined.
func reason(t *test) string {
	var last []string
	for _, it := range t.items {
		switch {
		case it.sub != nil, isFraming(it.line), isClosing(it.line, t.name):
		case logStart.MatchString(it.line):
			last = []string{strings.TrimSpace(logStart.ReplaceAllString(it.line, ""))}
		case len(last) > 0 && strings.TrimSpace(it.line) != "":
			last = append(last, strings.TrimSpace(it.line))
		}
	}
	if len(last) == 0 {
		return "(no reason given)"
	}
	return strings.Join(last, " ")
}

func printSkips(out io.Writer, skips []skip) {
	if len(skips) == 0 {
		fmt.Fprintln(out, "skipped: none")
		return
	}
	fmt.Fprintf(out, "skipped: %d\n", len(skips))
	sort.SliceStable(skips, func(i, j int) bool { return skips[i].pkg < skips[j].pkg })
	for i, s := range skips {
		if i == 0 || s.pkg != skips[i-1].pkg {
			fmt.Fprintf(out, "in %s:\n", s.pkg)
		}
		fmt.Fprintf(out, "SKIP %s: %s\n", s.test, s.reason)
	}
}
