package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// TestGoClientExample: the program of docs/go-client.md (examples/go), built and run as its
// page says, against the cluster under test: it submits a job of each kind, sees each run,
// pauses and deletes it, and prints the API server's refusal of a bad job field by field.
func TestGoClientExample(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	bin := filepath.Join(t.TempDir(), "go-client-example")
	if err := harness.Build(repoRoot, "./examples/go", bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-kubeconfig", env.kubeconfig, "-namespace", ns).CombinedOutput()
	if err != nil {
		t.Fatalf("examples/go: %v\n%s", err, out)
	}
	t.Logf("examples/go printed:\n%s", out)
	for _, want := range []string{
		"GenericJob example-generic: Running; replicas: 2 running",
		"MPIJob example-mpi: Running",
		"ColossalAIJob example-colossalai: Running",
		"TensorFlowTrainingJob example-tensorflowtraining: Running; replicas: 2 running",
		"XGBoostTrainingJob example-xgboosttraining: Running; replicas: 3 running",
		"XGBoostTrainingJob example-xgboosttraining: Paused",
		"XGBoostTrainingJob example-xgboosttraining: deleted",
		`refused (Invalid, 422): GenericJob "example-refused"`,
		"  spec.replicaSpecs[0].replicas: Invalid value: -1: ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("examples/go did not print %q", want)
		}
	}
	if n := strings.Count(string(out), ": deleted\n"); n != 5 {
		t.Errorf("examples/go deleted %d jobs, want one of each of the five kinds", n)
	}
}
