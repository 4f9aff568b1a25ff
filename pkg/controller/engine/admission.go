package engine

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
)

// Admission: a system outside the controller that decides when a job's pods may be made, and
// where (Kueue's quota and queues; a gang scheduler's pod groups). The engine knows it only
// through an Admitter: it asks each admitter, in order, for its verdict before deciding, holds
// the job as a pause holds it (no pods) until every admitter that applies has admitted it,
// lets the admitters complete the pods it makes, and tells them what each sync did.

// Admitter is one admission system, as the engine sees it.
type Admitter interface {
	// Kinds are the kinds of children the admitter makes for jobs (Kueue's Workload). Each
	// controller adds them to its table of child kinds, and watches, reads and writes them as
	// it does its own; an admitter's kinds close over its own clients and informers. None
	// when the admitter's API is not served.
	Kinds() []*ChildKind
	// Watch is called once by the controller of each kind, before the informers start. The
	// admitter registers what else should sync the kind's jobs (a Kueue priority class that
	// is created), and returns the informers the controller waits for besides its children's.
	Watch(jobs Jobs) []cache.InformerSynced
	// Admit is the admitter's verdict on a job about to be decided, nil when the admitter does
	// not apply to the job. It may complete the plan: its own children go in Plan.Objects,
	// and it may take over Plan.Scheduler (whose queue and priority then mean its own). An
	// *InvalidSpecError fails the job with its message.
	Admit(job Job, plan *Plan, children Children) (*Verdict, error)
	// Decided tells the admitter, once a decision is carried out, what the sync did to the
	// job: started, ready, lost readiness, paused, stopped for it, or ended. v is its own
	// verdict of that sync.
	Decided(ctx context.Context, job Job, v *Verdict, r Report) error
	// Ended tells the admitter that a job ended outside a decision (its spec cannot run, a
	// child's name is taken): what it holds for the job can go once no pod runs.
	Ended(ctx context.Context, job Job, r Report) error
}

// Forgetter is an Admitter that remembers something of each job in memory (what its events
// already said). A job deleted while it waits or runs ends through no decision, so nothing
// else would clear it: Forget is called once the job's deletion is seen.
type Forgetter interface {
	Forget(job types.UID)
}

// Jobs is what an admitter sees of the controller of one kind.
type Jobs interface {
	// Kind is the kind of the jobs.
	Kind() string
	// List lists the jobs in the cache.
	List() []Job
	// Sync has a job synced soon, by its key (namespace/name).
	Sync(key string)
}

// InvalidSpecError is a job that an admitter cannot admit as it is written: the job fails
// with the message.
type InvalidSpecError struct{ Message string }

func (e *InvalidSpecError) Error() string { return e.Message }

// verdicts are the verdicts of the admitters that apply to one job in one sync, in their
// order.
type verdicts struct {
	by   []Admitter
	list []*Verdict
}

// admit asks every admitter for its verdict on the job.
func (c *Controller) admit(job Job, plan *Plan, children Children) (*verdicts, error) {
	vs := &verdicts{}
	for _, admitter := range c.options.Admitters {
		v, err := admitter.Admit(job, plan, children)
		if err != nil {
			return nil, err
		}
		if v != nil {
			vs.by, vs.list = append(vs.by, admitter), append(vs.list, v)
		}
	}
	return vs, nil
}

// combined is what Decide takes of the verdicts: admitted only when every one is, the first
// that waits saying why; nil when no admitter applies.
func (vs *verdicts) combined() *Verdict {
	if len(vs.list) == 0 {
		return nil
	}
	out := &Verdict{Admitted: true}
	for _, v := range vs.list {
		if v.RequeueAfter > 0 {
			out.RequeueAfter = decision.MinPositive(out.RequeueAfter, v.RequeueAfter)
		}
		if !v.Admitted && out.Admitted {
			out.Admitted, out.Reason, out.Message = false, v.Reason, v.Message
		}
		for t := range v.Gang {
			if out.Gang == nil {
				out.Gang = map[string]bool{}
			}
			out.Gang[t] = true
		}
		for t, n := range v.Counts {
			if had, ok := out.Counts[t]; !ok || n < had {
				if out.Counts == nil {
					out.Counts = map[string]int32{}
				}
				out.Counts[t] = n
			}
		}
	}
	list := vs.list
	out.Pod = func(replicaType string, pod *corev1.Pod) {
		for _, v := range list {
			if v.Pod != nil {
				v.Pod(replicaType, pod)
			}
		}
	}
	return out
}

// decided tells the admitters that gave a verdict what the sync did: before is the job as
// the sync found it, after as the sync left it (its status written).
func (c *Controller) decided(ctx context.Context, before, after Job, vs *verdicts, d *Decision, children Children) error {
	if len(vs.by) == 0 {
		return nil
	}
	if d.Elsewhere {
		// The admitters hear of a job another controller runs as that controller reports it
		// (its status), so that a queue's eviction is handed back at once: there is no pod
		// to wait for here. Ready is what that status says: Kueue's waitForPodsReady on
		// this cluster counts from the admission here, and would evict a job that runs
		// elsewhere if nothing said it started.
		r := c.report(d, children, after.JobStatus().Condition(batch.JobConditionRunning).Reason)
		r.Elsewhere, r.Ready = true, everyReplicaRunning(after.JobStatus())
		return c.tell(ctx, after, vs, r)
	}
	return c.tell(ctx, after, vs, c.report(d, children, before.JobStatus().Condition(batch.JobConditionRunning).Reason))
}

// tell passes a sync's report to each admitter that gave a verdict.
func (c *Controller) tell(ctx context.Context, job Job, vs *verdicts, r Report) error {
	for i, admitter := range vs.by {
		if err := admitter.Decided(ctx, job, vs.list[i], r); err != nil {
			return err
		}
	}
	return nil
}

// ended tells every admitter that the job ended outside a decision.
func (c *Controller) ended(ctx context.Context, job Job) error {
	if len(c.options.Admitters) == 0 {
		return nil
	}
	children, err := c.children(job)
	if err != nil {
		return err
	}
	r := c.report(&Decision{Status: job.JobStatus()}, children, "")
	for _, admitter := range c.options.Admitters {
		if err := admitter.Ended(ctx, job, r); err != nil {
			return err
		}
	}
	return nil
}

// controllerJobs is the controller as an admitter sees it.
type controllerJobs struct{ c *Controller }

func (j controllerJobs) Kind() string { return j.c.kind }

func (j controllerJobs) List() []Job {
	var jobs []Job
	for _, o := range j.c.adapter.Informer().GetStore().List() {
		if job, ok := o.(Job); ok {
			jobs = append(jobs, job)
		}
	}
	return jobs
}

func (j controllerJobs) Sync(key string) { j.c.queue.Add(key) }
