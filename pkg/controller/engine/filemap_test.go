package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The engine's file map in docs/architecture.md ("The engine, one concern a file") names
// every file of the package, and only files that exist: a reader finds a concern by it.
func TestFileMapIsTrue(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## The engine, one concern a file\n\n```\n")
	block, _, closed := strings.Cut(section, "```")
	if !ok || !closed {
		t.Fatal(`docs/architecture.md has no file map under "## The engine, one concern a file"`)
	}
	mapped := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasSuffix(name, ".go") && !strings.Contains(name, "*") {
			mapped[name] = true
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && !mapped[f] {
			t.Errorf("%s is not in docs/architecture.md's file map of the engine", f)
		}
		delete(mapped, f)
	}
	for f := range mapped {
		t.Errorf("docs/architecture.md's file map of the engine names %s, which does not exist", f)
	}
}
