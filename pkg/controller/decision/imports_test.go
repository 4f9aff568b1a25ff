package decision

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The decision imports no client: only the standard library, the API types (k8s.io/api and
// the project's pkg/apis), apimachinery, and k8s.io/utils/ptr. So a decision depends on its
// inputs alone, and a policy is tested by giving it a job, a plan and children, with no fake
// clientset, informer or clock. What a decision needs of the controller comes in as a value
// or an interface it defines (Children.Kinds, Verdict).
func TestImportsAreTheAPIsOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !allowedImport(path) {
				t.Errorf("%s imports %s: the decision imports only the standard library, k8s.io/api, k8s.io/apimachinery, k8s.io/utils/ptr and pkg/apis", name, path)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no file of the package was checked")
	}
}

// allowedImport says whether the decision may import a package.
func allowedImport(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	switch {
	case !strings.Contains(first, "."): // the standard library
		return true
	case path == "k8s.io/utils/ptr":
		return true
	}
	for _, prefix := range []string{"k8s.io/api/", "k8s.io/apimachinery/", "github.com/t9k-jobs/t9k-jobs/pkg/apis/"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// The rule itself: what it lets in, and what it keeps out.
func TestAllowedImport(t *testing.T) {
	for path, want := range map[string]bool{
		"time":                                 true,
		"encoding/json":                        true,
		"k8s.io/api/core/v1":                   true,
		"k8s.io/apimachinery/pkg/apis/meta/v1": true,
		"k8s.io/utils/ptr":                     true,
		"github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1":         true,
		"k8s.io/client-go/tools/cache":                                false,
		"k8s.io/client-go/kubernetes":                                 false,
		"k8s.io/apiserver/pkg/util/feature":                           false,
		"k8s.io/utils/clock":                                          false,
		"k8s.io/klog/v2":                                              false,
		"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned": false,
		"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine":          false,
		"github.com/t9k-jobs/t9k-jobs/pkg/features":                   false,
	} {
		if got := allowedImport(path); got != want {
			t.Errorf("allowedImport(%q) = %v, want %v", path, got, want)
		}
	}
}
