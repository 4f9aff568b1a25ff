package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The file maps in docs/architecture.md, the engine's ("The engine, one concern a file") and
// the decision's ("The decision, one policy a file"), name every file of their package, and
// only files that exist: a reader finds a concern by them.
func TestFileMapIsTrue(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ heading, dir string }{
		{"## The engine, one concern a file", "."},
		{"## The decision, one policy a file", "../decision"},
	} {
		checkFileMap(t, string(doc), m.heading, m.dir)
	}
}

// checkFileMap checks the file map in the first code block under heading against the Go
// files of dir.
func checkFileMap(t *testing.T, doc, heading, dir string) {
	t.Helper()
	_, section, ok := strings.Cut(doc, heading+"\n")
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, opened := strings.Cut(section, "```\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !opened || !closed {
		t.Errorf("docs/architecture.md has no file map under %q", heading)
		return
	}
	mapped := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasSuffix(name, ".go") && !strings.Contains(name, "*") {
			mapped[name] = true
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f = filepath.Base(f)
		if !strings.HasSuffix(f, "_test.go") && !mapped[f] {
			t.Errorf("%s is not in docs/architecture.md's file map under %q", f, heading)
		}
		delete(mapped, f)
	}
	for f := range mapped {
		t.Errorf("docs/architecture.md's file map under %q names %s, which does not exist", heading, f)
	}
}
