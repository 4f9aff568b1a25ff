package decision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// AnnotationChildHash records, on each of a job's other children, a hash of the object the
// plan built for it. A child is updated when the plan builds something else: the hash, not
// the object, is compared, so fields the API server defaults never count as a change.
const AnnotationChildHash = batch.GroupName + "/child-hash"

// objects decides the job's other children: the plan's objects, kept until the job is
// deleted, and the replicas' Services, which live with the replicas (a pause deletes them,
// so does the clean-up unless its policy is None). have are the children there are, of the
// kinds in the table; it returns those to create, update and delete.
func (x *decider) objects(job Job, have []metav1.Object, kinds KindTable) (create, update, remove []metav1.Object, err error) {
	want := append([]PlannedChild(nil), x.plan.Objects...)
	withReplicas := len(x.plan.ServicePorts) > 0 && !x.paused && (!x.finished || x.plan.CleanUp == batch.CleanUpNone)
	if withReplicas {
		for gi := range x.plan.Groups {
			g := &x.plan.Groups[gi]
			for rank := range g.Replicas {
				want = append(want, replicaService(job, x.plan, g, rank))
			}
		}
	}
	existing := make(map[string]metav1.Object, len(have))
	for _, o := range have {
		existing[objectKey(kinds.KindOf(o), o.GetName())] = o
	}
	wanted := make(map[string]bool, len(want))
	for _, o := range want {
		key := objectKey(o.Kind, o.Name)
		wanted[key] = true
		cur := existing[key]
		switch {
		case cur != nil && cur.GetDeletionTimestamp() != nil:
			continue // made again once it is gone
		case x.finished || o.Keep:
			continue // an ended job keeps what it has, as it has it
		}
		built, err := BuildChild(job, o, cur)
		if err != nil {
			return nil, nil, nil, err
		}
		if k := kinds.KindOf(built); k == "" || k != o.Kind {
			return nil, nil, nil, fmt.Errorf("making %s %s: built a %T", o.Kind, o.Name, built)
		}
		switch {
		case cur == nil:
			create = append(create, built)
		case !BuiltOtherwise(cur, built): // as the plan wants it
		case kinds.ReplaceOnChange(cur):
			remove = append(remove, cur) // made again once it is gone
		default:
			built.SetResourceVersion(cur.GetResourceVersion()) // as seen: a change since is not overwritten
			built.SetUID(cur.GetUID())
			update = append(update, built)
		}
	}
	for _, o := range have {
		if !wanted[objectKey(kinds.KindOf(o), o.GetName())] && o.GetDeletionTimestamp() == nil {
			remove = append(remove, o)
		}
	}
	return create, update, remove, nil
}

// BuildChild builds a plan's object as the job's child, with the hash of what was built (an
// admitter compares its request with the one that exists by it).
func BuildChild(job Job, o PlannedChild, current metav1.Object) (metav1.Object, error) {
	obj, err := o.Build(current)
	if err != nil {
		return nil, fmt.Errorf("making %s %s: %w", o.Kind, o.Name, err)
	}
	obj.SetName(o.Name)
	obj.SetNamespace(job.GetNamespace())
	labels := map[string]string{}
	for k, v := range obj.GetLabels() {
		labels[k] = v
	}
	labels[batch.LabelJobName] = job.GetName()
	labels[batch.LabelControllerUID] = string(job.GetUID())
	obj.SetLabels(labels)
	obj.SetOwnerReferences(controllerRef(job))
	annotations := map[string]string{}
	for k, v := range obj.GetAnnotations() {
		annotations[k] = v
	}
	delete(annotations, AnnotationChildHash)
	obj.SetAnnotations(annotations)
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("making %s %s: %w", o.Kind, o.Name, err)
	}
	sum := sha256.Sum256(data)
	annotations[AnnotationChildHash] = hex.EncodeToString(sum[:8])
	if o.Unhashed != nil {
		o.Unhashed(obj)
	}
	return obj, nil
}

// BuiltOtherwise reports whether the plan built something else than what cur was built from.
func BuiltOtherwise(cur, built metav1.Object) bool {
	return cur.GetAnnotations()[AnnotationChildHash] != built.GetAnnotations()[AnnotationChildHash]
}

func objectKey(kind ObjectKind, name string) string { return string(kind) + "/" + name }
