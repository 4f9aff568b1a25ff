package engine

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Clients write the children. An admitter's kinds write with clients of their own.
type Clients struct {
	Kube kubernetes.Interface
}

// Informers are the factories of the children's informers, filtered to the project's children
// (as cmd/ sets them up), made by NewInformers. An admitter's kinds are watched by informers
// of its own.
type Informers struct {
	Kube informers.SharedInformerFactory
	// gone is what the informers remember of disrupted pods (gone.go); nil when Kube was
	// made otherwise: the controller then remembers from the delete events alone.
	gone *goneMemory
	// failing is what they remember of pods that restart in place as a container fails
	// (gone.go, rememberFailing).
	failing *goneMemory
}

// ChildKind is one kind of object a job may own: how the engine watches it, and reads and
// writes it. Every kind a controller creates is one entry of its table: the engine's own
// (childKinds), then its admitters' (Admitter.Kinds). The informers, event handlers,
// expectations, caches and writes loop over that table.
type ChildKind struct {
	Kind ObjectKind
	// Group and Resource name the kind's API resource, as RBAC does; metrics and events name
	// it by Resource.
	Group, Resource string
	// BeforePods: pods may mount it, so it is created and updated before the pods of a sync.
	BeforePods bool
	// ReplaceOnChange: a child of this kind whose built content changed is deleted and made
	// again rather than updated (an admitter's request that cannot change once granted, such
	// as Kueue's Workload).
	ReplaceOnChange bool
	// Urgent: a change of a child of this kind is another controller's decision about the job
	// (an admitter admits or evicts it), and syncs the job at once, never batched.
	Urgent bool
	// Informer is the kind's shared informer in the factories of the project's children; nil
	// when the kind's API is not served: the kind is then not watched.
	Informer func(Informers) cache.SharedIndexInformer

	is     func(metav1.Object) bool
	create func(ctx context.Context, clients Clients, obj metav1.Object) error
	update func(ctx context.Context, clients Clients, obj metav1.Object) error
	delete func(ctx context.Context, clients Clients, obj metav1.Object, opts metav1.DeleteOptions) error
	get    func(ctx context.Context, clients Clients, namespace, name string) (metav1.Object, error)
}

// childKinds is the table of the kinds of children. Pods come first: they are the replicas.
var childKinds = []ChildKind{
	childKind(PodKind, "", "pods", false, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Core().V1().Pods().Informer()
	},
		func(c Clients, ns string) Client[*corev1.Pod] { return c.Kube.CoreV1().Pods(ns) }),
	childKind(ServiceKind, "", "services", false, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Core().V1().Services().Informer()
	},
		func(c Clients, ns string) Client[*corev1.Service] { return c.Kube.CoreV1().Services(ns) }),
	childKind(SecretKind, "", "secrets", true, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Core().V1().Secrets().Informer()
	},
		func(c Clients, ns string) Client[*corev1.Secret] { return c.Kube.CoreV1().Secrets(ns) }),
	childKind(ConfigMapKind, "", "configmaps", true, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Core().V1().ConfigMaps().Informer()
	}, func(c Clients, ns string) Client[*corev1.ConfigMap] {
		return c.Kube.CoreV1().ConfigMaps(ns)
	}),
	childKind(DeploymentKind, "apps", "deployments", false, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Apps().V1().Deployments().Informer()
	}, func(c Clients, ns string) Client[*appsv1.Deployment] {
		return c.Kube.AppsV1().Deployments(ns)
	}),
}

// ChildKinds returns the engine's own child kinds (for checks that every kind is covered, such
// as the controller's RBAC; an admitter lists its own).
func ChildKinds() []ChildKind { return append([]ChildKind(nil), childKinds...) }

// Client is what the engine uses of a typed client-go client.
type Client[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// NewChildKind makes an admitter's child kind from its informer and typed client: a change of
// one is the admitter's decision about the job (Urgent), and a new request replaces the old
// (ReplaceOnChange). informer is nil when the kind's API is not served.
func NewChildKind[T metav1.Object](kind ObjectKind, group, resource string, informer cache.SharedIndexInformer,
	clientFor func(namespace string) Client[T]) *ChildKind {
	k := childKind(kind, group, resource, false, func(Informers) cache.SharedIndexInformer { return informer },
		func(_ Clients, ns string) Client[T] { return clientFor(ns) })
	k.ReplaceOnChange, k.Urgent = true, true
	return &k
}

// childKind makes a table entry from a kind's typed client.
func childKind[T metav1.Object](kind ObjectKind, group, resource string, beforePods bool, informer func(Informers) cache.SharedIndexInformer,
	clientFor func(clients Clients, namespace string) Client[T]) ChildKind {
	return ChildKind{
		Kind: kind, Group: group, Resource: resource, BeforePods: beforePods, Informer: informer,
		is: func(o metav1.Object) bool { _, ok := o.(T); return ok },
		create: func(ctx context.Context, c Clients, o metav1.Object) error {
			made, err := clientFor(c, o.GetNamespace()).Create(ctx, o.(T), metav1.CreateOptions{FieldManager: FieldManager})
			if err == nil {
				o.SetUID(made.GetUID()) // what a failure later in the same sync deletes it by
			}
			return err
		},
		update: func(ctx context.Context, c Clients, o metav1.Object) error {
			_, err := clientFor(c, o.GetNamespace()).Update(ctx, o.(T), metav1.UpdateOptions{FieldManager: FieldManager})
			return err
		},
		delete: func(ctx context.Context, c Clients, o metav1.Object, opts metav1.DeleteOptions) error {
			return clientFor(c, o.GetNamespace()).Delete(ctx, o.GetName(), opts)
		},
		get: func(ctx context.Context, c Clients, ns, name string) (metav1.Object, error) {
			return clientFor(c, ns).Get(ctx, name, metav1.GetOptions{})
		},
	}
}

// kindTable is a controller's table of child kinds: the engine's own, then its admitters'.
type kindTable []*ChildKind

// ownKinds is the table of the engine's own kinds.
func ownKinds() kindTable {
	t := make(kindTable, len(childKinds))
	for i := range childKinds {
		t[i] = &childKinds[i]
	}
	return t
}

// of finds the table entry of an object (nil for a kind the table does not hold).
func (t kindTable) of(o metav1.Object) *ChildKind {
	if t == nil {
		t = ownKinds()
	}
	for _, k := range t {
		if k.is(o) {
			return k
		}
	}
	return nil
}

// KindOf is the kind of an object ("" for one the table does not hold): the table is the
// decision's KindTable.
func (t kindTable) KindOf(o metav1.Object) ObjectKind {
	if k := t.of(o); k != nil {
		return k.Kind
	}
	return ""
}

// ReplaceOnChange: a child of o's kind whose built content changed is made again.
func (t kindTable) ReplaceOnChange(o metav1.Object) bool {
	k := t.of(o)
	return k != nil && k.ReplaceOnChange
}

// podKind is the table entry of pods, the replicas: the first of the engine's own.
var podKind = &childKinds[0]
