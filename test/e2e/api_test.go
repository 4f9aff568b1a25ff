package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/t9k-jobs/t9k-jobs/examples"
	"github.com/t9k-jobs/t9k-jobs/manifests"
	batchv1beta1 "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/test/apivalidation"
	"github.com/t9k-jobs/t9k-jobs/test/harness"
)

// TestCRDsInstalledWithClientSideApply: TestMain installed the CRDs with plain `kubectl apply`,
// which keeps each whole CRD in an annotation; they must all be there.
func TestCRDsInstalledWithClientSideApply(t *testing.T) {
	parallel(t)
	crds, err := manifests.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	client := apiextensionsclient.NewForConfigOrDie(env.config)
	for _, want := range crds {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), want.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", want.Name, err)
			continue
		}
		if _, ok := crd.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; !ok {
			t.Errorf("%s: not installed by client-side kubectl apply", want.Name)
		}
	}
}

// TestExamplesWithKubectl: every documented example is accepted by `kubectl apply` (as a
// server-side dry run), but the XGBoost example as published, whose misplaced containers the
// error must name.
func TestExamplesWithKubectl(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	for _, name := range examples.Names() {
		t.Run(name, func(t *testing.T) {
			out, err := kubectl("apply", "--dry-run=server", "-n", ns, "-f", filepath.Join(repoRoot, "examples", name))
			if name != examples.AsPublished {
				if err != nil {
					t.Fatalf("refused: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", out)
			}
			if !strings.Contains(out, "spec.replicaSpecs[1].template.containers") {
				t.Fatalf("the error does not name the misplaced field:\n%s", out)
			}
		})
	}
}

func resourceOf(obj map[string]any) schema.GroupVersionResource {
	kind := obj["kind"].(string)
	return batchv1beta1.SchemeGroupVersion.WithResource(strings.ToLower(kind) + "s")
}

// TestAdmissionRulesOnServer runs every case of test/apivalidation against the API server, with
// strict field validation as kubectl asks for it.
func TestAdmissionRulesOnServer(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	for _, tc := range apivalidation.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			obj, err := tc.Object()
			if err != nil {
				t.Fatal(err)
			}
			_, err = env.dynamic.Resource(resourceOf(obj)).Namespace(ns).Create(context.Background(),
				&unstructured.Unstructured{Object: obj},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
			if tc.Want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("want an error containing %q, got %v", tc.Want, err)
			}
		})
	}
}

// TestMisplacedContainersWithoutStrictValidation: a client that does not ask for strict field
// validation (client-go's default) has the misplaced containers pruned silently; the CEL rule
// still refuses the object, with a hint where containers belong.
func TestMisplacedContainersWithoutStrictValidation(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	obj, err := examples.Object(examples.AsPublished)
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.dynamic.Resource(resourceOf(obj)).Namespace(ns).Create(context.Background(),
		&unstructured.Unstructured{Object: obj},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationIgnore})
	if err == nil || !strings.Contains(err.Error(), "spec.replicaSpecs[1]") || !strings.Contains(err.Error(), "containers belong under template.spec") {
		t.Fatalf("want the replica named and a hint where containers belong, got %v", err)
	}
}

func TestUpdateRulesOnServer(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := context.Background()
	for i, tc := range apivalidation.UpdateCases() {
		t.Run(tc.Name, func(t *testing.T) {
			old, updated, err := tc.Objects()
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("update-%d", i)
			old["metadata"].(map[string]any)["name"] = name
			updated["metadata"].(map[string]any)["name"] = name
			client := env.dynamic.Resource(resourceOf(old)).Namespace(ns)
			created, err := client.Create(ctx, &unstructured.Unstructured{Object: old}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Delete(ctx, name, metav1.DeleteOptions{})
			// The controller may write the job's status in between: retry on its conflicts.
			u := &unstructured.Unstructured{Object: updated}
			u.SetResourceVersion(created.GetResourceVersion())
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				latest, err := client.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				u.SetResourceVersion(latest.GetResourceVersion())
				_, err = client.Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			})
			if tc.Want == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.Want != "" && (err == nil || !strings.Contains(err.Error(), tc.Want)) {
				t.Fatalf("want an error containing %q, got %v", tc.Want, err)
			}
		})
	}
}

// TestExplain: `kubectl explain` shows the field docs of every kind.
func TestExplain(t *testing.T) {
	parallel(t)
	cases := map[string]string{
		"genericjob.spec.replicaSpecs.restartPolicy":        "RestartPolicy says whether a failed replica is restarted",
		"genericjob.spec.successRules":                      "the job succeeds as soon as one rule holds",
		"mpijob.spec.worker.cmd":                            "Cmd is the command mpirun runs",
		"colossalaijob.spec.worker.procPerWorker":           "ProcPerWorker is the number of training processes",
		"tensorflowtrainingjob.spec.runPolicy.backoffLimit": "BackoffLimit is the most restarts",
		"xgboosttrainingjob.spec.runMode.pause.resumeSpecs": "cannot be changed once set",
		"genericjob.status.tasks.replicas.phase":            "Creating, Pending, Running, Succeeded, Failed, Unknown or Deleted",
		// The lifecycle controls every kind shares (docs/lifecycle.md).
		"genericjob.spec.ttlSecondsAfterFinished":          "deletes the job, with its pods, Services and other children",
		"mpijob.spec.startupDeadlineSeconds":               "fails the job (reason StartupDeadlineExceeded)",
		"tensorflowtrainingjob.spec.restartScope":          "Job deletes every replica of the job and creates them again together",
		"mpijob.spec.restartStrategy":                      "InPlace restarts every container of each pod on its node",
		"genericjob.status.conditions.type":                "Stalled or InPlaceUnavailable",
		"xgboosttrainingjob.status.completionTime":         "CompletionTime is when the job finished",
		"colossalaijob.status.tasks.replicas.disruptions":  "replaced because they were disrupted",
		"genericjob.status.tasks.replicas.lastTermination": "Disrupted",
		"genericjob.status.restarts":                       "counts the restarts of the whole job",
		// spec.scheduling, every field of it (docs/gang.md).
		"genericjob.spec.scheduling":                                          "It has the shape of a batch/v1 Job's spec.scheduling",
		"mpijob.spec.scheduling.schedulingPolicy":                             "Without it the job is a gang of the default minCount",
		"colossalaijob.spec.scheduling.schedulingPolicy.basic":                "Basic places the pods one by one",
		"tensorflowtrainingjob.spec.scheduling.schedulingPolicy.gang":         "kube-scheduler binds none until it can bind minCount of them",
		"xgboosttrainingjob.spec.scheduling.schedulingPolicy.gang.minCount":   "A minCount larger than that fails the job",
		"genericjob.spec.scheduling.schedulingConstraints":                    "TopologyAwareWorkloadScheduling feature gate",
		"genericjob.spec.scheduling.schedulingConstraints.topology":           "At most one constraint",
		"genericjob.spec.scheduling.schedulingConstraints.topology.key":       "nodes without the label are not used",
		"genericjob.spec.scheduling.disruptionMode":                           "kube-scheduler preempts every pod of the group when it preempts one",
		"genericjob.spec.scheduling.disruptionMode.single":                    "disrupt (preempt) the pods one by one",
		"genericjob.spec.scheduling.disruptionMode.all":                       "disrupt (preempt) the pods only all together",
		"genericjob.spec.scheduling.resourceClaims":                           "DRAWorkloadResourceClaims feature gate",
		"genericjob.spec.scheduling.resourceClaims.name":                      "where containers refer to it",
		"genericjob.spec.scheduling.resourceClaims.resourceClaimName":         "an existing ResourceClaim",
		"genericjob.spec.scheduling.resourceClaims.resourceClaimTemplateName": "one ResourceClaim is made from it for the job's PodGroup",
	}
	for field, want := range cases {
		t.Run(field, func(t *testing.T) {
			out, err := kubectl("explain", field)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
				t.Fatalf("explain %s lacks %q:\n%s", field, want, out)
			}
		})
	}
}

// TestKubectlGet: short names, the t9k category and the printer columns.
func TestKubectlGet(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	if out, err := kubectl("apply", "-n", ns, "-f", filepath.Join(repoRoot, "examples", "generic-example.yaml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, short := range []string{"gj", "mj", "caj", "tfj", "xgbj"} {
		out, err := kubectl("get", "-n", ns, short)
		if err != nil {
			t.Errorf("kubectl get %s: %v\n%s", short, err, out)
		}
	}
	out, err := kubectl("get", "-n", ns, "t9k")
	if err != nil || !strings.Contains(out, "genericjob.batch.tensorstack.dev/generic-example") {
		t.Errorf("kubectl get t9k does not list the job: %v\n%s", err, out)
	}
	out, err = kubectl("get", "-n", ns, "gj")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if strings.Join(header, " ") != "NAME PHASE RUNNING SUCCEEDED FAILED PROGRESS AGE" {
		t.Errorf("kubectl get gj columns: %v", header)
	}

	// -o wide adds the size, the attempt and the message; the attempt is 1 once the
	// controller has written the job's status.
	err = harness.WaitFor(context.Background(), "the Attempt column saying 1", 100*time.Millisecond, jobTimeout, func(context.Context) (bool, error) {
		out, err = kubectl("get", "-n", ns, "gj", "generic-example", "-o", "wide")
		if err != nil {
			return false, nil
		}
		lines := strings.Split(out, "\n")
		header := strings.Fields(lines[0])
		if strings.Join(header, " ") != "NAME PHASE RUNNING SIZE SUCCEEDED FAILED PROGRESS ATTEMPT AGE MESSAGE" {
			return false, fmt.Errorf("kubectl get gj -o wide columns: %v", header)
		}
		// Empty cells are blank: the column is read where its header starts.
		at := strings.Index(lines[0], "ATTEMPT")
		return len(lines) > 1 && len(lines[1]) > at && strings.HasPrefix(lines[1][at:], "1 "), nil
	})
	if err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

// TestTypedClient: the generated clientset creates every example kind, keeps the pod
// template's metadata, and writes status through the status subresource only.
func TestTypedClient(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := context.Background()
	job := &batchv1beta1.GenericJob{}
	if err := examples.Decode("generic-example.yaml", job); err != nil {
		t.Fatal(err)
	}
	job.Spec.ReplicaSpecs[0].Template.Labels = map[string]string{"team": "a"}
	client := env.jobs.BatchV1beta1().GenericJobs(ns)
	created, err := client.Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := created.Spec.ReplicaSpecs[0].Template.Labels["team"]; got != "a" {
		t.Errorf("template label after create = %q, want a", got)
	}

	// The controller runs this job too and may write its status in between: retry on conflicts.
	var updated *batchv1beta1.GenericJob
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := client.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		latest.Status.Phase = batchv1beta1.JobRunning
		latest.Status.Conditions = []batchv1beta1.JobCondition{{Type: batchv1beta1.JobConditionInitialized, Status: corev1.ConditionTrue, Reason: "-", Message: "The job has been initialized successfully."}}
		latest.Spec.CleanUpPolicy = batchv1beta1.CleanUpAll // must be ignored by the status subresource
		updated, err = client.UpdateStatus(ctx, latest, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Status.Phase != batchv1beta1.JobRunning || len(updated.Status.Conditions) != 1 {
		t.Errorf("status after update: %+v", updated.Status)
	}
	if updated.Spec.CleanUpPolicy != "" {
		t.Errorf("status update changed spec.cleanUpPolicy to %q", updated.Spec.CleanUpPolicy)
	}
}

// TestStatusWritesKeepAppliedConfiguration: the controller's cache drops kubectl's
// last-applied copy of a job (engine.TrimJob), yet its status writes leave the copy on the
// job, so that the user's next `kubectl apply` still merges against it.
func TestStatusWritesKeepAppliedConfiguration(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	if out, err := kubectl("apply", "-n", ns, "-f", filepath.Join(repoRoot, "examples", "generic-example.yaml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var job *batchv1beta1.GenericJob
	waitFor(t, "the controller's first status write", time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		job, err = env.jobs.BatchV1beta1().GenericJobs(ns).Get(ctx, "generic-example", metav1.GetOptions{})
		return err == nil && job.Status.Phase != "", nil
	})
	if job.Annotations["kubectl.kubernetes.io/last-applied-configuration"] == "" {
		t.Fatalf("the job lost kubectl's last-applied configuration after a status write; annotations: %v", job.Annotations)
	}
}
