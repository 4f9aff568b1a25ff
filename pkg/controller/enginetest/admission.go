package enginetest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// Admission is a controller of one GenericJob with an admitter, for the admitters' tests, no
// informer running: each step syncs once, then the caches take what the fake API holds, as
// the informers would. NewAdmission makes its clients; Start, given the admitter, its controller.
type Admission struct {
	St       *engine.Stepper
	Jobs     *fake.Clientset
	Kube     *kubefake.Clientset
	Events   *record.FakeRecorder
	Clock    *clocktesting.FakeClock
	Children engine.Informers
	// Key is the job's namespace/name.
	Key string
	// Shows are the admitter's kinds of child, each with what the fake API holds of it, for
	// the caches to show after each step.
	Shows []func(t *testing.T) (engine.ObjectKind, []metav1.Object)

	ns, name string
	informer cache.SharedIndexInformer
	adapter  engine.Adapter
}

// NewAdmission makes the clients of a controller of job, whose plan is plan, its clock at now.
func NewAdmission(t *testing.T, job *batch.GenericJob, now time.Time, plan func(*batch.GenericJob) (*engine.Plan, error)) *Admission {
	t.Helper()
	jobs := fake.NewClientset(job)
	informer := jobinformers.NewSharedInformerFactory(jobs, 0).Batch().V1beta1().GenericJobs()
	decoded, _ := AsDecoded(job)
	if err := informer.Informer().GetIndexer().Add(decoded); err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewClientset()
	return &Admission{
		Jobs: jobs, Kube: kube, Events: record.NewFakeRecorder(100), Clock: clocktesting.NewFakeClock(now),
		Children: engine.Informers{Kube: informers.NewSharedInformerFactory(kube, 0)},
		Key:      job.Namespace + "/" + job.Name, ns: job.Namespace, name: job.Name,
		informer: informer.Informer(),
		adapter:  engine.NewAdapter[*batch.GenericJob]("GenericJob", informer.Informer(), informer.Lister().GenericJobs, jobs.BatchV1beta1().GenericJobs, plan),
	}
}

// Adapter is the job's adapter, for a test to wrap before Start.
func (a *Admission) Adapter() engine.Adapter { return a.adapter }

// Start makes the controller of adapter (Adapter, or a wrap of it) with admitter.
func (a *Admission) Start(t *testing.T, adapter engine.Adapter, admitter engine.Admitter) {
	t.Helper()
	c := engine.New(adapter, engine.Clients{Kube: a.Kube}, a.Children, a.Events, engine.Options{Admitters: []engine.Admitter{admitter}})
	a.St = engine.NewStepper(c, a.Clock)
	t.Cleanup(a.St.Queue().ShutDown)
}

// Step syncs the job, and again once a status held for the batch is due, and lets the
// caches show what the fake API holds.
func (a *Admission) Step(t *testing.T) {
	t.Helper()
	a.Sync(t)
	a.Refresh(t)
}

// Sync syncs the job, and again once a status held for the batch is due, and returns how
// soon it asks to be synced again.
func (a *Admission) Sync(t *testing.T) time.Duration {
	t.Helper()
	wait, err := a.St.Sync(context.Background(), a.Key)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	if a.St.Held(a.Key) {
		a.Clock.Step(wait)
		a.Refresh(t)
		return a.Sync(t)
	}
	return wait
}

// Refresh lets the caches show what the fake API holds: the job, its pods, and the Shows.
func (a *Admission) Refresh(t *testing.T) {
	t.Helper()
	decoded, _ := AsDecoded(a.Job(t))
	if err := a.informer.GetIndexer().Update(decoded); err != nil {
		t.Fatal(err)
	}
	pods := a.Pods(t)
	var objs []metav1.Object
	for i := range pods {
		objs = append(objs, &pods[i])
	}
	a.Show(t, engine.PodKind, objs)
	for _, show := range a.Shows {
		kind, objs := show(t)
		a.Show(t, kind, objs)
	}
	a.St.Settle(a.Key)
}

// Show replaces what the cache of a kind of child holds with objs.
func (a *Admission) Show(t *testing.T, kind engine.ObjectKind, objs []metav1.Object) {
	t.Helper()
	if err := a.St.Show(kind, objs); err != nil {
		t.Fatal(err)
	}
}

// Job is the job as the fake API holds it.
func (a *Admission) Job(t *testing.T) *batch.GenericJob {
	t.Helper()
	job, err := a.Jobs.BatchV1beta1().GenericJobs(a.ns).Get(context.Background(), a.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// Pods are the pods of the job's namespace.
func (a *Admission) Pods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods, err := a.Kube.CoreV1().Pods(a.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}
