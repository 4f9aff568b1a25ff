package engine

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	kueue "github.com/t9k-jobs/t9k-jobs/pkg/apis/kueue/v1beta2"
	kueueclient "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/clientset/versioned"
	kueueinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/kueue/informers/externalversions"
)

// Clients write the children.
type Clients struct {
	Kube kubernetes.Interface
	// Kueue writes Workloads; nil when Kueue's API is not served.
	Kueue kueueclient.Interface
}

// Informers are the factories of the children's informers, filtered to the project's children
// (as cmd/ sets them up).
type Informers struct {
	Kube informers.SharedInformerFactory
	// Kueue watches the jobs' Workloads, and KueueCluster what their admissions name
	// (ResourceFlavors, WorkloadPriorityClasses: not the project's children, so not filtered
	// to them). Both are nil when Kueue's API is not served, and then none of it is watched.
	Kueue, KueueCluster kueueinformers.SharedInformerFactory
}

// ChildKind is one kind of object a job may own: how the engine watches it, and reads and
// writes it. Every kind the engine creates is one entry of childKinds; the informers, event
// handlers, expectations, caches and writes loop over that table.
type ChildKind struct {
	Kind ObjectKind
	// Group and Resource name the kind's API resource, as RBAC does; metrics and events name
	// it by Resource.
	Group, Resource string
	// BeforePods: pods may mount it, so it is created and updated before the pods of a sync.
	BeforePods bool
	// ReplaceOnChange: a child of this kind whose built content changed is deleted and made
	// again rather than updated (a Workload's pod sets cannot change once Kueue reserved
	// quota for them).
	ReplaceOnChange bool
	// Urgent: a change of a child of this kind is another controller's decision about the job
	// (Kueue admits or evicts it), and syncs the job at once, never batched.
	Urgent bool
	// Informer is the kind's shared informer in the factories of the project's children; nil
	// when the kind's API is not served (its factory is nil): the kind is then not watched.
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
		func(c Clients, ns string) client[*corev1.Pod] { return c.Kube.CoreV1().Pods(ns) }),
	childKind(ServiceKind, "", "services", false, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Core().V1().Services().Informer()
	},
		func(c Clients, ns string) client[*corev1.Service] { return c.Kube.CoreV1().Services(ns) }),
	childKind(SecretKind, "", "secrets", true, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Core().V1().Secrets().Informer()
	},
		func(c Clients, ns string) client[*corev1.Secret] { return c.Kube.CoreV1().Secrets(ns) }),
	childKind(ConfigMapKind, "", "configmaps", true, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Core().V1().ConfigMaps().Informer()
	}, func(c Clients, ns string) client[*corev1.ConfigMap] {
		return c.Kube.CoreV1().ConfigMaps(ns)
	}),
	childKind(DeploymentKind, "apps", "deployments", false, func(f Informers) cache.SharedIndexInformer {
		return f.Kube.Apps().V1().Deployments().Informer()
	}, func(c Clients, ns string) client[*appsv1.Deployment] {
		return c.Kube.AppsV1().Deployments(ns)
	}),
	queueObject(childKind(WorkloadKind, kueue.GroupName, "workloads", false, func(f Informers) cache.SharedIndexInformer {
		if f.Kueue == nil {
			return nil
		}
		return f.Kueue.Kueue().V1beta2().Workloads().Informer()
	}, func(c Clients, ns string) client[*kueue.Workload] {
		return c.Kueue.KueueV1beta2().Workloads(ns)
	})),
}

// queueObject marks a kind as a queueing system's object for the job: replaced when it
// changes, its changes urgent.
func queueObject(k ChildKind) ChildKind {
	k.ReplaceOnChange, k.Urgent = true, true
	return k
}

// ChildKinds returns the table of child kinds (for checks that every kind is covered, such as
// the controller's RBAC).
func ChildKinds() []ChildKind { return append([]ChildKind(nil), childKinds...) }

// client is what the engine uses of a typed client-go client.
type client[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// childKind makes a table entry from a kind's typed client.
func childKind[T metav1.Object](kind ObjectKind, group, resource string, beforePods bool, informer func(Informers) cache.SharedIndexInformer,
	clientFor func(clients Clients, namespace string) client[T]) ChildKind {
	return ChildKind{
		Kind: kind, Group: group, Resource: resource, BeforePods: beforePods, Informer: informer,
		is: func(o metav1.Object) bool { _, ok := o.(T); return ok },
		create: func(ctx context.Context, c Clients, o metav1.Object) error {
			_, err := clientFor(c, o.GetNamespace()).Create(ctx, o.(T), metav1.CreateOptions{})
			return err
		},
		update: func(ctx context.Context, c Clients, o metav1.Object) error {
			_, err := clientFor(c, o.GetNamespace()).Update(ctx, o.(T), metav1.UpdateOptions{})
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

// kindOf finds the table entry of an object (nil for a kind the engine does not own).
func kindOf(o metav1.Object) *ChildKind {
	for i := range childKinds {
		if childKinds[i].is(o) {
			return &childKinds[i]
		}
	}
	return nil
}

// kindNamed finds the table entry of a kind.
func kindNamed(kind ObjectKind) *ChildKind {
	for i := range childKinds {
		if childKinds[i].Kind == kind {
			return &childKinds[i]
		}
	}
	return nil
}

// kindName is the kind of an object ("" for one the engine does not own).
func kindName(o metav1.Object) ObjectKind {
	if k := kindOf(o); k != nil {
		return k.Kind
	}
	return ""
}
