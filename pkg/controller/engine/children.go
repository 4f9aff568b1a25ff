package engine

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A job's children as the informers' caches hold them, and when its ended pods were seen to
// end (which the caches do not keep).

// IndexByJob indexes children by the UID of their job, so that a sync reads its own children
// instead of filtering every object of the namespace. Every child informer has it, an
// admitter's too.
const IndexByJob = "t9k-job-uid"

func jobUIDOf(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if uid := m.GetLabels()[batch.LabelControllerUID]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

// children lists the children job controls, of every kind, from the informer caches, and
// when the ended pods were seen to end.
func (c *Controller) children(job Job) (Children, error) {
	ch := Children{Kinds: c.kinds}
	for _, cc := range c.caches {
		objs, err := cc.indexer.ByIndex(IndexByJob, string(job.GetUID()))
		if err != nil {
			return Children{}, err
		}
		for _, obj := range objs {
			o, ok := obj.(metav1.Object)
			if !ok {
				continue
			}
			if ref := metav1.GetControllerOfNoCopy(o); ref == nil || ref.UID != job.GetUID() {
				continue // owned by UID, never by name alone
			}
			if pod := asPod(o); pod != nil {
				ch.Pods = append(ch.Pods, pod)
			} else {
				ch.Objects = append(ch.Objects, o)
			}
		}
	}
	for _, p := range ch.Pods {
		if seen, ok := c.endSeen.Load(p.UID); ok {
			if ch.EndSeen == nil {
				ch.EndSeen = map[types.UID]time.Time{}
			}
			ch.EndSeen[p.UID] = seen.(time.Time)
		}
	}
	ch.Gone = c.gone.of(job.GetUID(), ch.Pods)
	ch.Failing = c.failing.all(job.GetUID())
	return ch, nil
}
