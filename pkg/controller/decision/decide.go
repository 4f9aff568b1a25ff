package decision

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// Decision is what one sync does: the status to write, then the writes to send.
type Decision struct {
	Status     *batch.JobStatus
	CreatePods []*corev1.Pod
	DeletePods []*corev1.Pod
	// The job's other children, of any kind in the table: the plan's objects and the
	// replicas' Services. Created when missing, updated when what the plan builds for them
	// changed, deleted when the plan no longer has them.
	CreateObjects []metav1.Object
	UpdateObjects []metav1.Object
	DeleteObjects []metav1.Object
	// Restarted names the replicas restarted by this decision; Disrupted those whose
	// disruption it recorded (their pods are replaced, no restart counted).
	Restarted []string
	Disrupted []string
	// JobRestart, when the decision restarts (or replaces) the whole job, says why;
	// JobRestartBy names what asked for it (spec.restartScope: Job, a rule, the progress
	// deadline).
	JobRestart, JobRestartBy string
	// JobRestartCause is what kind of thing restarts the whole job, one of a few words for
	// metrics and event types: Failure (restartScope Job), Rule, Stall, Disruption, Request.
	JobRestartCause string
	// RequeueAfter asks for another sync after a restart backoff, at the deadline, or when an
	// admitter asks for one (0: none).
	RequeueAfter time.Duration
	// Outcome is set when the job ends with this decision.
	Outcome *Outcome
	// Waiting says which replicas wait for others to be ready before they are created.
	Waiting string
	// Waits say which replicas' pods wait, and why (waiting.go): the Running condition says
	// them, and each new reason is announced once.
	Waits []ReplicaWait
	// Gated: a pod of the job is held by scheduling gates (Kueue's topology gate, until its
	// ungater gives it its node): a starting job's status is held a little longer for it
	// (holdStartingStatus).
	Gated bool
	// KindStatus is the kind's own part of the status (Plan.KindStatus), written with it.
	KindStatus KindStatus
	// DebugHint is the plan's DebugHint when this decision's status is the first to say it
	// (in the Running condition): a DebugMode event says it once that status is written.
	DebugHint string
	// RuleDecisions are what failure policy rules decided (rules.go); ExcludedNodes and
	// DroppedNodes the nodes this decision added to, or dropped from, those new pods avoid
	// (nodes.go); Stalled, when set, names the replicas that stopped reporting progress.
	RuleDecisions []RuleDecision
	ExcludedNodes []batch.ExcludedNode
	DroppedNodes  []string
	Stalled       string
	// Elsewhere: the decision on a job another controller runs, narrowed to the admitters'
	// children (keepAdmittersOnly). Its status, when it has one of its own, says only why the
	// job waits, not what the decision makes: it is written first, and at once.
	Elsewhere bool
	// RestartPods are pods restarted in place for the job's next attempt, and ReleasePods
	// the pods restarted so whose containers may now run it (inplace.go). InPlaceFallback,
	// when set, names the pods a whole-job restart made again though the job restarts in
	// place, and why; InPlaceUnplaced, the pods with the agent no node can take, made again
	// without it.
	RestartPods     []PodRestart
	ReleasePods     []PodRelease
	InPlaceFallback string
	InPlaceUnplaced []string
	// Resized, when this decision changes the number of replicas of the job's elastic type,
	// says from what to what and why (elastic.go): a Resized event says it.
	Resized string
}

// Decide compares a job's plan with its children and decides the next status and writes. It
// is a pure function of its inputs, so that every rule has a unit test; the status it returns
// already counts the restarts it orders, which is what makes a restart count survive a crash
// between the status write and the pod deletion.
//
// It decides in two steps: first every replica as it is and what it would do (restart, be
// created), and the outcome on that; then, only if the job goes on, the restarts and
// creations. A sync that ends the job restarts nothing: a restart is counted only when it
// happens.
//
// The policies are applied in the order below, each in its own file; what one decides of the
// job it returns, or notes on the replica it is about, and Decide combines it here.
//
// admission is the admitters' verdict on the job (the engine's admission.go), nil when none
// applies.
//
// An error says that a child could not be built (PlannedChild.Build failed): nothing is
// decided, and the sync that asked writes nothing and is retried.
func Decide(job Job, plan *Plan, children Children, admission *Verdict, now time.Time) (*Decision, error) {
	old := job.JobStatus()
	d := &Decision{Status: &batch.JobStatus{ObservedGeneration: job.GetGeneration()}}
	x := &decider{plan: plan, admission: admission, now: now, endSeen: children.EndSeen, gone: children.Gone}
	if admission != nil {
		d.RequeueAfter = admission.RequeueAfter
	}
	// lookAgain asks for a sync once wait has passed (a backoff, a deadline, a grace).
	lookAgain := func(wait time.Duration) {
		if wait > 0 {
			d.RequeueAfter = MinPositive(d.RequeueAfter, wait)
		}
	}
	x.finished = old.Finished()
	// A job its admitters have not admitted is held as a pause holds it: no pods.
	x.unadmitted = admission != nil && !admission.Admitted && !plan.Paused && !x.finished
	x.paused = (plan.Paused || x.unadmitted) && !x.finished
	resumed := !plan.Paused && wasPaused(old)
	x.noAgent = plan.InPlace != nil && old.ConditionTrue(batch.JobConditionInPlaceUnavailable)
	prevByName := map[string]batch.ReplicaStatus{}
	for _, task := range old.Tasks {
		for _, r := range task.Replicas {
			prevByName[r.Name] = r
		}
	}
	if plan.InPlace != nil {
		x.inPlaceReal = map[string]*corev1.Pod{}
		for _, p := range children.Pods {
			if inPlacePod(p) {
				x.inPlaceReal[p.Name] = p
				x.inPlaceOrder = append(x.inPlaceOrder, p)
			}
		}
	}
	// Pods that restart in place, as the policies read them (inplace.go).
	pods, hidden := presentInPlace(plan, children.Pods, currentAttempt(old), prevByName, children.Failing)

	// 1. Each replica as it is, and what it would do (replicas.go): its restart policy,
	// backoff and limits (restart.go), the failure policy rule that matches how its pod ended
	// (rules.go), a disruption (disruption.go). The restarts it would take count against the
	// job's backoffLimit in this order.
	budget := newRestartBudget(plan, old)
	podByName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		podByName[p.Name] = p
	}
	var all []*replica
	desired := map[string]bool{}
	for gi := range plan.Groups {
		g := &plan.Groups[gi]
		for rank := range x.size(g) {
			name := g.podName(job.GetName(), rank)
			desired[name] = true
			r := x.observe(g, rank, prevByName[name], podByName[name], budget)
			r.status.Name = name
			all = append(all, r)
		}
	}
	// What the failure policy's rules decided of the job (rules.go), and the backoffs
	// restarts wait for.
	ruled, ruleDecisions := applyRulings(nil, nil, all)
	d.RuleDecisions = ruleDecisions
	for _, r := range all {
		lookAgain(r.backoff)
	}

	// 2. Groups that wait for others to be Ready are held back (after.go).
	if !plan.Debug {
		d.Waiting = x.holdBack(all)
	}

	// 3. Replicas that stopped reporting progress (stall.go), and what the rules, or the
	// default, do with each.
	stalled, stalledText, stallWait := x.stalls(old, all, budget)
	d.Stalled = stalledText
	lookAgain(stallWait)
	ruled, d.RuleDecisions = applyRulings(ruled, d.RuleDecisions, stalled)

	// 4. The nodes new pods avoid (nodes.go): the oldest dropped when nothing fits without it.
	excluded := slices.Clone(old.ExcludedNodes)
	if !x.finished && !x.paused {
		u := x.dropUnfit(excluded, all)
		excluded = u.left
		if u.dropped != "" {
			d.DroppedNodes = append(d.DroppedNodes, u.dropped)
		}
		d.DeletePods = append(d.DeletePods, u.remade...)
		lookAgain(u.wait)
		// Pods with the agent that no node can take are made again without it (inplace.go).
		var remade []*corev1.Pod
		remade, d.InPlaceUnplaced = x.unplacedWithAgent(all)
		d.DeletePods = append(d.DeletePods, remade...)
		x.noAgent = x.noAgent || len(remade) > 0 // what the job knows from now on, as its condition will say
	}

	// 5. The outcome: the deadline (deadlines.go), a rule or a stall that fails the job, the
	// plan's Judge, the start deadline.
	views := Replicas{}
	for _, r := range all {
		views[r.group.Type] = append(views[r.group.Type], r.view)
	}
	d.Status.StartTime = x.startTime(old.StartTime, pods)
	d.Status.Restarts = old.Restarts
	d.Status.Attempt = currentAttempt(old)
	if !x.finished && !x.paused && !plan.Debug {
		var left time.Duration
		d.Outcome, left = x.deadline(d.Status.StartTime)
		lookAgain(left)
		if d.Outcome == nil {
			d.Outcome = ruled
		}
		if d.Outcome == nil && plan.Judge != nil {
			d.Outcome = plan.Judge(views)
		}
		if d.Outcome == nil {
			d.Outcome, left = x.startupDeadline(job.GetName(), d.Status.StartTime, old, all)
			lookAgain(left)
		}
		x.finished = d.Outcome != nil
	}

	// 6. A whole job's restart (restartjob.go): spec.restartScope Job, a rule's RestartJob, a
	// stall's default, a request (requested.go), or one under way; the barrier holds new pods
	// until the old are gone.
	barrier := false
	restartsJob := slices.ContainsFunc(all, func(r *replica) bool { return r.ruling.restartJob })
	requested := restartRequest(job, d.Status.Attempt)
	if (plan.RestartJob || restartsJob || requested != "" || jobRestartUnderway(all)) && !x.finished && !x.paused {
		var restart *jobRestart
		restart, barrier = x.restartJob(all, requested)
		if restart != nil {
			if restart.counted {
				d.Status.Restarts++
			}
			d.Status.Attempt++
			d.JobRestart, d.JobRestartBy, d.JobRestartCause = restart.why, restart.by, restart.cause
		}
	}

	// 7. What each replica does, now that the outcome is known (replicas.go); the node a
	// replica's pod ended on, when the ending points at it, is avoided from then on (nodes.go).
	// A gang's new pods wait while an old pod of the gang goes (gangwait.go).
	var failedNames []string
	gangWaits, gangLeft := x.gangWait(pods)
	for _, r := range all {
		c := x.carryOut(r)
		stampAttempt(r)
		if c.restarted {
			d.Restarted = append(d.Restarted, r.status.Name)
		}
		if c.ended != nil {
			var added *batch.ExcludedNode
			if excluded, added = x.avoidNode(excluded, r, c.ended); added != nil {
				d.ExcludedNodes = append(d.ExcludedNodes, *added)
			}
		}
		switch {
		case c.remove != nil:
			d.DeletePods = append(d.DeletePods, c.remove)
		case c.create && barrier:
			// The whole job restarts: no new pod meets an old one. A replica whose restart is
			// counted keeps its status (Deleted, its old pod's UID) and is created by a later
			// decision, once every old pod is gone.
		case c.create && gangWaits && x.inGang(r):
			// Made with the rest of its gang, once the gang's old pods are gone: as above, the
			// replica keeps its status until then.
			lookAgain(gangLeft)
		case c.create:
			d.CreatePods = append(d.CreatePods, x.createPod(job, r, resumed, excluded, d.Status.Attempt))
		}
		if r.status.Phase == batch.ReplicaFailed || (r.pod != nil && r.pod.Status.Phase == corev1.PodFailed && r.action != replaceNow) {
			failedNames = append(failedNames, failureText(r.status))
		}
		if r.disrupted {
			d.Disrupted = append(d.Disrupted, r.status.Name)
		}
	}
	for _, g := range plan.Groups {
		task := batch.TaskStatus{Type: g.Type}
		for _, r := range all {
			if r.group.Type == g.Type {
				task.RestartCount += r.status.RestartCount
				task.Replicas = append(task.Replicas, r.status)
			}
		}
		d.Status.Tasks = append(d.Status.Tasks, task)
	}

	// 8. Pods the plan no longer has (scaled down, or a type removed) go; so do all of them on
	// a pause, and those the clean-up policy names once the job has ended (pods.go).
	for _, p := range pods {
		if !desired[p.Name] && p.DeletionTimestamp == nil {
			d.DeletePods = append(d.DeletePods, p)
		}
	}
	switch {
	case x.finished:
		d.DeletePods = append(d.DeletePods, cleanUp(plan, pods, d.DeletePods)...)
	case x.paused:
		d.DeletePods = append(d.DeletePods, Unlisted(Live(pods), d.DeletePods)...)
	}
	// Pods that restart in place are restarted and released rather than deleted and made.
	var inPlaceWait time.Duration
	d.InPlaceFallback, inPlaceWait = x.keepInPlace(d, hidden)
	lookAgain(inPlaceWait)

	// 9. The job's other children (objects.go), and the kind's own status.
	var err error
	d.CreateObjects, d.UpdateObjects, d.DeleteObjects, err = x.objects(job, children.Objects, children.kinds())
	if err != nil {
		return nil, err
	}
	if plan.KindStatus != nil {
		d.KindStatus = plan.KindStatus(children)
	}

	// 10. The status: why replicas wait (waiting.go), phase and conditions (status.go), the
	// Stalled condition (stall.go), the nodes new pods avoid.
	hint := ""
	if plan.Debug {
		hint = plan.DebugHint
	}
	var unadmitted *Verdict
	if x.unadmitted {
		v := *admission
		v.Message += admissionWait(job.GetName(), all, old.Condition(batch.JobConditionRunning), now)
		unadmitted = &v
	}
	if !x.finished && !x.paused {
		d.Waits = waitsOf(job.GetName(), all)
		d.Gated = slices.ContainsFunc(pods, gated)
	}
	setPhaseAndConditions(d.Status, old, jobState{
		outcome: d.Outcome, paused: x.paused && !x.unadmitted, unadmitted: unadmitted, resumed: resumed,
		failed: failedNames, pods: pods, waiting: d.Waiting, waits: d.Waits, debugHint: hint, fewer: x.admittedFewer(),
	}, now)
	if hint != "" {
		running := d.Status.Condition(batch.JobConditionRunning)
		if running.Status == corev1.ConditionTrue && strings.HasSuffix(running.Message, hint) &&
			running.Message != old.Condition(batch.JobConditionRunning).Message {
			d.DebugHint = hint
		}
	}
	setStalled(d.Status, old, d.Stalled, now)
	x.setInPlaceUnavailable(d.Status, d.InPlaceUnplaced, now)
	d.Status.Progress = old.Progress.DeepCopy()
	if d.Status.Progress != nil && d.Status.Finished() {
		// A finished job is looked at for stalls no more: its pods' report times go, so
		// that the largest job's status stays small (test/apivalidation).
		d.Status.Progress.Replicas = nil
	}
	d.Status.ExcludedNodes = excluded
	d.Status.Aggregate = aggregate(d.Status.Tasks)
	d.Status.Elastic = elasticStatus(job, plan, d.Status.Tasks)
	d.Resized = x.resized(old, d.Status)
	d.Status.CompletionTime = CompletionTime(old, d.Status)
	return d, nil
}

// decider is what one Decide call knows of the job, the same for every policy: its inputs,
// and the job's state. The policies read it and write nothing to it: what each decides, it
// returns, or notes on the replica it is about (replica), and Decide combines it.
type decider struct {
	plan *Plan
	// admission is the admitters' verdict (nil: none applies).
	admission *Verdict
	now       time.Time
	endSeen   map[types.UID]time.Time
	gone      map[types.UID]*corev1.Pod
	// finished: the job has ended; before Decide knows the outcome, as the job's status says,
	// and from then on with the outcome too.
	finished bool
	// paused: the job is held, no replica has a pod (a pause, or unadmitted: an admitter has
	// not admitted it).
	paused     bool
	unadmitted bool
	// inPlaceReal are the job's pods that restart in place, by name, as they are (the
	// policies may read one as failed: presentInPlace), and inPlaceOrder the same in the
	// children's order; noAgent: the job asks to restart in place, but no node could take its
	// pods with the agent (inplace.go).
	inPlaceReal  map[string]*corev1.Pod
	inPlaceOrder []*corev1.Pod
	noAgent      bool
}

// currentAttempt is the job's attempt as its status says: a job's first life, or one whose
// status predates attempts, counts every whole-job restart it counted as an attempt.
func currentAttempt(old *batch.JobStatus) int32 {
	if old.Attempt == 0 {
		return old.Restarts + 1
	}
	return old.Attempt
}

// startTime is when the deadline counts from: the first creation of the replicas, again
// after a pause.
func (x *decider) startTime(old *metav1.Time, pods []*corev1.Pod) *metav1.Time {
	switch {
	case x.paused:
		return nil
	case old == nil && !x.finished:
		// The first sync creates the pods but does not write status: the next one takes
		// their creation time.
		t := metav1.NewTime(x.now)
		for _, p := range Live(pods) {
			if p.CreationTimestamp.Before(&t) && !p.CreationTimestamp.IsZero() {
				t = p.CreationTimestamp
			}
		}
		return &t
	}
	return old
}
