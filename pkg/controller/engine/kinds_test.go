package engine

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
)

// A decision given no table of kinds (Children.Kinds nil, as the decision's own tests give
// it) knows the engine's own kinds as the engine's table does: a child of each kind, as the
// plan builds it, is kept as it is, whichever table the decision tells its kind by.
func TestDecisionKnowsTheEnginesOwnKinds(t *testing.T) {
	objects := map[ObjectKind]runtime.Object{
		ServiceKind: &corev1.Service{}, SecretKind: &corev1.Secret{}, ConfigMapKind: &corev1.ConfigMap{}, DeploymentKind: &appsv1.Deployment{},
	}
	job := decisiontest.Job(decisiontest.Running("0"))
	plan := &Plan{Groups: []Group{workers(1, batch.RestartNever, nil)}}
	var have []metav1.Object
	for _, k := range ownKinds() {
		if k == podKind {
			continue // the replicas, not the plan's objects
		}
		obj, ok := objects[k.Kind]
		if !ok {
			t.Fatalf("the engine has a kind %s this test does not try: the decision's builtinKinds may not know it either", k.Kind)
		}
		child := PlannedChild{Kind: k.Kind, Name: "job-" + strings.ToLower(string(k.Kind)), Build: func(metav1.Object) (metav1.Object, error) {
			return obj.DeepCopyObject().(metav1.Object), nil
		}}
		plan.Objects = append(plan.Objects, child)
		built, err := BuildChild(job, child, nil)
		if err != nil {
			t.Fatal(err)
		}
		have = append(have, built)
	}
	pods := []*corev1.Pod{decisiontest.Pod("job-worker-0", "w0", corev1.PodRunning, 0)}
	for name, kinds := range map[string]decision.KindTable{"the engine's table": ownKinds(), "no table": nil} {
		d := mustDecide(t, job, plan, Children{Pods: pods, Objects: have, Kinds: kinds}, nil, now)
		if len(d.CreateObjects)+len(d.UpdateObjects)+len(d.DeleteObjects) != 0 {
			t.Errorf("%s: created %v, updated %v, deleted %v; want every child kept as it is", name,
				decisiontest.Names(d.CreateObjects), decisiontest.Names(d.UpdateObjects), decisiontest.Names(d.DeleteObjects))
		}
	}
}
