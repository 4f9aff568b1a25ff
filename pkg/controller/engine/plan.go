// Package engine is the job engine every kind shares. A kind's adapter describes a job as a
// Plan (replica groups, their pod templates and restart policies, the job's other children
// and the rule that ends the job); the decision package compares the plan with the children
// that exist and decides what to create, update, delete, restart and report, and the engine
// carries that out: it watches the jobs and their children, reads them from its caches, asks
// the admitters, and writes. Every kind of child is one entry in one table (kinds.go). It
// knows nothing of MPI or TensorFlow, nor of Kueue: what decides when a job's pods may be
// made is an Admitter (admission.go).
package engine

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// Adapter is what the engine needs to know of one kind. NewAdapter makes one from the
// kind's typed pieces and a plan function.
type Adapter interface {
	// GroupVersionKind of the kind's jobs.
	GroupVersionKind() schema.GroupVersionKind
	// Informer watches the kind's jobs.
	Informer() cache.SharedIndexInformer
	// Get reads a job from the informer cache.
	Get(namespace, name string) (Job, error)
	// Plan describes a job, from a defaulted copy of it. An error means the job cannot run as
	// written: it fails with the error's message and nothing is created.
	Plan(job Job) (*Plan, error)
	// UpdateStatus writes the job's status subresource and returns the job as written.
	UpdateStatus(ctx context.Context, job Job) (Job, error)
	// Read reads a job from the API server, past the cache.
	Read(ctx context.Context, namespace, name string) (Job, error)
	// Delete deletes the job as it was read (its UID and resourceVersion as preconditions),
	// its children first (foreground).
	Delete(ctx context.Context, job Job) error
}

// What an adapter gives and the decision takes (the decision package's plan.go), under the
// names the adapters and admitters know them by.
type (
	Job          = decision.Job
	Plan         = decision.Plan
	Group        = decision.Group
	Replica      = decision.Replica
	Replicas     = decision.Replicas
	Outcome      = decision.Outcome
	PlannedChild = decision.PlannedChild
	Children     = decision.Children
	KindStatus   = decision.KindStatus
	ObjectKind   = decision.ObjectKind
	Verdict      = decision.Verdict
	Decision     = decision.Decision
	ReplicaWait  = decision.ReplicaWait
	RuleDecision = decision.RuleDecision
	Elastic      = decision.Elastic
)

// The kinds of the engine's own children.
const (
	PodKind        = decision.PodKind
	ServiceKind    = decision.ServiceKind
	SecretKind     = decision.SecretKind
	ConfigMapKind  = decision.ConfigMapKind
	DeploymentKind = decision.DeploymentKind
)

// The decision's constants that adapters and admitters use.
const (
	ReasonDeleted       = decision.ReasonDeleted
	MsgSucceeded        = decision.MsgSucceeded
	AnnotationChildHash = decision.AnnotationChildHash
)

// ChildName is decision.ChildName: the name of a replica's pod and Service.
func ChildName(job, replicaType string, rank int32) string {
	return decision.ChildName(job, replicaType, rank)
}

// ExitText is decision.ExitText: " with exit code N" for a non-zero code.
func ExitText(code int32) string { return decision.ExitText(code) }

// Seconds is decision.Seconds: n seconds as a Duration, as long as one can be past that.
func Seconds(n int64) time.Duration { return decision.Seconds(n) }

// PodEnded is decision.PodEnded: the pod runs no more.
func PodEnded(pod *corev1.Pod) bool { return decision.PodEnded(pod) }

// Listed is decision.Listed: names joined for a message, the first most of a long list.
func Listed(names []string, most int) string { return decision.Listed(names, most) }

// ElasticOf is decision.ElasticOf: a job's elastic type and bounds (nil: none).
func ElasticOf(l *batch.Lifecycle) *Elastic { return decision.ElasticOf(l) }

// EndMessage is decision.EndMessage: what an ended job's Failed or Completed condition says.
func EndMessage(s *batch.JobStatus) string { return decision.EndMessage(s) }

// BuildChild is decision.BuildChild: a plan's object built as the job's child, with its hash.
func BuildChild(job Job, o PlannedChild, current metav1.Object) (metav1.Object, error) {
	return decision.BuildChild(job, o, current)
}

// BuiltOtherwise is decision.BuiltOtherwise: the plan built something else than cur.
func BuiltOtherwise(cur, built metav1.Object) bool { return decision.BuiltOtherwise(cur, built) }
